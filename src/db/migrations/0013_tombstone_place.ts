/**
 * The place of the last tombstone pruned within the school's highest pruned seq
 * (`schools.tombstones_dropped_resource`, `..._id`): a feed cursor inside that import
 * that had read past it missed nothing and is still served. The default, the place after
 * the whole import, keeps the rule of the rows pruned before this migration.
 */
import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  await db.schema.alterTable('schools').addColumn('tombstones_dropped_resource', 'text', (c) => c.notNull().defaultTo('zz')).execute();
  await db.schema.alterTable('schools').addColumn('tombstones_dropped_id', 'text', (c) => c.notNull().defaultTo('')).execute();
}

export async function down(db: Db): Promise<void> {
  await db.schema.alterTable('schools').dropColumn('tombstones_dropped_id').execute();
  await db.schema.alterTable('schools').dropColumn('tombstones_dropped_resource').execute();
}
