/**
 * Keeps the lists' read model (src/resources/items.ts) true to the rows: each row's `item`
 * is made from the row when it is staged, and `pos` is put right in the blocks of
 * positions that an import changed (`placeChanges`), or laid out whole (`layOut`). The importer runs all of it inside its transaction, so a
 * reader sees a school's rows, items and positions change together, or not at all. Also
 * the rebuild of items and positions after an upgrade (rebuild.ts).
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../db/schema.js';
import { BLOCK_ROWS, BLOCK_SPAN, itemJson, LIST_MODELS, LIST_TABLES, type ListRow, type ListTable } from '../resources/items.js';
import { viaKysely, type Sql } from './run.js';
import { lockSchool, moveMarks, recordBatch } from './write.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the table is chosen at run time; each caller's rows are typed
type Untyped = Kysely<any>;

export function isListTable(table: string): table is ListTable {
  return (LIST_TABLES as readonly string[]).includes(table);
}

/** The list item of a row of a list's table, as JSON text. */
export function itemOf(table: ListTable, row: Record<string, unknown>): string {
  return itemJson(table, row as unknown as ListRow<typeof table>);
}

/** Rows read and positions written per statement. */
const BATCH = 500;
const READ_BATCH = 50_000;
/**
 * Past this many rows to place (new, moved or deleted) a list is laid out whole: block by
 * block, each row would cost a seek; a whole layout costs a read of the list.
 */
export const PLACE_AT_MOST = 5_000;
/** Blocks whose rows one query reads. */
const RANGES_AT_ONCE = 100;

/** The position of the row of rank `rank` in a list laid out whole. */
export const laidOut = (rank: number): number => Math.floor(rank / BLOCK_ROWS) * BLOCK_SPAN + (rank % BLOCK_ROWS);

interface Block {
  first_pos: number;
  n: number;
}

/** Integers written into the SQL text: better-sqlite3 would bind a number as a REAL, whose division is not an integer's. */
function int(n: number) {
  if (!Number.isSafeInteger(n)) throw new Error(`not an integer: ${n}`);
  return sql.lit(n);
}

/**
 * Lays out one school's list whole (src/resources/items.ts): the rows in the list's order
 * (`order`, then id) fill blocks of BLOCK_ROWS, BLOCK_SPAN positions apart, and the list's
 * blocks are written anew. Only the rows whose position changes are written. Rows are
 * read in batches, so memory does not grow with the list. (One UPDATE joined to a
 * numbering subquery would do it in the database, but its speed would rest on the
 * planner's estimates: with none yet, PostgreSQL chose a nested loop over both sides.)
 */
export async function layOut(q: Sql, table: ListTable, schoolId: string): Promise<void> {
  const db = q.db as unknown as Untyped;
  const order = LIST_MODELS[table].order;
  let rank = 0;
  let after: { at: string; id: string } | null = null;
  for (;;) {
    let query = db.selectFrom(table).select(['id', 'pos', `${order} as at`]).where('school_id', '=', schoolId);
    if (after) {
      const { at, id } = after;
      query = query.where((eb) => eb(eb.refTuple(order, 'id'), '>', eb.tuple(at, id)));
    }
    const rows = (await q.run(query.orderBy(order).orderBy('id').limit(READ_BATCH))).rows as { id: string; pos: number; at: string }[];
    const moved: [string, number][] = [];
    for (const row of rows) {
      const pos = laidOut(rank);
      if (Number(row.pos) !== pos) moved.push([row.id, pos]);
      rank += 1;
    }
    await writePositions(q, table, schoolId, moved);
    if (rows.length < READ_BATCH) break;
    const last = rows[rows.length - 1]!;
    after = { at: last.at, id: last.id };
  }
  await q.run(db.deleteFrom('list_blocks').where('school_id', '=', schoolId).where('list', '=', table));
  const blocks: Block[] = [];
  for (let first = 0; first < rank; first += BLOCK_ROWS) blocks.push({ first_pos: laidOut(first), n: Math.min(BLOCK_ROWS, rank - first) });
  await insertBlocks(q, table, schoolId, blocks, 0);
}

/**
 * Writes `blocks`, in the list's order: their first ranks follow from `firstRank`, the rank
 * of the first of them, when it is known (a list laid out whole, rows appended); null: the
 * blocks are among others whose ranks move too, and every rank of the list is made again.
 */
async function insertBlocks(q: Sql, table: ListTable, schoolId: string, blocks: Block[], firstRank: number | null): Promise<void> {
  let rank = firstRank ?? 0;
  for (let i = 0; i < blocks.length; i += BATCH) {
    const values = blocks.slice(i, i + BATCH).map((b) => {
      const value = { school_id: schoolId, list: table, first_pos: b.first_pos, first_rank: rank, n: b.n };
      rank += b.n;
      return value;
    });
    await q.run(q.db.insertInto('list_blocks').values(values));
  }
  // A statement over the whole list: past a first import's thousands of new blocks, before
  // they had statistics, PostgreSQL planned it as a nested loop (4.4 s for 200,000 records).
  if (firstRank === null) await rankBlocks(q, table, schoolId);
}

/** Sets each block's first rank: the sizes of the blocks before it. */
async function rankBlocks(q: Sql, table: ListTable, schoolId: string): Promise<void> {
  await q.run(
    sql`update list_blocks set first_rank = r.rank
          from (select first_pos, sum(n) over (order by first_pos) - n as rank
                  from list_blocks where school_id = ${schoolId} and list = ${table}) r
         where list_blocks.school_id = ${schoolId} and list_blocks.list = ${table}
           and list_blocks.first_pos = r.first_pos and list_blocks.first_rank <> r.rank`.compile(q.db),
  );
}

/** The rows of the school's list, as its blocks count them. */
export async function listLength(q: Sql, table: ListTable, schoolId: string): Promise<number> {
  const { rows } = await q.run(sql`select coalesce(sum(n), 0) as n from list_blocks where school_id = ${schoolId} and list = ${table}`.compile(q.db));
  return Number(rows[0]?.n ?? 0);
}

/**
 * The positions of rows appended after a list's last row, in the list's order, given as
 * `n` from 0 (an SQL expression): the last block is filled to BLOCK_ROWS, then new blocks
 * follow BLOCK_SPAN apart. `count` rows are appended; their blocks are recorded.
 */
export async function appendPositions(q: Sql, table: ListTable, schoolId: string, count: number): Promise<(n: RawBuilder<number>) => RawBuilder<number>> {
  const db = q.db as unknown as Untyped;
  const last = (await q.run(db.selectFrom('list_blocks').select(['first_pos', 'first_rank', 'n']).where('school_id', '=', schoolId).where('list', '=', table).orderBy('first_pos', 'desc').limit(1)))
    .rows[0] as (Block & { first_rank: number }) | undefined;
  const lastPos = last ? Number(last.first_pos) : 0;
  const lastN = last ? Number(last.n) : 0;
  const fill = last ? Math.min(count, Math.max(0, BLOCK_ROWS - lastN)) : 0;
  const base = last ? lastPos + BLOCK_SPAN : 0;
  if (last && fill > 0) await q.run(db.updateTable('list_blocks').set({ n: lastN + fill }).where('school_id', '=', schoolId).where('list', '=', table).where('first_pos', '=', lastPos));
  const blocks: Block[] = [];
  for (let first = 0; first < count - fill; first += BLOCK_ROWS) blocks.push({ first_pos: base + laidOut(first), n: Math.min(BLOCK_ROWS, count - fill - first) });
  // The ranks of the list's blocks hold here (an import places its other changes after), and the new ones come after them all.
  await insertBlocks(q, table, schoolId, blocks, last ? Number(last.first_rank) + lastN + fill : 0);
  return (n) => sql<number>`case when ${n} < ${int(fill)} then ${int(lastPos + lastN)} + ${n} else ${int(base)} + ((${n} - ${int(fill)}) / ${int(BLOCK_ROWS)}) * ${int(BLOCK_SPAN)} + (${n} - ${int(fill)}) % ${int(BLOCK_ROWS)} end`;
}

/**
 * Puts right the positions of one school's list after an import changed it: `vacated` are
 * the positions its deleted and moved rows held, and the rows at position -1 (new, or
 * moved) are placed after the row before them in the list's order. Only the blocks that
 * lost or gained a row are rewritten: one that only lost rows is cut where they were (no
 * row moves); one that gained keeps the place of its first row or of its last, whichever
 * moves fewer (a block that grows past twice BLOCK_ROWS is split in the room between its
 * neighbours); then the ranks of the blocks. When there is too much to
 * place, or no room, the list is laid out whole. `vacated` null: too many to list.
 */
export async function placeChanges(q: Sql, table: ListTable, schoolId: string, vacated: number[] | null): Promise<void> {
  const db = q.db as unknown as Untyped;
  const order = LIST_MODELS[table].order;
  const homeless = (await q.run(db.selectFrom(table).select(['id', `${order} as at`]).where('school_id', '=', schoolId).where('pos', '=', -1).limit(PLACE_AT_MOST + 1))).rows as { id: string; at: string }[];
  const blocks = ((await q.run(db.selectFrom('list_blocks').select(['first_pos', 'n']).where('school_id', '=', schoolId).where('list', '=', table).orderBy('first_pos'))).rows as unknown as Block[]).map((b) => ({
    first_pos: Number(b.first_pos),
    n: Number(b.n),
  }));
  if (vacated === null || vacated.length + homeless.length > PLACE_AT_MOST || blocks.length === 0) return layOut(q, table, schoolId);

  // The block holding `pos`: the last whose first position is not after it.
  const blockAt = (pos: number): number => {
    let [lo, hi] = [0, blocks.length - 1];
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (blocks[mid]!.first_pos <= pos) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  const dirty = new Set<number>(vacated.map(blockAt));
  // Each new or moved row's place: after the row before it among those placed (one query for all).
  const t = sql.table(table);
  const orderRef = sql.ref(order);
  const befores = (
    await q.run(
      sql`select h.id, (select r.pos from ${t} r where r.school_id = ${schoolId} and r.pos >= 0 and (r.${orderRef}, r.id) < (h.${orderRef}, h.id)
                         order by r.${orderRef} desc, r.id desc limit 1) as before
            from ${t} h where h.school_id = ${schoolId} and h.pos = -1`.compile(q.db),
    )
  ).rows as { id: string; before: number | null }[];
  for (const row of befores) dirty.add(row.before === null ? 0 : blockAt(Number(row.before)));
  if (dirty.size === 0) return;

  // The rows of the changed blocks, kept and gained, in the list's order: a query per
  // RANGES_AT_ONCE blocks (SQLite caps the selects of a compound at 500).
  const changed = [...dirty].sort((a, b) => a - b);
  const blockOf = new Map(befores.map((row) => [row.id, row.before === null ? 0 : blockAt(Number(row.before))]));
  const membersOf = new Map<number, { id: string; pos: number }[]>(changed.map((i) => [i, []]));
  for (let at = 0; at < changed.length; at += RANGES_AT_ONCE) {
    const some = changed.slice(at, at + RANGES_AT_ONCE);
    // A range scan per block, joined by UNION ALL: SQLite reads a chain of ORs by scanning the school's rows.
    const kept = some.map((i) => sql`select id, pos, ${orderRef} as at from ${t} where school_id = ${schoolId} and pos >= ${int(blocks[i]!.first_pos)} and pos < ${int(blocks[i]!.first_pos + blocks[i]!.n)}`);
    const gained = befores.filter((row) => some.includes(blockOf.get(row.id)!)).map((row) => row.id);
    if (gained.length > 0) kept.push(sql`select id, pos, ${orderRef} as at from ${t} where school_id = ${schoolId} and pos = -1 and id in (${sql.join(gained)})`);
    const rows = (await q.run(sql`select id, pos from (${sql.join(kept, sql` union all `)}) m order by at, id`.compile(q.db))).rows as { id: string; pos: number }[];
    for (const row of rows) {
      const pos = Number(row.pos);
      membersOf.get(pos === -1 ? blockOf.get(row.id)! : blockAt(pos))!.push(row);
    }
  }

  const layouts: { from: number; to: Block[] }[] = [];
  const moved: [string, number][] = [];
  // Where each rewritten block now ends: the block after it may start there.
  const ends = new Map<number, number>();
  for (const index of changed) {
    const block = blocks[index]!;
    const members = membersOf.get(index)!;
    // The block may take the positions between the block before it and the one after it.
    const before = blocks[index - 1];
    const low = before ? (ends.get(index - 1) ?? before.first_pos + before.n) : 0;
    const high = blocks[index + 1]?.first_pos ?? Number.POSITIVE_INFINITY;
    const count = members.length;
    const movedFrom = (first: number) => members.reduce((n, row, i) => (Number(row.pos) === first + i ? n : n + 1), 0);
    const runs = runsOf(members);
    let to: Block[];
    if (count === 0) to = [];
    else if (runs !== null) to = runs;
    else if (count <= 2 * BLOCK_ROWS && count <= high - low) {
      // Keeping the first row's position, or the last row's: whichever moves fewer rows.
      const places = [block.first_pos, block.first_pos + block.n - count].filter((first) => first >= low && first + count <= high);
      const first = places.length === 0 ? Math.max(low, Math.min(block.first_pos, high - count)) : places.reduce((a, b) => (movedFrom(b) < movedFrom(a) ? b : a));
      to = [{ first_pos: first, n: count }];
    } else {
      const parts = Math.ceil(count / BLOCK_ROWS);
      const span = Number.isFinite(high) ? Math.floor((high - low) / parts) : BLOCK_SPAN;
      if (span < BLOCK_ROWS) return layOut(q, table, schoolId);
      to = Array.from({ length: parts }, (_, i) => ({ first_pos: low + i * span, n: Math.min(BLOCK_ROWS, count - i * BLOCK_ROWS) }));
    }
    let slot = 0;
    for (const part of to) {
      for (let i = 0; i < part.n; i++, slot++) {
        const row = members[slot]!;
        if (Number(row.pos) !== part.first_pos + i) moved.push([row.id, part.first_pos + i]);
      }
    }
    const last = to.at(-1);
    ends.set(index, last ? last.first_pos + last.n : low);
    layouts.push({ from: block.first_pos, to });
  }
  await writePositions(q, table, schoolId, moved);
  await q.run(db.deleteFrom('list_blocks').where('school_id', '=', schoolId).where('list', '=', table).where('first_pos', 'in', layouts.map((l) => l.from)));
  await insertBlocks(q, table, schoolId, layouts.flatMap((l) => l.to), null);
}

/** Pieces a block that only lost rows may be cut into, at most, rather than moving rows. */
const RUNS_AT_MOST = 8;

/**
 * A block that only lost rows keeps every row where it is: it becomes the runs of
 * consecutive positions it has left (a few blocks in place of one; no row is written).
 * Null when it gained a row, or when it would be cut in more than RUNS_AT_MOST pieces.
 */
function runsOf(members: readonly { pos: number }[]): Block[] | null {
  const runs: Block[] = [];
  for (const row of members) {
    const pos = Number(row.pos);
    if (pos === -1) return null;
    const last = runs.at(-1);
    if (last && pos === last.first_pos + last.n) last.n += 1;
    else runs.push({ first_pos: pos, n: 1 });
  }
  return runs.length > RUNS_AT_MOST ? null : runs;
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
 * given), writes the ones that differ, and gives them the change seq `seq` (and their
 * marks) when given. Returns how many differed.
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
    const marked: { id: string; seq: number }[] = [];
    for (const row of rows) {
      const item = itemOf(table, row);
      if (item === row.item) continue;
      differ.push([row.id as string, item]);
      marked.push({ id: row.id as string, seq: Number(row.change_seq) });
    }
    if (seq !== null) await moveMarks(q, schoolId, table, seq, marked);
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
  // Thrown to roll back the items of a school removed by hand while they were made.
  const removed = new Error('school removed');
  for (const { id } of schools) {
    await db
      .transaction()
      .execute(async (trx) => {
        const q = viaKysely(trx);
        const version = await lockSchool(q, id);
        if (version === null) return;
        let changed = 0;
        for (const table of LIST_TABLES) changed += await remakeItems(q, table, id, version + 1);
        if (changed > 0 && !(await recordBatch(q, id, version + 1))) throw removed;
      })
      .catch((err: unknown) => {
        if (err !== removed) throw err;
      });
  }
}

/**
 * Describes lists numbered 0, 1, 2 ... in their order (positions of version 1) by blocks of
 * BLOCK_ROWS positions each, with no room between them, in one statement per list; in the
 * caller's transaction.
 */
export async function blocksOfNumbered(trx: Kysely<Database>): Promise<void> {
  await trx.deleteFrom('list_blocks').execute();
  for (const table of LIST_TABLES) {
    const block = sql`(pos / ${int(BLOCK_ROWS)}) * ${int(BLOCK_ROWS)}`;
    await sql`insert into list_blocks (school_id, list, first_pos, first_rank, n)
              select school_id, ${table}, ${block}, ${block}, count(*) from ${sql.table(table)} group by school_id, ${block}`.execute(trx);
  }
}

/** Lays out every school's lists anew (the rebuild after an upgrade). */
export async function layOutAll(db: Kysely<Database>): Promise<void> {
  const schools = await db.selectFrom('schools').select('id').orderBy('id').execute();
  for (const { id } of schools) {
    await db.transaction().execute(async (trx) => {
      const q = viaKysely(trx);
      if ((await lockSchool(q, id)) === null) return;
      for (const table of LIST_TABLES) await layOut(q, table, id);
    });
  }
}
