/**
 * Keeps the lists' read model (src/resources/items.ts) true to the rows: each row's `item`
 * is made from the row when it is staged, and `pos` is renumbered from the first place in
 * a list that an import changed. The importer runs all of it inside its transaction, so a
 * reader sees a school's rows, items and positions change together, or not at all. Also
 * the rebuild of items and positions after an upgrade (rebuild.ts).
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { itemJson, LIST_MODELS, LIST_TABLES, type ListRow, type ListTable } from '../resources/items.js';
import { viaKysely, type Sql } from './run.js';
import { lockSchool, recordBatch } from './write.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the table is chosen at run time; each caller's rows are typed
type Untyped = Kysely<any>;

export function isListTable(table: string): table is ListTable {
  return (LIST_TABLES as readonly string[]).includes(table);
}

/** The list item of a row of a list's table, as JSON text. */
export function itemOf(table: ListTable, row: Record<string, unknown>): string {
  return itemJson(table, row as unknown as ListRow<typeof table>);
}

/** A place in a list's order: the order column's value, then the id. */
export interface ListKey {
  at: string;
  id: string;
}

/** Rows read and positions written per statement. */
const BATCH = 500;
const READ_BATCH = 50_000;

/**
 * Numbers the rows of one school's list in its order (`order`, then id) from `from` on
 * (from the start when null): the rows before `from` keep their places, which are right.
 * Only the rows whose position changes are written, so an import that adds at the end of
 * a list rewrites nothing else. Rows are read in batches, so memory does not grow with the
 * list. (One UPDATE joined to a numbering subquery would do it in the database, but its
 * speed would rest on the planner's estimates: with none yet, PostgreSQL chose a nested
 * loop over both sides, quadratic.)
 */
export async function renumber(q: Sql, table: ListTable, schoolId: string, from: ListKey | null = null): Promise<void> {
  const db = q.db as unknown as Untyped;
  const order = LIST_MODELS[table].order;
  let next = 0;
  if (from) {
    const before = await q.run(
      db
        .selectFrom(table)
        .select('pos')
        .where('school_id', '=', schoolId)
        .where((eb) => eb(eb.refTuple(order, 'id'), '<', eb.tuple(from.at, from.id)))
        .orderBy(order, 'desc')
        .orderBy('id', 'desc')
        .limit(1),
    );
    next = before.rows.length > 0 ? Number(before.rows[0]!.pos) + 1 : 0;
  }
  let after: ListKey | null = from;
  let inclusive = true;
  for (;;) {
    let query = db.selectFrom(table).select(['id', 'pos', `${order} as at`]).where('school_id', '=', schoolId);
    if (after) {
      const { at, id } = after;
      query = query.where((eb) => eb(eb.refTuple(order, 'id'), inclusive ? '>=' : '>', eb.tuple(at, id)));
    }
    const rows = (await q.run(query.orderBy(order).orderBy('id').limit(READ_BATCH))).rows as { id: string; pos: number; at: string }[];
    const moved: [string, number][] = [];
    for (const row of rows) {
      if (Number(row.pos) !== next) moved.push([row.id, next]);
      next += 1;
    }
    await writePositions(q, table, schoolId, moved);
    if (rows.length < READ_BATCH) return;
    const last = rows[rows.length - 1]!;
    after = { at: last.at, id: last.id };
    inclusive = false;
  }
}

async function writePositions(q: Sql, table: ListTable, schoolId: string, moved: [string, number][]): Promise<void> {
  const db = q.db as unknown as Untyped;
  for (let i = 0; i < moved.length; i += BATCH) {
    const values = sql.join(moved.slice(i, i + BATCH).map(([id, n]) => sql`(${id}, cast(${n} as integer))`));
    await q.run(
      db
        .with('v(id, n)', () => sql`(values ${values})`)
        .updateTable(table)
        .from('v')
        .set((eb) => ({ pos: eb.ref('v.n') }))
        .where(`${table}.school_id`, '=', schoolId)
        .whereRef(`${table}.id`, '=', 'v.id'),
    );
  }
}

/**
 * Makes again the items of one school's rows of `table` (only those marked `only` when
 * given), writes the ones that differ, and marks them with `seq` when given. Returns how
 * many differed.
 */
export async function remakeItems(q: Sql, table: ListTable, schoolId: string, seq: number | null, only?: number): Promise<number> {
  const db = q.db as unknown as Untyped;
  let after: string | null = null;
  let changed = 0;
  for (;;) {
    let query = db.selectFrom(table).selectAll().where('school_id', '=', schoolId);
    if (only !== undefined) query = query.where('change_seq', '=', only);
    if (after !== null) query = query.where('id', '>', after);
    const rows = (await q.run(query.orderBy('id').limit(BATCH))).rows;
    const differ: [string, string][] = [];
    for (const row of rows) {
      const item = itemOf(table, row);
      if (item !== row.item) differ.push([row.id as string, item]);
    }
    if (differ.length > 0) {
      const values = sql.join(differ.map(([id, item]) => sql`(${id}, ${item})`));
      await q.run(
        db
          .with('v(id, item)', () => sql`(values ${values})`)
          .updateTable(table)
          .from('v')
          .set((eb) => (seq === null ? { item: eb.ref('v.item') } : { item: eb.ref('v.item'), change_seq: seq }))
          .where(`${table}.school_id`, '=', schoolId)
          .whereRef(`${table}.id`, '=', 'v.id'),
      );
      changed += differ.length;
    }
    if (rows.length < BATCH) return changed;
    after = rows[rows.length - 1]!.id as string;
  }
}

/**
 * Makes every item of every school again (the rebuild after an upgrade). A school whose
 * items changed takes one change seq for them, in one transaction per school.
 */
export async function remakeAllItems(db: Kysely<Database>): Promise<void> {
  const schools = await db.selectFrom('schools').select('id').orderBy('id').execute();
  for (const { id } of schools) {
    await db.transaction().execute(async (trx) => {
      const q = viaKysely(trx);
      const version = await lockSchool(q, id);
      let changed = 0;
      for (const table of LIST_TABLES) changed += await remakeItems(q, table, id, version + 1);
      if (changed > 0) await recordBatch(q, id, version + 1);
    });
  }
}

/** Renumbers every school's lists (the rebuild after an upgrade). */
export async function renumberAll(db: Kysely<Database>): Promise<void> {
  const schools = await db.selectFrom('schools').select('id').orderBy('id').execute();
  for (const { id } of schools) {
    await db.transaction().execute(async (trx) => {
      const q = viaKysely(trx);
      await lockSchool(q, id);
      for (const table of LIST_TABLES) await renumber(q, table, id);
    });
  }
}
