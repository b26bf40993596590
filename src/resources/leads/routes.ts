import { endpoint } from '../common/route.js';
import { periodOf } from '../common/period.js';
import { listLeads } from './repository.js';
import { LeadList, LeadListQuery } from './schema.js';

export const leadEndpoints = [
  endpoint<LeadListQuery>({
    url: '/leads',
    scopes: ['leads'],
    operationId: 'listLeads',
    summary: 'List applications for training',
    description:
      'Leads of the key\'s school, optionally of one status and created in the period (both bounds inclusive, either may be left out), ordered by created_at then id.',
    tags: ['leads'],
    list: 'leads',
    querystring: LeadListQuery,
    response: LeadList,
    answer: ({ reads, tenant, query }) => listLeads(reads, tenant.id, query, periodOf(query, tenant)),
  }),
];
