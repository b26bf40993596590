/**
 * The read-model rebuild that runs after every `migrate` (the CLI's commands, `serve` and
 * its --workers primary): migrations describe the schema only, and this step makes again
 * whatever derived part (list items, positions, day totals) the stored rows hold in an
 * older version than today's code writes, then records the new version. A part whose
 * version is current costs one small query. Items that come out different are changes
 * like any other: each school whose items changed takes one change seq for them.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';

/**
 * The version of each derived part that today's code writes. Raise one when its code
 * changes what it writes (an item's shape, the order of a list, how a total is summed).
 */
export const READ_MODEL_VERSIONS = { items: 1, positions: 2, day_totals: 2 } as const;

type Part = keyof typeof READ_MODEL_VERSIONS;

/** Rebuilds every stale part; returns the parts rebuilt (none when all are current). */
export async function rebuildStale(db: Kysely<Database>): Promise<Part[]> {
  const stored = new Map((await db.selectFrom('read_model_versions').select(['part', 'version']).execute()).map((r) => [r.part, Number(r.version)]));
  const stale = (Object.keys(READ_MODEL_VERSIONS) as Part[]).filter((part) => (stored.get(part) ?? 0) < READ_MODEL_VERSIONS[part]);
  if (stale.length === 0) return [];
  // Loaded only when something is stale: every CLI command runs this check.
  const { blocksOfNumbered, remakeAllItems, layOutAll } = await import('./read-model.js');
  const { rebuildDayTotals } = await import('./day-totals.js');
  // Positions of version 1 number each list 0, 1, 2 ...: blocks of 64 without room between
  // them describe them as they are, so the upgrade writes no row (a list is laid out with
  // room the first time an import needs some). Older ones are laid out whole.
  const positions = () => ((stored.get('positions') ?? 0) >= 1 ? blocksOfNumbered(db) : layOutAll(db));
  const work: Record<Part, () => Promise<void>> = { items: () => remakeAllItems(db), positions, day_totals: () => rebuildDayTotals(db) };
  for (const part of stale) {
    await work[part]();
    await db
      .insertInto('read_model_versions')
      .values({ part, version: READ_MODEL_VERSIONS[part] })
      .onConflict((c) => c.column('part').doUpdateSet({ version: READ_MODEL_VERSIONS[part] }))
      .execute();
  }
  return stale;
}
