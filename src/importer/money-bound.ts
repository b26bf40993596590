/**
 * The bound that keeps every sum of money exact: a school's payments (refunds included)
 * and its expenses each add up to at most MAX_TOTAL minor units, and so do the prices of
 * one student's contracts. Any sum the service shows (a contract's paid, a student's
 * balance, a finance summary's income and expense) is then within ±MAX_TOTAL: a whole
 * number a double holds exactly, and far inside PostgreSQL's bigint and SQLite's integer.
 * A difference of two such sums (a debt, a profit) is worked out by subtractMoney.
 * Checked after the merge, in the import's transaction, for the tables the import wrote; the
 * file's own payments are added up while it is read too (intake.ts), as the balances summed
 * before this check would overflow the stores' integers first.
 */
import { sql } from 'kysely';
import { onPostgres } from '../db/index.js';
import { formatMoney } from '../domain/money.js';
import type { ErrorList, ImportError } from './errors.js';
import type { Sql } from './run.js';
import type { ArrayName } from './schema.js';
import { stageTable } from './stage.js';

export const MAX_TOTAL = Number.MAX_SAFE_INTEGER;

const BOUNDED = [
  { array: 'payments', what: 'payments and refunds' },
  { array: 'expenses', what: 'expenses' },
] as const;

const TOO_MUCH = `to more than ${formatMoney(MAX_TOTAL)} in all, the most a total of money can hold exactly`;

/** The error of a school's payments or expenses past the bound. */
export function pastTheBound(array: (typeof BOUNDED)[number]['array']): ImportError {
  const { what } = BOUNDED.find((b) => b.array === array)!;
  return { array, index: null, field: 'amount', reason: `would bring the school's ${what} ${TOO_MUCH}` };
}

export async function checkMoneyBound(q: Sql, schoolId: string, written: Record<ArrayName, number>, errors: ErrorList): Promise<void> {
  // SQLite's sum() stops with an error past 2^63; total() adds in floating point, which is
  // exact enough to tell a sum from a bound of 2^53.
  const sum = sql.raw(onPostgres(q.db) ? 'sum' : 'total');
  for (const { array } of BOUNDED) {
    if (written[array] === 0 || errors.full) continue;
    const { rows } = await q.run(sql`select ${sum}(amount_minor) as total from ${sql.table(array)} where school_id = ${schoolId}`.compile(q.db));
    if (Number(rows[0]?.total ?? 0) > MAX_TOTAL) errors.add(pastTheBound(array));
  }
  if (written.contracts === 0 || errors.full) return;
  // Prices only ever add up per student (the card's balance): only the students of the file's contracts.
  const { rows } = await q.run(
    sql`select c.student_id from contracts c
         where c.school_id = ${schoolId} and c.student_id in (select student_id from ${sql.table(stageTable('contracts'))})
         group by c.student_id
        having ${sum}(c.price_minor) > ${MAX_TOTAL}
         order by c.student_id
         limit ${errors.room}`.compile(q.db),
  );
  for (const row of rows) {
    errors.add({ array: 'contracts', index: null, field: 'price', reason: `would bring the prices of student "${row.student_id as string}"'s contracts ${TOO_MUCH}` });
  }
}
