/**
 * The finance summary's read model (src/importer/day-totals.ts): per school and UTC day,
 * payments minus refunds by method and expenses by category.
 *
 * Schema only: the totals of the rows already stored are made by the read-model rebuild
 * that runs after every migration (src/importer/rebuild.ts), never from here.
 */
import type { Kysely } from 'kysely';

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
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('expense_days').execute();
  await db.schema.dropTable('payment_days').execute();
}
