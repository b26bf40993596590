/**
 * The finance summary's read model (src/importer/day-totals.ts): per school and UTC day,
 * payments minus refunds by method and expenses by category, filled from the rows already
 * stored. Like 0003, it uses today's code to fill them: the totals must be exactly what
 * the running importer keeps.
 */
import type { Kysely } from 'kysely';
import { rebuildDayTotals } from '../../importer/day-totals.js';
import type { Database } from '../schema.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  for (const [table, name] of [['payment_days', 'method'], ['expense_days', 'category']] as const) {
    await db.schema
      .createTable(table)
      .addColumn('school_id', 'text', (c) => c.notNull().references('schools.id').onDelete('cascade'))
      .addColumn('day', 'text', (c) => c.notNull())
      .addColumn(name, 'text', (c) => c.notNull())
      .addColumn('amount_minor', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint(`${table}_pk`, ['school_id', 'day', name] as never[])
      .execute();
  }
  await rebuildDayTotals(db as Kysely<Database>);
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('expense_days').execute();
  await db.schema.dropTable('payment_days').execute();
}
