/**
 * The two sides of the finance summary and where each is read from: its rows, and the
 * day and month totals the importer keeps of them (src/importer/day-totals.ts). The
 * summary and the importer both build their SQL from these, so a row counts the same way
 * in both.
 */
import { sql, type RawBuilder } from 'kysely';

export interface FinanceSide {
  label: 'income' | 'expense';
  totals: 'payment_days' | 'expense_days';
  /** The same totals per UTC month (`YYYY-MM`): the sums of the day totals. */
  months: 'payment_months' | 'expense_months';
  rows: 'payments' | 'expenses';
  at: 'paid_at' | 'spent_at';
  name: 'method' | 'category';
  /** The signed amount of a row: refunds count against their method. */
  amount: RawBuilder<unknown>;
}

export const FINANCE_SIDES: readonly FinanceSide[] = [
  { label: 'income', totals: 'payment_days', months: 'payment_months', rows: 'payments', at: 'paid_at', name: 'method', amount: sql`case when kind = 'refund' then -amount_minor else amount_minor end` },
  { label: 'expense', totals: 'expense_days', months: 'expense_months', rows: 'expenses', at: 'spent_at', name: 'category', amount: sql`amount_minor` },
];

/** The UTC day (`YYYY-MM-DD`) of a row's stored timestamp, in SQL. */
export const rowDay = (side: FinanceSide) => sql<string>`substr(${sql.ref(side.at)}, 1, 10)`;
