import type { Kysely } from 'kysely';
import { prepared } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { formatMoney } from '../../domain/money.js';
import { inPeriod, periodBounds, type PeriodBounds, type UtcRange } from '../common/period.js';
import { DEEP_OFFSET } from '../common/params.js';
import type { Page } from '../common/responses.js';
import type { Payment, PaymentListQuery } from './schema.js';

const COLUMNS = ['id', 'student_id', 'contract_id', 'kind', 'method', 'amount_minor', 'currency', 'paid_at', 'created_at'] as const;

interface PaymentFilter extends PeriodBounds {
  schoolId: string;
}

const filtered = (db: Kysely<Database>, q: PaymentFilter) =>
  db
    .selectFrom('payments')
    .where('school_id', '=', q.schoolId)
    .where((eb) => inPeriod(eb, 'paid_at', q));

const paymentPage = prepared((db, q: PaymentFilter & { limit: number; offset: number }) =>
  filtered(db, q).select(COLUMNS).orderBy('paid_at').orderBy('id').limit(q.limit).offset(q.offset),
);
const paymentDeepPage = prepared((db, q: PaymentFilter & { limit: number; offset: number }) =>
  db
    .selectFrom('payments')
    .where('school_id', '=', q.schoolId)
    .where('id', 'in', filtered(db, q).select('id').orderBy('paid_at').orderBy('id').limit(q.limit).offset(q.offset))
    .select(COLUMNS)
    .orderBy('paid_at')
    .orderBy('id'),
);
const paymentCount = prepared((db, q: PaymentFilter) => filtered(db, q).select((eb) => eb.fn.countAll<number>().as('total')));

export async function listPayments(db: Kysely<Database>, schoolId: string, q: PaymentListQuery, period: UtcRange): Promise<Page<Payment>> {
  const filter: PaymentFilter = { schoolId, ...periodBounds(period) };
  const [rows, [count]] = await Promise.all([(q.offset >= DEEP_OFFSET ? paymentDeepPage : paymentPage)(db, { ...filter, limit: q.limit, offset: q.offset }), paymentCount(db, filter)]);
  const items = rows.map(({ amount_minor, ...row }) => ({ ...row, amount: formatMoney(amount_minor) }) as Payment);
  return { items, meta: { total: count?.total ?? 0, limit: q.limit, offset: q.offset } };
}
