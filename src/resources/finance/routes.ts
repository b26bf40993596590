import type { FastifyPluginCallback } from 'fastify';
import { resolvePeriod } from '../common/period.js';
import { responses } from '../common/responses.js';
import type { ResourceOptions } from '../index.js';
import { getFinanceSummary } from './repository.js';
import { FinanceSummary, FinanceSummaryQuery } from './schema.js';

export const financeRoutes: FastifyPluginCallback<ResourceOptions> = (app, { reads }, done) => {
  app.get<{ Querystring: FinanceSummaryQuery }>(
    '/reports/finance-summary',
    {
      schema: {
        operationId: 'getFinanceSummary',
        summary: 'Finance summary for a period',
        description:
          'Income (payments minus refunds by paid_at), expense (by spent_at) and profit of the key\'s school for a period; both bounds are required and inclusive. Every payment method and expense category is listed, "0.00" included.',
        tags: ['reports'],
        querystring: FinanceSummaryQuery,
        response: responses(FinanceSummary),
      },
    },
    (request) => {
      const tenant = request.tenant!;
      const period = resolvePeriod(request.query.period_from, request.query.period_to, tenant.timezone);
      return getFinanceSummary(reads, tenant, request.query, period);
    },
  );
  done();
};
