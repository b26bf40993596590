/**
 * Keys a security team can sign off (docs/api/keys.md): each key's options and the audit
 * of key events.
 * - `scopes`: the resources the key may read, comma-separated (null: all);
 * - `expires_at`: from then on the key is refused (null: never);
 * - `allow`: the addresses and CIDR ranges it may be used from, comma-separated (null: any);
 * - `rolled_from`: the key this one replaced; `retires_at`: when a rolled key's overlap
 *   ends (it is refused from then on and marked revoked by the sweep);
 * - `revoke_reason`: why `revoked_at` is set: revoked, rolled, expired, unused;
 * - `key_events`: one row per event (created, rolled, revoked, expired, revoked_unused,
 *   options_changed), with who did it (a director's email or `operator`) and when.
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  for (const column of ['scopes', 'expires_at', 'allow', 'rolled_from', 'retires_at', 'revoke_reason']) {
    await db.schema.alterTable('api_keys').addColumn(column, 'text').execute();
  }
  await sql`update api_keys set revoke_reason = 'revoked' where revoked_at is not null`.execute(db);

  await db.schema
    .createTable('key_events')
    .addColumn('seq', postgres ? 'bigserial' : 'integer', (c) => (postgres ? c.primaryKey() : c.primaryKey().autoIncrement()))
    .addColumn('school_id', 'text', (c) => c.notNull().references('schools.id').onDelete('cascade'))
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('detail', 'text')
    .execute();
  await db.schema.createIndex('key_events_school').on('key_events').columns(['school_id', 'seq']).execute();
  await db.schema.createIndex('key_events_key').on('key_events').columns(['key_id', 'seq']).execute();
  // The sweep looks at the school's active keys only.
  await db.schema.createIndex('api_keys_active').on('api_keys').columns(['revoked_at', 'school_id']).execute();
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropIndex('api_keys_active').execute();
  await db.schema.dropTable('key_events').execute();
  for (const column of ['revoke_reason', 'retires_at', 'rolled_from', 'allow', 'expires_at', 'scopes']) {
    await db.schema.alterTable('api_keys').dropColumn(column).execute();
  }
}
