/**
 * The director's cabinet: directors (one school each, email as login) and their
 * sign-in sessions. Sessions live in the database so that every instance behind a
 * load balancer sees the same ones; only the SHA-256 of a session token is stored.
 */
import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('directors')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('school_id', 'text', (c) => c.notNull().references('schools.id').onDelete('cascade'))
    // Stored lower-cased, so the unique constraint is case-insensitive on both engines.
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('directors_school').on('directors').column('school_id').execute();

  await db.schema
    .createTable('cabinet_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('director_id', 'text', (c) => c.notNull().references('directors.id').onDelete('cascade'))
    .addColumn('csrf_token', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('idle_expires_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('last_form_nonce', 'text')
    .execute();
  await db.schema.createIndex('cabinet_sessions_director').on('cabinet_sessions').column('director_id').execute();
  await db.schema.createIndex('cabinet_sessions_idle').on('cabinet_sessions').column('idle_expires_at').execute();
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('cabinet_sessions').execute();
  await db.schema.dropTable('directors').execute();
}
