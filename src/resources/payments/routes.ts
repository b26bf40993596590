import { endpoint } from '../common/route.js';
import { periodOf } from '../common/period.js';
import { listPayments } from './repository.js';
import { PaymentList, PaymentListQuery } from './schema.js';

export const paymentEndpoints = [
  endpoint<PaymentListQuery>({
    url: '/payments',
    scopes: ['payments'],
    operationId: 'listPayments',
    summary: 'List payments for a period',
    description:
      'Payments and refunds of the key\'s school whose paid_at lies in the period (both bounds inclusive, either may be left out), ordered by paid_at then id. A refund has kind "refund" and a positive amount.',
    tags: ['payments'],
    list: 'payments',
    querystring: PaymentListQuery,
    response: PaymentList,
    answer: ({ reads, tenant, query }) => listPayments(reads, tenant.id, query, periodOf(query, tenant)),
  }),
];
