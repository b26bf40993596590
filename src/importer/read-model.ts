/**
 * Keeps the lists' read model (src/resources/items.ts) true to the rows: each row's `item`
 * is made from the row when it is written, and `pos` is renumbered for every list an
 * import touched. The importer runs all of it inside its transaction, so a reader sees a
 * school's rows, items and positions change together, or not at all.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { itemJson, LIST_MODELS, LIST_TABLES, type ListRow, type ListTable } from '../resources/items.js';
import type { RowOf } from './rows.js';
import type { ArrayName } from './schema.js';
import { upsert, type WrittenRow } from './write.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the table is chosen at run time; each caller's rows are typed
type Untyped = Kysely<any>;

export function isListTable(table: string): table is ListTable {
  return (LIST_TABLES as readonly string[]).includes(table);
}

/** The row with its list item, when its table is a list's. */
export function withItem<K extends ArrayName>(table: K, row: RowOf<K>): WrittenRow<K> {
  if (!isListTable(table)) return row;
  return { ...row, item: itemJson(table, row as unknown as ListRow<typeof table>) };
}

/** Rows written per statement when items or positions are written again. */
const BATCH = 500;

/**
 * Numbers the rows of one school's list in its order (`order`, then id) from 0. The numbers
 * are worked out here and only the rows whose position changes are written, so an import
 * that adds at the end of a list rewrites nothing else. (One UPDATE joined to a numbering
 * subquery would do it in the database, but its speed would rest on the planner's
 * estimates: with none yet, PostgreSQL chose a nested loop over both sides, quadratic.)
 */
export async function renumber(db: Kysely<Database>, table: ListTable, schoolId: string): Promise<void> {
  const untyped = db as unknown as Untyped;
  const order = LIST_MODELS[table].order;
  const rows = (await untyped.selectFrom(table).select(['id', 'pos']).where('school_id', '=', schoolId).orderBy(order).orderBy('id').execute()) as { id: string; pos: number }[];
  const moved: [string, number][] = [];
  rows.forEach((row, n) => {
    if (row.pos !== n) moved.push([row.id, n]);
  });
  for (let i = 0; i < moved.length; i += BATCH) {
    const values = sql.join(moved.slice(i, i + BATCH).map(([id, n]) => sql`(${id}, cast(${n} as integer))`));
    await untyped
      .with('v(id, n)', () => sql`(values ${values})`)
      .updateTable(table)
      .from('v')
      .set((eb) => ({ pos: eb.ref('v.n') }))
      .where(`${table}.school_id`, '=', schoolId)
      .whereRef(`${table}.id`, '=', 'v.id')
      .execute();
  }
}

/**
 * Writes whole rows back with their items made again (an upsert on their own key). The
 * position is left out, so the upsert keeps it.
 */
async function rewrite(db: Untyped, table: ListTable, rows: Record<string, unknown>[]): Promise<void> {
  const written = rows.map(({ item: _item, pos: _pos, ...row }) => ({ ...row, item: itemJson(table, row as unknown as ListRow<typeof table>) }));
  await upsert(db as unknown as Kysely<Database>, table as ArrayName, written as WrittenRow<ArrayName>[]);
}

/** Makes again the items of one school's rows with these ids (contracts whose balance changed). */
export async function remakeItems(db: Kysely<Database>, table: ListTable, schoolId: string, ids: readonly string[]): Promise<void> {
  const untyped = db as unknown as Untyped;
  for (let i = 0; i < ids.length; i += BATCH) {
    const rows = (await untyped
      .selectFrom(table)
      .selectAll()
      .where('school_id', '=', schoolId)
      .where('id', 'in', ids.slice(i, i + BATCH))
      .execute()) as Record<string, unknown>[];
    await rewrite(untyped, table, rows);
  }
}

/**
 * Makes every item of a table again and renumbers every school's list: for a migration
 * that adds or changes the read model, over data written before it.
 */
export async function rebuildReadModel(db: Kysely<Database>, table: ListTable): Promise<void> {
  const untyped = db as unknown as Untyped;
  let after: { school_id: string; id: string } | null = null;
  for (;;) {
    let query = untyped.selectFrom(table).selectAll().orderBy('school_id').orderBy('id').limit(BATCH);
    if (after) query = query.where((eb) => eb(eb.refTuple('school_id', 'id'), '>', eb.tuple(after!.school_id, after!.id)));
    const rows = (await query.execute()) as Record<string, unknown>[];
    if (rows.length === 0) break;
    await rewrite(untyped, table, rows);
    const last = rows[rows.length - 1]!;
    after = { school_id: last.school_id as string, id: last.id as string };
  }
  const schools = (await untyped.selectFrom(table).select('school_id').distinct().execute()) as { school_id: string }[];
  for (const { school_id } of schools) await renumber(db, table, school_id);
}
