import type { Kysely } from 'kysely';
import type { Reader } from '../../db/index.js';
import type { Database, Selected } from '../../db/schema.js';
import { formatMoney } from '../../domain/money.js';
import { inPeriod, periodBounds, type PeriodBounds, type UtcRange } from '../common/period.js';
import { pagedList } from '../common/list.js';
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

const paymentList = pagedList<'payments', PaymentFilter, Selected<'payments', (typeof COLUMNS)[number]>>({ table: 'payments', columns: COLUMNS, orderBy: 'paid_at', filtered });

export async function listPayments(reads: Reader, schoolId: string, q: PaymentListQuery, period: UtcRange): Promise<Page<Payment>> {
  const filter: PaymentFilter = { schoolId, ...periodBounds(period) };
  const { rows, total } = await paymentList(reads, filter, q.limit, q.offset);
  const items = rows.map(({ amount_minor, ...row }) => ({ ...row, amount: formatMoney(amount_minor) }) as Payment);
  return { items, meta: { total, limit: q.limit, offset: q.offset } };
}
