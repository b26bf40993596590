/**
 * A random stamp for each import that changes a school's data (`change_batches.stamp`),
 * the latest also on the school (`schools.data_stamp`). Entity tags, stored answers and
 * feed cursors name the stamp beside the seq, so after a restored copy of the database a
 * seq taken again by a later import is not mistaken for the one a client saw. Batches
 * from before this migration have the empty stamp.
 */
import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  await db.schema.alterTable('schools').addColumn('data_stamp', 'text', (c) => c.notNull().defaultTo('')).execute();
  await db.schema.alterTable('change_batches').addColumn('stamp', 'text', (c) => c.notNull().defaultTo('')).execute();
}

export async function down(db: Db): Promise<void> {
  await db.schema.alterTable('change_batches').dropColumn('stamp').execute();
  await db.schema.alterTable('schools').dropColumn('data_stamp').execute();
}
