import { endpoint } from '../common/route.js';
import { listContracts } from './repository.js';
import { ContractList, ContractListQuery } from './schema.js';

export const contractEndpoints = [
  endpoint<ContractListQuery>({
    url: '/contracts',
    scopes: ['contracts'],
    operationId: 'listContracts',
    summary: 'List contracts',
    description: 'Training contracts of the key\'s school with what is paid and owed on each, optionally of one student, ordered by created_at then id.',
    tags: ['contracts'],
    list: 'contracts',
    querystring: ContractListQuery,
    response: ContractList,
    answer: ({ reads, tenant, query }) => listContracts(reads, tenant.id, query),
  }),
];
