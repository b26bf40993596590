/**
 * The finance summary read from indexes alone: per school and UTC month, the same totals as
 * per day (`payment_months`, `expense_months`), so a year is a few dozen rows rather than a
 * thousand; and the amount held in the key of the day and month totals, so that finding
 * them is reading them. PostgreSQL's keys include the amount (read without the table where
 * the visibility map allows, which the importer's VACUUM keeps). SQLite has no included
 * columns: its day totals get a second index ending with the amount, and its month totals
 * are stored in their key's order (WITHOUT ROWID).
 *
 * Schema only: the read-model rebuild makes the month totals (src/importer/rebuild.ts).
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

const SIDES = [
  { days: 'payment_days', months: 'payment_months', name: 'method' },
  { days: 'expense_days', months: 'expense_months', name: 'category' },
] as const;

export async function up(db: Db): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  for (const { days, months, name } of SIDES) {
    const dayKey = `${days}_pk`;
    if (postgres) {
      await sql`alter table ${sql.table(days)} drop constraint ${sql.id(dayKey)}, add constraint ${sql.id(dayKey)} primary key (school_id, day, ${sql.ref(name)}) include (amount_minor)`.execute(db);
    } else {
      await db.schema.createIndex(`${days}_covered`).on(days).columns(['school_id', 'day', name, 'amount_minor']).execute();
    }
    await sql`create table ${sql.table(months)} (
      school_id text not null references schools (id) on delete cascade,
      month text not null,
      ${sql.ref(name)} text not null,
      amount_minor bigint not null,
      constraint ${sql.id(`${months}_pk`)} primary key (school_id, month, ${sql.ref(name)})${postgres ? sql` include (amount_minor)` : sql``}
    )${postgres ? sql`` : sql` without rowid`}`.execute(db);
  }
}

export async function down(db: Db): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  // Made again by the rebuild if the migration runs again.
  await db.updateTable('read_model_versions').set({ version: 1 }).where('part', '=', 'day_totals').where('version', '>', 1).execute();
  for (const { days, months, name } of SIDES) {
    await db.schema.dropTable(months).execute();
    const dayKey = `${days}_pk`;
    if (postgres) {
      await sql`alter table ${sql.table(days)} drop constraint ${sql.id(dayKey)}, add constraint ${sql.id(dayKey)} primary key (school_id, day, ${sql.ref(name)})`.execute(db);
    } else {
      await db.schema.dropIndex(`${days}_covered`).execute();
    }
  }
}
