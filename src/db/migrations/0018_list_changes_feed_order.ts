/**
 * PostgreSQL: the change marks indexed in the feed's own order too, (school_id, change_seq,
 * resource, id), beside their key's (school_id, resource, ...). A page of the whole feed is
 * then one range of it, read in order; PostgreSQL cannot merge the lists' ranges of the key
 * by itself, so it read a page's length from each list and sorted them. The key's order
 * stays for a feed of some lists and for the importer's writes. SQLite merges the lists'
 * ranges itself (src/resources/changes/repository.ts) and gets no second tree to write.
 */
import { PostgresAdapter, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  await db.schema.createIndex('list_changes_feed').on('list_changes').columns(['school_id', 'change_seq', 'resource', 'id']).execute();
}

export async function down(db: Db): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  await db.schema.dropIndex('list_changes_feed').execute();
}
