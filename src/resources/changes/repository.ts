/**
 * The changes feed's query: one statement over the school's change log (docs/data-model.md,
 * "Change log"), so a page is read from one snapshot. The places after `after` are found
 * in the (school_id, change_seq, id) indexes alone, at most `limit` per table, merged in
 * the change order (seq, resource, id); only then are the page's items read.
 */
import { sql, type RawBuilder } from 'kysely';
import { prepared, type Reader } from '../../db/index.js';
import { LIST_TABLES, type ListTable } from '../items.js';
import type { Place } from './cursor.js';

export interface ChangeRow {
  seq: number;
  resource: ListTable;
  id: string;
  committed_at: string;
  /** The stamp of the seq's batch, for the cursor after this change. */
  stamp: string;
  /** The record's list item as JSON text; null for a deletion. */
  item: string | null;
}

/** The values of the query: the resources read are those given (not undefined). */
type Window = { schoolId: string; seq: number; resource: string; id: string; limit: number } & Partial<Record<ListTable, true>>;

/** A LIMIT evaluated at run time (SQLite would plan a bound LIMIT anew each run: list.ts). */
const bound = (value: unknown) => sql`${value} + 0`;

/** The places of one table's rows after the window's place. */
function rowPlaces(table: ListTable, q: Window): RawBuilder<unknown> {
  const name = sql.lit(table);
  return sql`select * from (
    select change_seq as seq, ${name} as resource, id, 1 as live from ${sql.table(table)}
    where school_id = ${q.schoolId} and change_seq >= ${q.seq}
      and (change_seq > ${q.seq} or ${name} > ${q.resource} or (${name} = ${q.resource} and id > ${q.id}))
    order by change_seq, id limit ${bound(q.limit)}) as ${sql.id(`after_${table}`)}`;
}

/** The places of the tombstones of `tables` after the window's place. */
function tombstonePlaces(tables: ListTable[], q: Window): RawBuilder<unknown> {
  return sql`select * from (
    select change_seq as seq, resource, id, 0 as live from tombstones
    where school_id = ${q.schoolId} and resource in (${sql.join(tables.map((t) => sql.lit(t)))}) and change_seq >= ${q.seq}
      and (change_seq > ${q.seq} or resource > ${q.resource} or (resource = ${q.resource} and id > ${q.id}))
    order by change_seq, resource, id limit ${bound(q.limit)}) as after_tombstones`;
}

const changesAfter = prepared((db, q: Window) => {
  const tables = LIST_TABLES.filter((t) => q[t] !== undefined);
  const places = sql.join([...tables.map((t) => rowPlaces(t, q)), tombstonePlaces(tables, q)], sql` union all `);
  const items = tables.map(
    (t) => sql`select k.seq, k.resource, k.id, r.item from page k join ${sql.table(t)} r on r.school_id = ${q.schoolId} and r.id = k.id where k.live = 1 and k.resource = ${sql.lit(t)}`,
  );
  const query = sql<ChangeRow>`with page as materialized (
      select * from (${places}) as places order by seq, resource, id limit ${bound(q.limit)}
    ),
    paged as (${sql.join([...items, sql`select seq, resource, id, null as item from page where live = 0`], sql` union all `)})
    select p.seq, p.resource, p.id, b.committed_at, b.stamp, p.item
    from paged p join change_batches b on b.school_id = ${q.schoolId} and b.seq = p.seq
    order by p.seq, p.resource, p.id`;
  return { compile: () => query.compile(db) };
});

/** The changes of `resources` after `after`, at most `limit`, in the change order. */
export async function changesAfterPlace(reads: Reader, schoolId: string, resources: readonly ListTable[], after: Place, limit: number): Promise<ChangeRow[]> {
  const window = { schoolId, seq: after.seq, resource: after.resource, id: after.id, limit } as Window;
  for (const table of LIST_TABLES) window[table] = resources.includes(table) ? true : undefined;
  const rows = await changesAfter(reads, window);
  // bigint columns come back as numbers from both drivers (src/db/index.ts).
  return rows.map((row) => ({ ...row, seq: Number(row.seq) }));
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
    .where('id', '=', p.schoolId),
);

/**
 * What a cursor at `place` is checked against: the highest seq of the tombstones the
 * school has pruned (0: none), whether the place comes before the last tombstone pruned in
 * that seq, and the stamp of the batch `place.seq` (null: none).
 */
export async function cursorState(reads: Reader, schoolId: string, place: Place): Promise<{ droppedThrough: number; beforeLastDropped: boolean; stamp: string | null }> {
  const [row] = await feedState(reads, { schoolId, seq: place.seq, resource: place.resource, id: place.id });
  return { droppedThrough: Number(row?.dropped ?? 0), beforeLastDropped: Number(row?.before_last_dropped ?? 0) === 1, stamp: row?.stamp ?? null };
}
