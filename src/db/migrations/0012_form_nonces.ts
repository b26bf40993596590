/**
 * Every one-time token of a cabinet form (create a key, roll a key) accepted in a sign-in
 * session, not only the last: a form sent again, however many others were sent between,
 * creates nothing. The rows go with their session.
 */
import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('cabinet_form_nonces')
    .addColumn('session_id', 'text', (c) => c.notNull().references('cabinet_sessions.id').onDelete('cascade'))
    .addColumn('nonce', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('cabinet_form_nonces_pkey', ['session_id', 'nonce'])
    .execute();
  await db.schema.alterTable('cabinet_sessions').dropColumn('last_form_nonce').execute();
}

export async function down(db: Db): Promise<void> {
  await db.schema.alterTable('cabinet_sessions').addColumn('last_form_nonce', 'text').execute();
  await db.schema.dropTable('cabinet_form_nonces').execute();
}
