/**
 * The school's lock and change sequence. Imports into one school are serialised by the
 * lock, and an import that changes something takes `seq = data_version + 1`, writes it on
 * every row it changed and moves the rows' change marks to it (`list_changes`), and
 * records the batch (`change_batches`, `schools.data_version`) as the last thing before
 * its commit. Once it commits, no response stored for the earlier data is served again
 * (src/resources/cache.ts keys them by data_version). Each batch has a random stamp
 * besides: after a restored copy of the database, a seq taken again names another stamp,
 * so entity tags and feed cursors of the lost data do not match.
 */
import { randomBytes } from 'node:crypto';
import { sql, type RawBuilder } from 'kysely';
import { onPostgres } from '../db/index.js';
import { formatTimestamp, nowTimestamp } from '../domain/time.js';
import type { ListTable } from '../resources/items.js';
import type { Sql } from './run.js';

/**
 * First key of the two-key advisory lock of a school's data; the second is the schema and
 * the school's id hashed. docs/operations.md names it (383611) for removing a school by hand.
 */
const SCHOOL_DATA_LOCK_CLASS = 0x5d_a7b;

/**
 * Takes the school's lock inside the caller's transaction and returns its data version,
 * or null when the school is no longer there (removed by hand since the caller looked).
 * PostgreSQL takes an advisory lock of the school's data, not a lock of its row: an
 * import holds it from its first record read to its commit, and a lock of the row would
 * stop whatever locks the row meanwhile, such as the key changes of the school's director
 * (the import locks the row only at its end, by the data version's update: the tables it
 * writes have no foreign key to it on PostgreSQL). Only the holders of this lock change the
 * data version. SQLite has one writer at a time, taken here by a write that changes
 * nothing (a SQLite transaction that read first could not upgrade to writing once another
 * connection had written).
 */
export async function lockSchool(q: Sql, schoolId: string): Promise<number | null> {
  if (onPostgres(q.db)) {
    await q.run(sql`select pg_advisory_xact_lock(${sql.lit(SCHOOL_DATA_LOCK_CLASS)}, hashtext(current_schema() || '/' || ${schoolId}))`.compile(q.db));
  } else {
    await q.run(q.db.updateTable('schools').set((eb) => ({ data_version: eb.ref('data_version') })).where('id', '=', schoolId));
  }
  const { rows } = await q.run(q.db.selectFrom('schools').select('data_version').where('id', '=', schoolId));
  return rows[0] ? Number(rows[0].data_version ?? 0) : null;
}

/**
 * The statement that deletes the change marks of rows of `list` that `marks` (a query of
 * their `change_seq` and `id`, in that order) names: what a row's seq was before a change.
 * PostgreSQL finds them in the key's order, so that many are found page after page.
 */
export function dropMarks(q: Sql, schoolId: string, list: ListTable, marks: RawBuilder<unknown>): RawBuilder<unknown> {
  if (!onPostgres(q.db)) return sql`delete from list_changes where school_id = ${schoolId} and resource = ${list} and (change_seq, id) in (${marks})`;
  return sql`delete from list_changes using (select * from (${marks}) as m order by 1, 2) as gone (change_seq, id)
              where list_changes.school_id = ${schoolId} and list_changes.resource = ${list}
                and list_changes.change_seq = gone.change_seq and list_changes.id = gone.id`;
}

/**
 * The statement that appends the marks of the batch `seq` for the rows of `list` that `ids`
 * (a query of their `id`) selects, in the key's order. None may have a mark of `seq` yet.
 */
export function appendMarks(schoolId: string, list: ListTable, seq: number, ids: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`insert into list_changes (school_id, resource, change_seq, id) select ${schoolId}, ${list}, ${seq}, id from (${ids}) as marked order by id`;
}

/**
 * Moves the change marks of `rows` of `list` (each id with the seq its row has now) to the
 * batch `seq`, before the rows themselves take it; a row already at `seq` keeps its mark.
 */
export async function moveMarks(q: Sql, schoolId: string, list: ListTable, seq: number, rows: readonly { id: string; seq: number }[]): Promise<void> {
  const moving = rows.filter((row) => row.seq !== seq);
  if (moving.length === 0) return;
  await q.run(dropMarks(q, schoolId, list, sql`values ${sql.join(moving.map((row) => sql`(cast(${row.seq} as bigint), ${row.id})`))}`).compile(q.db));
  const ids = sql`select id from ${sql.table(list)} where school_id = ${schoolId} and id in (${sql.join(moving.map((row) => row.id))})`;
  await q.run(appendMarks(schoolId, list, seq, ids).compile(q.db));
}

/**
 * Records the batch `seq` of the school: its commit time (now: call it last), a random
 * stamp, and the school's data version and stamp. False, and nothing recorded, when the
 * school's row is gone: the caller must not commit (on PostgreSQL no foreign key would
 * stop rows of a school that is not there).
 */
export async function recordBatch(q: Sql, schoolId: string, seq: number): Promise<boolean> {
  const stamp = randomBytes(6).toString('base64url');
  const school = await q.run(q.db.updateTable('schools').set({ data_version: seq, data_stamp: stamp }).where('id', '=', schoolId));
  if (school.changed === 0) return false;
  await q.run(q.db.insertInto('change_batches').values({ school_id: schoolId, seq, committed_at: nowTimestamp(), stamp }));
  return true;
}

/**
 * Drops the school's tombstones of batches committed more than `days` days ago, and
 * remembers the place of the last one dropped (a feed cursor before it can no longer be
 * served): the highest seq, and the last (resource, id) in that seq in the feed's order.
 */
export async function pruneTombstones(q: Sql, schoolId: string, days: number): Promise<void> {
  const cutoff = formatTimestamp(Date.now() - days * 86_400_000);
  const last = await q.run(
    q.db.selectFrom('change_batches').select((eb) => eb.fn.max('seq').as('seq')).where('school_id', '=', schoolId).where('committed_at', '<', cutoff),
  );
  const through = last.rows[0]?.seq;
  if (through === null || through === undefined) return;
  const dropped = await q.run(
    q.db
      .selectFrom('tombstones')
      .select(['change_seq', 'resource', 'id'])
      .where('school_id', '=', schoolId)
      .where('change_seq', '<=', Number(through))
      .orderBy('change_seq', 'desc')
      .orderBy('resource', 'desc')
      .orderBy('id', 'desc')
      .limit(1),
  );
  const highest = dropped.rows[0] as { change_seq: number | string; resource: string; id: string } | undefined;
  if (highest === undefined) return;
  await q.run(q.db.deleteFrom('tombstones').where('school_id', '=', schoolId).where('change_seq', '<=', Number(through)));
  await q.run(
    q.db
      .updateTable('schools')
      .set({ tombstones_dropped_seq: Number(highest.change_seq), tombstones_dropped_resource: highest.resource, tombstones_dropped_id: highest.id })
      .where('id', '=', schoolId)
      .where('tombstones_dropped_seq', '<=', Number(highest.change_seq)),
  );
}
