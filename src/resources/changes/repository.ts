/**
 * The changes feed's query: one statement over the school's change log (docs/data-model.md,
 * "Change log"), so a page (and the pruning it was read after) is read from one snapshot. The
 * places after `after` are read from the indexes of the change marks and the tombstones
 * alone, in the change order, and merged (rowPlaces, inChangeOrder). Only then are the page's
 * records read, and each change's JSON is made and joined by the database, as a list's body
 * is (common/list.ts).
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { asBytes, onPostgres, prepared, type Reader } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { LIST_TABLES, type ListTable } from '../items.js';
import type { Place } from './cursor.js';

/** A page of the feed as the database made it. */
export interface ChangePage {
  /**
   * The page's changes as JSON objects joined with commas, in parts in the change order,
   * each as text or bytes (`asBytes`); empty when there are none. The parts are to be
   * joined with commas.
   */
  items: (string | Buffer)[];
  /** Whether changes follow the page's last. */
  more: boolean;
  /** The place of the page's last change and its batch's stamp, for the next cursor; null when there are none. */
  last: (Place & { stamp: string }) | null;
  /** The seq of the school's last pruned tombstone when the page was read (0: none), for the next cursor. */
  pruned: number;
}

/** A row of the page: one part of its items, and the same page-wide values on each. */
interface PageRow {
  /** The part's number, in the change order (on PostgreSQL null when there are no changes; on SQLite always 0, its items then null). */
  part: number | null;
  items: string | Buffer | null;
  /** The changes read: the page's, and one more when more follow. */
  n: number | string;
  seq: number | string | null;
  resource: ListTable | null;
  id: string | null;
  stamp: string | null;
  pruned: number | string;
}

/** The values of the query: the resources read are those given (not undefined). */
type Window = { schoolId: string; seq: number; resource: string; id: string; limit: number } & Partial<Record<ListTable, true>>;

/** A LIMIT evaluated at run time (SQLite would plan a bound LIMIT anew each run: list.ts). */
const bound = (value: unknown) => sql`${value} + 0`;
/** The page's size and one more, which says whether more follow. */
const andOne = (value: unknown) => sql`${value} + 1`;

/**
 * The changes in one part of a page's body on PostgreSQL. The driver reads each value into
 * one string: a whole page of 1,000 changes would be a string of a third of a megabyte,
 * which V8 keeps among its large objects until a full collection; parts of this many are
 * made in the young generation (promoted when a young collection finds them alive:
 * docs/performance.md, "The feed's page in parts", "The feed's pages made a few at a time").
 */
const PART = 100;

/**
 * The places of one list's rows after the window's place (their change marks), in the change
 * order. A row value bounds the index's range, so the seek starts at the first place after:
 * for a list before the place's own, the next seq; for the place's own list, the place's id in
 * its seq; for a list after it, the place's seq (ids are never empty).
 *
 * How the lists' places are merged differs (docs/performance.md, "The feed's page merged").
 * SQLite merges the lists' ordered reads itself, reading no more places than the page holds,
 * when the compound is ordered and each list's resource is its column (its equality then
 * tells SQLite the index gives the order). PostgreSQL cannot see that order across the lists:
 * each list's read is limited to the page's length first. For the whole feed it reads the
 * marks' index in the change order instead (`inChangeOrder`).
 */
function rowPlaces(table: ListTable, q: Window, pg: boolean): RawBuilder<unknown> {
  const name = sql.lit(table);
  const places = sql`select change_seq as seq, ${pg ? sql`${name} as resource` : sql`resource`}, id, 1 as live from list_changes
    where school_id = ${q.schoolId} and resource = ${name}
      and (change_seq, id) > (cast(${q.seq} as bigint) + case when ${name} < ${q.resource} then 1 else 0 end, case when ${name} = ${q.resource} then ${q.id} else '' end)`;
  return pg ? sql`select * from (${places} order by change_seq, id limit ${andOne(q.limit)}) as ${sql.id(`after_${table}`)}` : places;
}

/**
 * The places of the change marks (`list_changes`, live) or the tombstones of `tables` after
 * the window's place, in the change order: a range of an index in that order (the
 * tombstones'; the marks' on PostgreSQL, migration 0018).
 */
function inChangeOrder(from: 'list_changes' | 'tombstones', tables: ListTable[], q: Window, pg: boolean): RawBuilder<unknown> {
  const places = sql`select change_seq as seq, resource, id, ${sql.lit(from === 'list_changes' ? 1 : 0)} as live from ${sql.table(from)}
    where school_id = ${q.schoolId} and resource in (${sql.join(tables.map((t) => sql.lit(t)))})
      and (change_seq, resource, id) > (cast(${q.seq} as bigint), ${q.resource}, ${q.id})`;
  return pg ? sql`select * from (${places} order by change_seq, resource, id limit ${andOne(q.limit)}) as ${sql.id(`after_${from}`)}` : places;
}

/** The page's places: the first `limit` + 1 after the window's place, in the change order. */
function pageOf(places: RawBuilder<unknown>, q: Window): RawBuilder<unknown> {
  return sql`${places} order by seq, resource, id limit ${andOne(q.limit)}`;
}

/** The seq of the school's last pruned tombstone (0: none), read in the page's snapshot. */
function prunedOf(q: Window): RawBuilder<number> {
  return sql<number>`(select tombstones_dropped_seq from schools where id = ${q.schoolId})`;
}

/**
 * The page's last change (the next cursor's place) and its batch's stamp: the row of `shown`
 * that `lastFirst` orders first.
 */
function tailOf(lastFirst: RawBuilder<unknown>, q: Window): RawBuilder<unknown> {
  return sql`select c.seq, c.resource, c.id, b.stamp
      from (select seq, resource, id from shown order by ${lastFirst} limit 1) as c
      cross join change_batches b where b.school_id = ${q.schoolId} and b.seq = c.seq`;
}

/**
 * A change as the feed serves it: its place `c` (seq, resource, id), its batch `b`, `record`
 * its list's stored item (null for a deletion). Ids are letters, digits, `_` and `-`
 * (src/domain/ids.ts) and times stored text, so neither needs escaping.
 */
const changeJson = (record: RawBuilder<unknown>) =>
  sql<string>`'{"resource":"' || c.resource || '","id":"' || c.id || '","change":"' || (case when c.live = 0 then 'delete' else 'upsert' end) || '","changed_at":"' || b.committed_at || '","record":' || ${record} || '}'`;

/**
 * A change's record: its list's stored item, sought by its id in the list of its resource,
 * or JSON null for a deletion. A live change's row is there: the import writes a row and its
 * change mark in one transaction, and a page reads one snapshot (a missing row would make the
 * whole change SQL NULL, which the aggregate leaves out).
 */
function recordOf(tables: ListTable[], q: Window): RawBuilder<unknown> {
  const lists = tables.map((t) => sql`when ${sql.lit(t)} then (select item from ${sql.table(t)} r where r.school_id = ${q.schoolId} and r.id = c.id)`);
  return sql`case when c.live = 0 then 'null' else case c.resource ${sql.join(lists, sql` `)} end end`;
}

/**
 * The page on PostgreSQL, in parts of PART changes. The places are numbered in the change
 * order once, while they are only keys (`k`); everything after is ordered by that number,
 * so no sort compares the keys' text again. The changes' JSON is made in the aggregate,
 * after the page's rows are sorted by part as narrow places; the aggregate's own ORDER BY
 * then sorts each part's made changes by `k`, input already in that order. Each record is
 * sought by its place, as on SQLite (docs/performance.md, "The feed's page on PostgreSQL").
 */
function postgresPage(tables: ListTable[], places: RawBuilder<unknown>, q: Window): RawBuilder<PageRow> {
  return sql<PageRow>`with page as materialized (
      select seq, resource, id, live, row_number() over (order by seq, resource, id) as k from (${pageOf(places, q)}) as p
    ),
    shown as materialized (select seq, resource, id, live, k from page where k <= ${bound(q.limit)}),
    parts as (
      select (c.k - 1) / ${sql.lit(PART)} as part, string_agg(${changeJson(recordOf(tables, q))}, ',' order by c.k) as items
      from shown c join change_batches b on b.school_id = ${q.schoolId} and b.seq = c.seq
      group by 1
    )
    select parts.part, parts.items, body.n, tail.seq, tail.resource, tail.id, tail.stamp,
      ${prunedOf(q)} as pruned
    from (select count(*) as n from page) as body
    left join (${tailOf(sql`k desc`, q)}) as tail on 1 = 1
    left join parts on 1 = 1`;
}

/**
 * The page on SQLite, in one part, as bytes (its driver hands a blob over as a Buffer, no large string).
 * The places come merged in the change order, and every later ORDER BY is one SQLite sees
 * they already have, so nothing is sorted; each change is made from its place in that order,
 * its batch and record sought one by one (`CROSS JOIN` is SQLite's join order; the record by
 * a subquery of its list), and joined by an aggregate that keeps its FROM-subquery's order
 * (as common/list.ts). Planned freely, SQLite read every record of the school's lists to
 * find a page's; sorting the made changes cost as much again (docs/performance.md, "The
 * feed's page merged").
 */
function sqlitePage(db: Kysely<Database>, tables: ListTable[], places: RawBuilder<unknown>, q: Window): RawBuilder<PageRow> {
  return sql<PageRow>`with page as materialized (${pageOf(places, q)}),
    shown as materialized (select seq, resource, id, live from page order by seq, resource, id limit ${bound(q.limit)})
    select 0 as part, parts.items, (select count(*) from page) as n, tail.seq, tail.resource, tail.id, tail.stamp,
      ${prunedOf(q)} as pruned
    from (
      select ${asBytes(db, sql`string_agg(change, ',')`)} as items from (
        select ${changeJson(recordOf(tables, q))} as change
        from shown c cross join change_batches b where b.school_id = ${q.schoolId} and b.seq = c.seq
        order by c.seq, c.resource, c.id
      ) as made
    ) as parts
    left join (${tailOf(sql`seq desc, resource desc, id desc`, q)}) as tail on 1 = 1`;
}

const changesAfter = prepared((db, q: Window) => {
  const tables = LIST_TABLES.filter((t) => q[t] !== undefined);
  const pg = onPostgres(db);
  const marks = pg && tables.length === LIST_TABLES.length ? [inChangeOrder('list_changes', tables, q, pg)] : tables.map((t) => rowPlaces(t, q, pg));
  const places = sql.join([...marks, inChangeOrder('tombstones', tables, q, pg)], sql` union all `);
  const query = pg ? postgresPage(tables, places, q) : sqlitePage(db, tables, places, q);
  return { compile: () => query.compile(db) };
});

/** The page of at most `limit` changes of `resources` after `after`, in the change order. */
export async function changePage(reads: Reader, schoolId: string, resources: readonly ListTable[], after: Place, limit: number): Promise<ChangePage> {
  const window = { schoolId, seq: after.seq, resource: after.resource, id: after.id, limit } as Window;
  for (const table of LIST_TABLES) window[table] = resources.includes(table) ? true : undefined;
  const rows = await changesAfter(reads, window);
  const { n, seq, resource, id, stamp, pruned } = rows[0]!;
  // The rows come in no set order: the parts are put in theirs here.
  const items = rows.filter((row) => row.items !== null).sort((a, b) => Number(a.part) - Number(b.part)).map((row) => row.items!);
  // bigint columns come back as numbers from both drivers (src/db/index.ts); a count may not.
  const last = seq === null ? null : { seq: Number(seq), resource: resource!, id: id!, stamp: stamp! };
  return { items, more: Number(n) > limit, last, pruned: Number(pruned) };
}

const feedState = prepared((db, p: { schoolId: string; seq: number; resource: string; id: string }) =>
  db
    .selectFrom('schools')
    .select('tombstones_dropped_seq as dropped')
    // Compared in SQL, in the collation the feed's own order uses.
    .select(
      sql<number>`case when tombstones_dropped_resource > ${p.resource} or (tombstones_dropped_resource = ${p.resource} and tombstones_dropped_id > ${p.id}) then 1 else 0 end`.as(
        'before_last_dropped',
      ),
    )
    .select((eb) => eb.selectFrom('change_batches').select('stamp').where('change_batches.school_id', '=', p.schoolId).where('change_batches.seq', '=', p.seq).as('stamp'))
    .select('data_version')
    .where('id', '=', p.schoolId),
);

/**
 * What a cursor at `place` is checked against, read from the store now: the highest seq of
 * the tombstones the school has pruned (0: none), whether the place comes before the last
 * tombstone pruned in that seq, the stamp of the batch `place.seq` (null: none), and the
 * school's data version (its last import's seq).
 */
export async function cursorState(
  reads: Reader,
  schoolId: string,
  place: Place,
): Promise<{ droppedThrough: number; beforeLastDropped: boolean; stamp: string | null; dataVersion: number }> {
  const [row] = await feedState(reads, { schoolId, seq: place.seq, resource: place.resource, id: place.id });
  return {
    droppedThrough: Number(row?.dropped ?? 0),
    beforeLastDropped: Number(row?.before_last_dropped ?? 0) === 1,
    stamp: row?.stamp ?? null,
    dataVersion: Number(row?.data_version ?? 0),
  };
}
