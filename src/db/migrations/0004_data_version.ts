/**
 * schools.data_version: a number every import into the school raises, in the import's
 * transaction. The API reads it with the key on every request and keys its stored
 * responses by it (src/resources/cache.ts), so a stored answer is never served once the
 * data it was made from has changed, on any instance.
 */
import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  await db.schema.alterTable('schools').addColumn('data_version', 'integer', (c) => c.notNull().defaultTo(0)).execute();
}

export async function down(db: Db): Promise<void> {
  await db.schema.alterTable('schools').dropColumn('data_version').execute();
}
