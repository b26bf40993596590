/**
 * The change marks out of the lists' rows: `list_changes` holds, for every row of a list's
 * table, the seq of the import that last changed it (what `<list>.change_seq` held), keyed
 * by (school_id, resource, id) and indexed by (school_id, resource, change_seq, id) for the
 * feed. A list's row then has no indexed column that every change writes, so on PostgreSQL
 * an update that leaves the row's indexed columns alone can stay on the row's page
 * (heap-only), and the lists' tables leave half of each page for that (fillfactor 50; the
 * pages written before keep what they hold until the table is rewritten).
 *
 * No foreign key to `schools`: its check would cost every mark written a lookup, and
 * nothing deletes a school (docs/data-model.md, "Change log").
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

const LIST_TABLES = ['students', 'instructors', 'vehicles', 'lessons', 'contracts', 'payments', 'leads'];

export async function up(db: Db): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  let table = db.schema
    .createTable('list_changes')
    .addColumn('school_id', 'text', (c) => c.notNull())
    .addColumn('resource', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('change_seq', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('list_changes_pk', ['school_id', 'resource', 'id'] as never[]);
  // SQLite keeps the rows in their key's order, with no second tree for a rowid.
  if (!postgres) table = table.modifyEnd(sql`without rowid`);
  await table.execute();
  for (const list of LIST_TABLES) {
    await sql`insert into list_changes (school_id, resource, id, change_seq) select school_id, ${list}, id, change_seq from ${sql.table(list)}`.execute(db);
    await db.schema.dropIndex(`${list}_changes`).execute();
    await db.schema.alterTable(list).dropColumn('change_seq').execute();
    if (postgres) await sql`alter table ${sql.table(list)} set (fillfactor = 50)`.execute(db);
  }
  await db.schema.createIndex('list_changes_seq').on('list_changes').columns(['school_id', 'resource', 'change_seq', 'id']).execute();
}

export async function down(db: Db): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  for (const list of LIST_TABLES) {
    if (postgres) await sql`alter table ${sql.table(list)} reset (fillfactor)`.execute(db);
    await db.schema.alterTable(list).addColumn('change_seq', 'bigint', (c) => c.notNull().defaultTo(0)).execute();
    await sql`update ${sql.table(list)} set change_seq = m.change_seq from list_changes m
               where m.school_id = ${sql.ref(`${list}.school_id`)} and m.resource = ${list} and m.id = ${sql.ref(`${list}.id`)}`.execute(db);
    await db.schema.createIndex(`${list}_changes`).on(list).columns(['school_id', 'change_seq', 'id']).execute();
  }
  await db.schema.dropTable('list_changes').execute();
}
