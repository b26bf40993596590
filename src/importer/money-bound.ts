/**
 * The bound that keeps every sum of money exact: a school's payments (refunds included),
 * its expenses and its contracts' prices each add up to at most MAX_TOTAL minor units. Any
 * sum the service shows (a contract's paid and debt, a student's balance, a finance
 * summary, its profit) is then within ±MAX_TOTAL: a whole number a double holds exactly,
 * and far inside PostgreSQL's bigint and SQLite's integer. Checked after the merge, in the
 * import's transaction, for the tables the import wrote.
 */
import { sql } from 'kysely';
import { onPostgres } from '../db/index.js';
import { formatMoney } from '../domain/money.js';
import type { ErrorList } from './errors.js';
import type { Sql } from './run.js';
import type { ArrayName } from './schema.js';

export const MAX_TOTAL = Number.MAX_SAFE_INTEGER;

const BOUNDED = [
  { array: 'payments', column: 'amount_minor', field: 'amount', what: 'payments and refunds' },
  { array: 'expenses', column: 'amount_minor', field: 'amount', what: 'expenses' },
  { array: 'contracts', column: 'price_minor', field: 'price', what: 'contracts\' prices' },
] as const;

export async function checkMoneyBound(q: Sql, schoolId: string, written: Record<ArrayName, number>, errors: ErrorList): Promise<void> {
  // SQLite's sum() stops with an error past 2^63; total() adds in floating point, which is
  // exact enough to tell a sum from a bound of 2^53.
  const sum = sql.raw(onPostgres(q.db) ? 'sum' : 'total');
  for (const { array, column, field, what } of BOUNDED) {
    if (written[array] === 0 || errors.full) continue;
    const { rows } = await q.run(
      sql`select ${sum}(${sql.ref(column)}) as total from ${sql.table(array)} where school_id = ${schoolId}`.compile(q.db),
    );
    const total = Number(rows[0]?.total ?? 0);
    if (total > MAX_TOTAL) {
      errors.add({ array, index: null, field, reason: `would bring the school's ${what} to more than ${formatMoney(MAX_TOTAL)} in all, the most a total of money can hold exactly` });
    }
  }
}
