/**
 * The finance summary's read model: per school and UTC day, the payments minus refunds of
 * each method (`payment_days`) and the expenses of each category (`expense_days`), kept
 * true to the rows by the importer in its transaction. A summary then reads the whole days
 * of its period from these and only the partial days at its edges from the rows
 * (src/resources/finance/repository.ts): a year of a school with a hundred thousand
 * students is a few hundred total rows, not two hundred thousand payments.
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

const BATCH = 500;
/** Up to this many touched days, each day's totals are made by a statement of its own. */
const DAY_BY_DAY = 100;

/**
 * Writes one side's totals of the rows `narrow` selects (all of them by default), grouped by
 * school, day and name.
 */
async function insertTotals(q: Sql, side: FinanceSide, narrow: (rows: SelectRows) => SelectRows = (rows) => rows): Promise<void> {
  const db = q.db as unknown as Untyped;
  const day = rowDay(side);
  const rows = db.selectFrom(side.rows).select(['school_id', day.as('day'), side.name, sql`sum(${side.amount})`.as('amount_minor')]);
  await q.run(
    db
      .insertInto(side.totals)
      .columns(['school_id', 'day', side.name, 'amount_minor'])
      .expression(narrow(rows).groupBy(['school_id', day, side.name])),
  );
}

/** Makes the totals of these days of one school again from its rows (after the import wrote them). */
export async function refreshDayTotals(q: Sql, schoolId: string, touched: TouchedDays): Promise<void> {
  const db = q.db as unknown as Untyped;
  for (const side of FINANCE_SIDES) {
    const days = [...touched[side.rows]].sort();
    // A few days spread over years are a seek each; one range over them all would read every row between.
    const size = days.length <= DAY_BY_DAY ? 1 : BATCH;
    for (let i = 0; i < days.length; i += size) {
      const batch = days.slice(i, i + size);
      await q.run(db.deleteFrom(side.totals).where('school_id', '=', schoolId).where('day', 'in', batch));
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
}

/** Makes every school's totals from the rows: for a migration, and for data written past the importer (the benchmark's loader). */
export async function rebuildDayTotals(db: Kysely<Database>): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const q = viaKysely(trx);
    for (const side of FINANCE_SIDES) {
      await q.run((trx as unknown as Untyped).deleteFrom(side.totals));
      await insertTotals(q, side);
    }
  });
}
