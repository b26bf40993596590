import { endpoint } from '../common/route.js';
import { periodOf } from '../common/period.js';
import { getFinanceSummary } from './repository.js';
import { FinanceSummary, FinanceSummaryQuery } from './schema.js';

export const financeEndpoints = [
  endpoint<FinanceSummaryQuery>({
    url: '/reports/finance-summary',
    scopes: ['finance'],
    operationId: 'getFinanceSummary',
    summary: 'Finance summary for a period',
    description:
      'Income (payments minus refunds by paid_at), expense (by spent_at) and profit of the key\'s school for a period; both bounds are required and inclusive. Every payment method and expense category is listed, "0.00" included.',
    tags: ['reports'],
    querystring: FinanceSummaryQuery,
    response: FinanceSummary,
    answer: ({ reads, tenant, query }) => getFinanceSummary(reads, tenant, query, periodOf(query, tenant)),
  }),
];
