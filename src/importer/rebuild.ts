/**
 * The read-model rebuild that runs after every `migrate` (the CLI's commands, `serve` and
 * its --workers primary): migrations describe the schema only, and this step makes again
 * whatever derived part (list items, positions, day totals) the stored rows hold in an
 * older version than today's code writes, then records the new version. A part whose
 * version is current costs one small query. Items that come out different are changes
 * like any other: each school whose items changed takes one change seq for them.
 */
import { sql, type Kysely } from 'kysely';
import { onPostgres } from '../db/index.js';
import type { Database } from '../db/schema.js';

/**
 * The version of each derived part that today's code writes. Raise one when its code
 * changes what it writes (an item's shape, the order of a list, how a total is summed).
 */
export const READ_MODEL_VERSIONS = { items: 1, positions: 2, day_totals: 2 } as const;

type Part = keyof typeof READ_MODEL_VERSIONS;

const storedVersions = async (db: Kysely<Database>) =>
  new Map((await db.selectFrom('read_model_versions').select(['part', 'version']).execute()).map((r) => [r.part, Number(r.version)]));

const record = (db: Kysely<Database>, part: Part) =>
  db
    .insertInto('read_model_versions')
    .values({ part, version: READ_MODEL_VERSIONS[part] })
    .onConflict((c) => c.column('part').doUpdateSet({ version: READ_MODEL_VERSIONS[part] }))
    .execute();

/**
 * Runs `work` in one transaction unless `part` is current by then, and records its version
 * in the same transaction. The versions are read under a lock every such transaction takes
 * (on PostgreSQL a lock of the versions' table; on SQLite the write lock, which the store's
 * transactions take as they begin), so of processes upgrading one store at once only the
 * first makes the part: a later one, which may have found it stale before that, could
 * otherwise make it again from rows an import has written since in today's form. A
 * migration that writes the versions does so before it locks a read-model table, so the
 * two never wait for each other. Returns whether it ran.
 */
async function inOneTransaction(db: Kysely<Database>, part: Part, work: (trx: Kysely<Database>) => Promise<void>): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    if (onPostgres(trx)) await sql`lock table read_model_versions in share row exclusive mode`.execute(trx);
    if (((await storedVersions(trx)).get(part) ?? 0) >= READ_MODEL_VERSIONS[part]) return false;
    await work(trx);
    await record(trx, part);
    return true;
  });
}

/** Rebuilds every stale part; returns the parts rebuilt (none when all are current). */
export async function rebuildStale(db: Kysely<Database>): Promise<Part[]> {
  const stored = await storedVersions(db);
  const stale = (Object.keys(READ_MODEL_VERSIONS) as Part[]).filter((part) => (stored.get(part) ?? 0) < READ_MODEL_VERSIONS[part]);
  if (stale.length === 0) return [];
  // Loaded only when something is stale: every CLI command runs this check.
  const { blocksOfNumbered, remakeAllItems, layOutAll } = await import('./read-model.js');
  const { rebuildDayTotals } = await import('./day-totals.js');
  // Parts made school by school (each in a transaction holding the school's lock, as an
  // import's) come out the same when made twice, and are recorded after.
  const bySchool = (make: (db: Kysely<Database>) => Promise<void>, part: Part) => async () => {
    await make(db);
    await record(db, part);
    return true;
  };
  // Positions of version 1 number each list 0, 1, 2 ...: blocks of 64 without room between
  // them describe them as they are, so the upgrade writes no row (a list is laid out with
  // room the first time an import needs some). Older ones are laid out whole.
  const positions = (stored.get('positions') ?? 0) >= 1 ? () => inOneTransaction(db, 'positions', blocksOfNumbered) : bySchool(layOutAll, 'positions');
  const work: Record<Part, () => Promise<boolean>> = {
    items: bySchool(remakeAllItems, 'items'),
    positions,
    day_totals: () => inOneTransaction(db, 'day_totals', rebuildDayTotals),
  };
  const rebuilt: Part[] = [];
  for (const part of stale) if (await work[part]()) rebuilt.push(part);
  return rebuilt;
}
