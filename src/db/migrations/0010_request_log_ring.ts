/**
 * Each key's request log becomes a ring of 100 slots (docs/decisions.md, "The request
 * log is a ring"): `key_requests` is keyed by (key_id, slot) and a flush overwrites the
 * slots after the key's last written one, counted in `key_request_next`, so the table
 * never grows past 100 rows a key and a flush deletes nothing. The newest 100 requests of
 * each key move over, oldest in slot 0.
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  await db.schema.alterTable('key_requests').renameTo('key_requests_before_ring').execute();
  await db.schema
    .createTable('key_requests')
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('slot', 'integer', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('at_ms', 'bigint', (c) => c.notNull())
    .addColumn('method', 'text', (c) => c.notNull())
    .addColumn('target', 'text', (c) => c.notNull())
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('duration_ms', 'real', (c) => c.notNull())
    .addPrimaryKeyConstraint('key_requests_slot_pk', ['key_id', 'slot'] as never[])
    .execute();
  // PostgreSQL: room in each page for a row's next version, so that overwriting a slot
  // (no indexed column changes) is a heap-only update, cleared without VACUUM.
  if (db.getExecutor().adapter instanceof PostgresAdapter) await sql`alter table key_requests set (fillfactor = 50)`.execute(db);
  await db.schema
    .createTable('key_request_next')
    .addColumn('key_id', 'text', (c) => c.primaryKey())
    .addColumn('next', 'integer', (c) => c.notNull())
    .execute();
  await sql`
    insert into key_requests (key_id, slot, request_id, at_ms, method, target, status, address, duration_ms)
    select key_id, (n - 1) % 100, request_id, at_ms, method, target, status, address, duration_ms
    from (
      select r.*, row_number() over (partition by key_id order by at_ms, request_id) as n, count(*) over (partition by key_id) as total
      from key_requests_before_ring r
    ) numbered
    where n > total - 100`.execute(db);
  await sql`insert into key_request_next (key_id, next) select key_id, count(*) from key_requests_before_ring group by key_id`.execute(db);
  await db.schema.dropTable('key_requests_before_ring').execute();
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('key_request_next').execute();
  await db.schema.alterTable('key_requests').renameTo('key_requests_ring').execute();
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
  await sql`insert into key_requests select key_id, request_id, at_ms, method, target, status, address, duration_ms from key_requests_ring`.execute(db);
  await db.schema.dropTable('key_requests_ring').execute();
}
