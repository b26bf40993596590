/**
 * The lists' read model (src/resources/items.ts): every list's table gets `item` (its list
 * item as JSON text) and `pos` (its place in the list's order within its school), and an
 * index on (school_id, pos) for every page and list length. On SQLite the index also holds
 * the item, so a page is read from the index alone; PostgreSQL reads a school's rows from
 * the heap and caps an index entry at about 2.7 kB (docs/performance.md).
 * Schema only: the stored rows get their items and positions from the read-model rebuild
 * after every migration (src/importer/rebuild.ts).
 */
import { PostgresAdapter, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

const LIST_TABLES = ['students', 'instructors', 'vehicles', 'lessons', 'contracts', 'payments', 'leads'];

export async function up(db: Db): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  for (const table of LIST_TABLES) {
    await db.schema.alterTable(table).addColumn('item', 'text', (c) => c.notNull().defaultTo('')).execute();
    await db.schema.alterTable(table).addColumn('pos', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    const columns = postgres ? ['school_id', 'pos'] : ['school_id', 'pos', 'item'];
    await db.schema.createIndex(`${table}_pos`).on(table).columns(columns).execute();
  }
}

export async function down(db: Db): Promise<void> {
  for (const table of LIST_TABLES) {
    await db.schema.dropIndex(`${table}_pos`).execute();
    await db.schema.alterTable(table).dropColumn('pos').execute();
    await db.schema.alterTable(table).dropColumn('item').execute();
  }
}
