import type { FastifyPluginCallback } from 'fastify';
import { resolvePeriod } from '../common/period.js';
import { JSON_CONTENT_TYPE } from '../common/list.js';
import { responses } from '../common/responses.js';
import type { ResourceOptions } from '../index.js';
import { listPayments } from './repository.js';
import { PaymentList, PaymentListQuery } from './schema.js';

export const paymentRoutes: FastifyPluginCallback<ResourceOptions> = (app, { reads }, done) => {
  app.get<{ Querystring: PaymentListQuery }>(
    '/payments',
    {
      schema: {
        operationId: 'listPayments',
        summary: 'List payments for a period',
        description:
          'Payments and refunds of the key\'s school whose paid_at lies in the period (both bounds inclusive, either may be left out), ordered by paid_at then id. A refund has kind "refund" and a positive amount.',
        tags: ['payments'],
        querystring: PaymentListQuery,
        response: responses(PaymentList),
      },
    },
    async (request, reply) => {
      const tenant = request.tenant!;
      const period = resolvePeriod(request.query.period_from, request.query.period_to, tenant.timezone);
      reply.type(JSON_CONTENT_TYPE);
      return listPayments(reads, tenant.id, request.query, period);
    },
  );
  done();
};
