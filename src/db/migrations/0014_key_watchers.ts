/**
 * What lets a PostgreSQL server keep the keys it has looked up (docs/decisions.md, "Keys kept
 * on PostgreSQL"): every change of what a key's lookup reads is announced on the channel
 * `school_data_keys` (payload: the schema), by triggers, so it reaches every server whatever
 * wrote it; each server listening is a row of `key_watchers` holding a lease, and writes in
 * `key_acks` each barrier it has seen (a writer waits for them). SQLite gets the two tables and
 * no triggers: a SQLite server reads the file's data version instead.
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('key_watchers')
    .addColumn('id', 'text', (c) => c.primaryKey())
    // Epoch milliseconds of PostgreSQL's clock: the server keeps its keys no longer than this.
    .addColumn('lease_until', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('key_acks')
    .addColumn('watcher', 'text', (c) => c.notNull())
    .addColumn('barrier', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('key_acks_pk', ['barrier', 'watcher'])
    .execute();
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  await sql`
    create function school_data_key_change() returns trigger language plpgsql as $$
    begin
      perform pg_notify('school_data_keys', tg_table_schema);
      return null;
    end
    $$`.execute(db);
  await sql`
    create trigger api_keys_changed after update of key_hash, school_id, revoked_at, scopes, expires_at, retires_at, allow or delete on api_keys
    for each statement execute function school_data_key_change()`.execute(db);
  await sql`
    create trigger schools_changed after update of plan, timezone, currency, data_version, data_stamp or delete on schools
    for each statement execute function school_data_key_change()`.execute(db);
}

export async function down(db: Db): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`drop trigger schools_changed on schools`.execute(db);
    await sql`drop trigger api_keys_changed on api_keys`.execute(db);
    await sql`drop function school_data_key_change()`.execute(db);
  }
  await db.schema.dropTable('key_acks').execute();
  await db.schema.dropTable('key_watchers').execute();
}
