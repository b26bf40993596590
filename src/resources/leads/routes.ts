import type { FastifyPluginCallback } from 'fastify';
import { resolvePeriod } from '../common/period.js';
import { JSON_CONTENT_TYPE } from '../common/list.js';
import { responses } from '../common/responses.js';
import type { ResourceOptions } from '../index.js';
import { listLeads } from './repository.js';
import { LeadList, LeadListQuery } from './schema.js';

export const leadRoutes: FastifyPluginCallback<ResourceOptions> = (app, { reads }, done) => {
  app.get<{ Querystring: LeadListQuery }>(
    '/leads',
    {
      schema: {
        operationId: 'listLeads',
        summary: 'List applications for training',
        description:
          'Leads of the key\'s school, optionally of one status and created in the period (both bounds inclusive, either may be left out), ordered by created_at then id.',
        tags: ['leads'],
        querystring: LeadListQuery,
        response: responses(LeadList),
      },
    },
    async (request, reply) => {
      const tenant = request.tenant!;
      const period = resolvePeriod(request.query.period_from, request.query.period_to, tenant.timezone);
      reply.type(JSON_CONTENT_TYPE);
      return listLeads(reads, tenant.id, request.query, period);
    },
  );
  done();
};
