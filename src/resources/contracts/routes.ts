import type { FastifyPluginCallback } from 'fastify';
import { JSON_CONTENT_TYPE } from '../common/list.js';
import { responses } from '../common/responses.js';
import type { ResourceOptions } from '../index.js';
import { listContracts } from './repository.js';
import { ContractList, ContractListQuery } from './schema.js';

export const contractRoutes: FastifyPluginCallback<ResourceOptions> = (app, { reads }, done) => {
  app.get<{ Querystring: ContractListQuery }>(
    '/contracts',
    {
      schema: {
        operationId: 'listContracts',
        summary: 'List contracts',
        description: 'Training contracts of the key\'s school with what is paid and owed on each, optionally of one student, ordered by created_at then id.',
        tags: ['contracts'],
        querystring: ContractListQuery,
        response: responses(ContractList),
      },
    },
    async (request, reply) => {
      reply.type(JSON_CONTENT_TYPE);
      return listContracts(reads, request.tenant!.id, request.query);
    },
  );
  done();
};
