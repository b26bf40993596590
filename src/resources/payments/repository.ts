import type { Reader } from '../../db/index.js';
import { pagedList, type ListBody } from '../common/list.js';
import { periodBounds, type UtcRange } from '../common/period.js';
import type { PaymentListQuery } from './schema.js';

const paymentList = pagedList({ table: 'payments' });

/** Payments whose paid_at lies in the period, in the list's order (paid_at, id). */
export async function listPayments(reads: Reader, schoolId: string, q: PaymentListQuery, period: UtcRange): Promise<ListBody> {
  return paymentList(reads, { schoolId, ...periodBounds(period) }, q.limit, q.offset);
}
