/**
 * The change log a changes feed reads (docs/data-model.md, "Change log"):
 * - `schools.data_version` is the school's change sequence: every import that changes
 *   something takes the next number and writes it on each row it changed (`change_seq`);
 * - `tombstones`: one row per deleted record of a list's table, with the seq that deleted it;
 * - `change_batches`: when each seq was committed;
 * - `schools.tombstones_dropped_seq`: the highest seq whose tombstones were pruned;
 * - `read_model_versions`: which version of each derived part the rows hold, so the rebuild
 *   after `migrate` (src/importer/rebuild.ts) knows what to make again.
 * Existing data is one batch per school: its rows get the school's data version (at least 1).
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

const LIST_TABLES = ['students', 'instructors', 'vehicles', 'lessons', 'contracts', 'payments', 'leads'];
const SCHOOL_TABLES = ['branches', 'groups', ...LIST_TABLES, 'expenses'];
const READ_MODEL_PARTS = ['items', 'positions', 'day_totals'];

export async function up(db: Db): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  if (postgres) await sql`alter table schools alter column data_version type bigint`.execute(db);
  await db.schema.alterTable('schools').addColumn('tombstones_dropped_seq', 'bigint', (c) => c.notNull().defaultTo(0)).execute();
  for (const table of LIST_TABLES) {
    await db.schema.alterTable(table).addColumn('change_seq', 'bigint', (c) => c.notNull().defaultTo(0)).execute();
    await db.schema.createIndex(`${table}_changes`).on(table).columns(['school_id', 'change_seq', 'id']).execute();
  }
  await db.schema
    .createTable('tombstones')
    .addColumn('school_id', 'text', (c) => c.notNull().references('schools.id').onDelete('cascade'))
    .addColumn('resource', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('change_seq', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('tombstones_pk', ['school_id', 'resource', 'id'] as never[])
    .execute();
  await db.schema.createIndex('tombstones_changes').on('tombstones').columns(['school_id', 'change_seq', 'resource', 'id']).execute();
  await db.schema
    .createTable('change_batches')
    .addColumn('school_id', 'text', (c) => c.notNull().references('schools.id').onDelete('cascade'))
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('committed_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('change_batches_pk', ['school_id', 'seq'] as never[])
    .execute();
  await db.schema
    .createTable('read_model_versions')
    .addColumn('part', 'text', (c) => c.primaryKey())
    .addColumn('version', 'integer', (c) => c.notNull())
    .execute();
  for (const part of READ_MODEL_PARTS) await sql`insert into read_model_versions (part, version) values (${part}, 0)`.execute(db);

  // Existing data: one batch per school that has any, at its data version (at least 1, so
  // that seq 0 always means "nothing yet").
  const hasData = sql.join(SCHOOL_TABLES.map((t) => sql`exists (select 1 from ${sql.table(t)} r where r.school_id = schools.id)`), sql` or `);
  await sql`update schools set data_version = 1 where data_version = 0 and (${hasData})`.execute(db);
  const now = `${new Date().toISOString().slice(0, 19)}Z`;
  await sql`insert into change_batches (school_id, seq, committed_at) select id, data_version, ${now} from schools where data_version > 0`.execute(db);
  for (const table of LIST_TABLES) {
    await sql`update ${sql.table(table)} set change_seq = (select s.data_version from schools s where s.id = ${sql.ref(`${table}.school_id`)})`.execute(db);
  }
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('read_model_versions').execute();
  await db.schema.dropTable('change_batches').execute();
  await db.schema.dropTable('tombstones').execute();
  for (const table of LIST_TABLES) {
    await db.schema.dropIndex(`${table}_changes`).execute();
    await db.schema.alterTable(table).dropColumn('change_seq').execute();
  }
  await db.schema.alterTable('schools').dropColumn('tombstones_dropped_seq').execute();
}
