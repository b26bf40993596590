/**
 * Key activity and exactly-once usage (docs/data-model.md, "Key activity"):
 * - `usage_batches`: the id of every batch of usage counts moved from Redis to the
 *   database, written in the same transaction as its increments, so a batch applied by
 *   one instance is never applied again by another;
 * - `key_days`: each key's requests per UTC day (kept 90 days);
 * - `key_requests`: each key's last requests (kept 100 per key);
 * - `usage_queue`: one row, a random id made here, that names this database's usage queue
 *   in Redis: services on different databases may share one Redis.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  await db.schema.createTable('usage_queue').addColumn('id', 'text', (c) => c.primaryKey()).execute();
  await sql`insert into usage_queue (id) values (${randomUUID()})`.execute(db);
  await db.schema
    .createTable('usage_batches')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('applied_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('usage_batches_applied').on('usage_batches').column('applied_at').execute();

  await db.schema
    .createTable('key_days')
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('requests', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('key_days_pk', ['key_id', 'day'] as never[])
    .execute();
  await db.schema.createIndex('key_days_day').on('key_days').column('day').execute();

  await db.schema
    .createTable('key_requests')
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('at_ms', 'bigint', (c) => c.notNull())
    .addColumn('method', 'text', (c) => c.notNull())
    .addColumn('target', 'text', (c) => c.notNull())
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('duration_ms', 'real', (c) => c.notNull())
    .addPrimaryKeyConstraint('key_requests_pk', ['key_id', 'request_id'] as never[])
    .execute();
  await db.schema.createIndex('key_requests_latest').on('key_requests').columns(['key_id', 'at_ms', 'request_id']).execute();
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('key_requests').execute();
  await db.schema.dropTable('key_days').execute();
  await db.schema.dropTable('usage_batches').execute();
  await db.schema.dropTable('usage_queue').execute();
}
