/**
 * The lists' change marks in a table of their own, `list_changes`: (school_id, resource,
 * change_seq, id), all four the key, in the feed's order. The row keeps its `change_seq`,
 * no longer indexed, which names its mark; so no indexed column of a list's row changes with
 * every change, and on PostgreSQL an update that leaves the indexed columns alone can stay
 * on the row's page (heap-only), for which the lists keep half of each page (fillfactor 50).
 * No foreign key to `schools`: nothing deletes a school (docs/data-model.md, "Change log").
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
    .addColumn('change_seq', 'bigint', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('list_changes_pk', ['school_id', 'resource', 'change_seq', 'id'] as never[]);
  // SQLite keeps the rows in their key's order, with no second tree for a rowid.
  if (!postgres) table = table.modifyEnd(sql`without rowid`);
  await table.execute();
  for (const list of LIST_TABLES) {
    await sql`insert into list_changes (school_id, resource, change_seq, id) select school_id, ${list}, change_seq, id from ${sql.table(list)}`.execute(db);
    await db.schema.dropIndex(`${list}_changes`).execute();
    if (postgres) await sql`alter table ${sql.table(list)} set (fillfactor = 50)`.execute(db);
  }
}

export async function down(db: Db): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  for (const list of LIST_TABLES) {
    if (postgres) await sql`alter table ${sql.table(list)} reset (fillfactor)`.execute(db);
    await db.schema.createIndex(`${list}_changes`).on(list).columns(['school_id', 'change_seq', 'id']).execute();
  }
  await db.schema.dropTable('list_changes').execute();
}
