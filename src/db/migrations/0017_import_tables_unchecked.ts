/**
 * PostgreSQL: the tables an import writes lose their foreign key to `schools`. Its check
 * is a locked lookup of the school's row for every row written, which made a school's
 * first import's inserts up to twice as slow; the importer writes only the school it
 * holds the lock of, and nothing in the service deletes a school (docs/data-model.md,
 * "Schools and their rows"). SQLite keeps them: its check is an unlocked key lookup that
 * measured no slower, and it cannot drop a constraint without copying the table.
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

const TABLES = [
  'branches',
  'groups',
  'students',
  'instructors',
  'vehicles',
  'lessons',
  'contracts',
  'payments',
  'leads',
  'expenses',
  'payment_days',
  'expense_days',
  'payment_months',
  'expense_months',
  'tombstones',
  'change_batches',
  'list_blocks',
];

export async function up(db: Db): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  // By what they are, not by name: a name PostgreSQL gave them may differ in an old database.
  const { rows } = await sql<{ table: string; name: string }>`
    select c.conrelid::regclass::text as table, c.conname as name from pg_constraint c
     where c.contype = 'f' and c.confrelid = 'schools'::regclass and c.conrelid = any (
       select ('"' || t || '"')::regclass from unnest(${TABLES}::text[]) as t)`.execute(db);
  for (const { table, name } of rows) await sql`alter table ${sql.raw(table)} drop constraint ${sql.id(name)}`.execute(db);
}

export async function down(db: Db): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  for (const table of TABLES) {
    await sql`alter table ${sql.table(table)} add constraint ${sql.id(`${table}_school_id_fkey`)} foreign key (school_id) references schools (id) on delete cascade`.execute(db);
  }
}
