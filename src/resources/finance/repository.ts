/**
 * The finance summary: two aggregates over a period in one statement, each answered from
 * a covering index (payments (school_id, paid_at, id, method, kind, amount_minor) and
 * expenses (school_id, spent_at, category, amount_minor)) without visiting the tables.
 */
import { sql } from 'kysely';
import type { Tenant } from '../../access/index.js';
import { prepared, type Reader } from '../../db/index.js';
import { EXPENSE_CATEGORIES, PAYMENT_METHODS } from '../../domain/enums.js';
import { formatMoney } from '../../domain/money.js';
import { inPeriod, periodBounds, type PeriodBounds, type UtcRange } from '../common/period.js';
import type { FinanceSummary, FinanceSummaryQuery } from './schema.js';

/** Minor-unit totals keyed by every name of `keys`, zero until added to. */
function zeroed<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

function formatAll<K extends string>(totals: Record<K, number>): Record<K, string> {
  return Object.fromEntries(Object.entries<number>(totals).map(([k, minor]) => [k, formatMoney(minor)])) as Record<K, string>;
}

const sumValues = (totals: Record<string, number>): number => Object.values(totals).reduce((a, b) => a + b, 0);

interface SchoolPeriod extends PeriodBounds {
  schoolId: string;
}

/**
 * Both aggregates in one statement (one round trip on PostgreSQL): income by method and
 * kind, and expense by category, as rows of (side, name, kind, total).
 */
const summaryRows = prepared((db, q: SchoolPeriod) =>
  db
    .selectFrom('payments')
    .where('school_id', '=', q.schoolId)
    .where((eb) => inPeriod(eb, 'paid_at', q))
    .select((eb) => [sql.lit('income').as('side'), 'method as name', 'kind', eb.fn.sum<number>('amount_minor').as('total')])
    .groupBy(['method', 'kind'])
    .unionAll(
      db
        .selectFrom('expenses')
        .where('school_id', '=', q.schoolId)
        .where((eb) => inPeriod(eb, 'spent_at', q))
        .select((eb) => [sql.lit('expense').as('side'), 'category as name', sql.lit('').as('kind'), eb.fn.sum<number>('amount_minor').as('total')])
        .groupBy('category'),
    ),
);

export async function getFinanceSummary(reads: Reader, tenant: Tenant, q: FinanceSummaryQuery, period: UtcRange): Promise<FinanceSummary> {
  const of: SchoolPeriod = { schoolId: tenant.id, ...periodBounds(period) };
  const rows = await summaryRows(reads, of);

  const byMethod = zeroed(PAYMENT_METHODS);
  const byCategory = zeroed(EXPENSE_CATEGORIES);
  for (const row of rows) {
    const total = Number(row.total);
    if (row.side === 'expense') byCategory[row.name as keyof typeof byCategory] += total;
    else byMethod[row.name as keyof typeof byMethod] += row.kind === 'refund' ? -total : total;
  }

  const income = sumValues(byMethod);
  const expense = sumValues(byCategory);
  return {
    period_from: q.period_from,
    period_to: q.period_to,
    currency: tenant.currency,
    income: formatMoney(income),
    expense: formatMoney(expense),
    profit: formatMoney(income - expense),
    income_by_method: formatAll(byMethod),
    expense_by_category: formatAll(byCategory),
  };
}
