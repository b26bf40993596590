/**
 * The finance summary's read model: per school and UTC day, the payments minus refunds of
 * each method (`payment_days`) and the expenses of each category (`expense_days`), and
 * their sums per UTC month (`payment_months`, `expense_months`), kept true to the rows by
 * the importer in its transaction. A summary then reads the whole months of its period
 * from the months, the whole days around them from the days, and only the partial days at
 * its edges from the rows (src/resources/finance/repository.ts): a year of a school with a
 * hundred thousand students is about a hundred total rows, not two hundred thousand payments.
 */
import { sql, type Kysely, type SelectQueryBuilder } from 'kysely';
import type { Database } from '../db/schema.js';
import { FINANCE_SIDES, rowDay, type FinanceSide } from '../resources/finance/sides.js';
import { viaKysely, type Sql } from './run.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the two sides differ only in their names
type Untyped = Kysely<any>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the same
type SelectRows = SelectQueryBuilder<any, any, any>;

/** The days whose totals an import changes, per side: of the rows it writes, and of the stored rows it overwrites or deletes. */
export interface TouchedDays {
  payments: Set<string>;
  expenses: Set<string>;
}

/** Days per statement. */
const BATCH = 500;
/** Up to this many touched days, each is found by a seek of its own. */
const DAY_BY_DAY = 100;

/**
 * Writes one side's totals of the rows `narrow` selects (all of them by default), grouped by
 * school, day and name; `from` is where the statement starts (a `with` the rows join).
 */
async function insertTotals(q: Sql, side: FinanceSide, narrow: (rows: SelectRows) => SelectRows = (rows) => rows, from: Pick<Untyped, 'insertInto'> = q.db): Promise<void> {
  const db = q.db as unknown as Untyped;
  const day = rowDay(side);
  const rows = db.selectFrom(side.rows).select(['school_id', day.as('day'), side.name, sql`sum(${side.amount})`.as('amount_minor')]);
  await q.run(
    from
      .insertInto(side.totals)
      .columns(['school_id', 'day', side.name, 'amount_minor'])
      .expression(narrow(rows).groupBy(['school_id', day, side.name])),
  );
}

/**
 * Writes one side's month totals from its day totals, of the days `narrow` selects (all of
 * them by default), grouped by school, month and name.
 */
async function insertMonths(q: Sql, side: FinanceSide, narrow: (days: SelectRows) => SelectRows = (days) => days): Promise<void> {
  const db = q.db as unknown as Untyped;
  const month = sql<string>`substr(day, 1, 7)`;
  const days = db.selectFrom(side.totals).select(['school_id', month.as('month'), side.name, sql`sum(amount_minor)`.as('amount_minor')]);
  await q.run(
    db
      .insertInto(side.months)
      .columns(['school_id', 'month', side.name, 'amount_minor'])
      .expression(narrow(days).groupBy(['school_id', month, side.name])),
  );
}

/**
 * Makes the totals of these days of one school again from its rows (after the import wrote
 * them), per side one statement to delete them and one to write them. A few days (a
 * delta's, spread over years) are found by a seek per day, joined to the list of days; more
 * than DAY_BY_DAY by one range over a batch of them, which reads every row between its
 * first and last day (SQLite stops seeking by day past about 150 days, and builds an index
 * of the school's rows instead, at every statement). Then the totals of those days' months,
 * from the day totals.
 */
export async function refreshDayTotals(q: Sql, schoolId: string, touched: TouchedDays): Promise<void> {
  const db = q.db as unknown as Untyped;
  for (const side of FINANCE_SIDES) {
    const days = [...touched[side.rows]].sort();
    const size = days.length <= DAY_BY_DAY ? DAY_BY_DAY : BATCH;
    for (let i = 0; i < days.length; i += size) {
      const batch = days.slice(i, i + size);
      await q.run(db.deleteFrom(side.totals).where('school_id', '=', schoolId).where('day', 'in', batch));
      const at = sql.ref(`${side.rows}.${side.at}`);
      if (days.length <= DAY_BY_DAY) {
        await insertTotals(
          q,
          side,
          (rows) => rows.innerJoin('d', (join) => join.on(sql<boolean>`${at} >= d.day and ${at} < d.day || 'T99'`)).where(`${side.rows}.school_id`, '=', schoolId),
          db.with('d(day)', () => sql`(values ${sql.join(batch.map((day) => sql`(${day})`))})`),
        );
      } else {
        await insertTotals(q, side, (rows) =>
          rows
            .where('school_id', '=', schoolId)
            // The range lets the (school_id, at ...) index find the rows; the list keeps the days asked for.
            .where(side.at, '>=', batch[0]!)
            .where(side.at, '<', `${batch.at(-1)!}T99`)
            .where(rowDay(side), 'in', batch),
        );
      }
    }
    // Then the months of those days, from the day totals just written.
    const months = [...new Set(days.map((day) => day.slice(0, 7)))];
    for (let i = 0; i < months.length; i += BATCH) {
      const batch = months.slice(i, i + BATCH);
      await q.run(db.deleteFrom(side.months).where('school_id', '=', schoolId).where('month', 'in', batch));
      await insertMonths(q, side, (rows) =>
        rows
          .where('school_id', '=', schoolId)
          .where('day', '>=', batch[0]!)
          .where('day', '<', `${batch.at(-1)!}-99`)
          .where(sql`substr(day, 1, 7)`, 'in', batch),
      );
    }
  }
}

/**
 * Makes every school's day and month totals from the rows, in the caller's transaction: for
 * an upgrade, and for data written past the importer (the benchmark's loader).
 */
export async function rebuildDayTotals(trx: Kysely<Database>): Promise<void> {
  const q = viaKysely(trx);
  for (const side of FINANCE_SIDES) {
    await q.run((trx as unknown as Untyped).deleteFrom(side.totals));
    await insertTotals(q, side);
    await q.run((trx as unknown as Untyped).deleteFrom(side.months));
    await insertMonths(q, side);
  }
}
