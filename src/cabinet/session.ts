/**
 * Cabinet sign-in sessions, kept in the database so that every instance shares them.
 *
 * The browser holds a random 32-byte token in a `__Host-` cookie; the database holds
 * only its SHA-256, so a copy of the table cannot be replayed as a sign-in. A session
 * ends after an idle period, after an absolute lifetime, or at sign-out (row deleted).
 */
import { hash } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { Config } from '../config/index.js';
import { isLockWait, onPostgres, withoutLockWait } from '../db/index.js';
import type { Database } from '../db/schema.js';
import { formatTimestamp, nowTimestamp } from '../domain/time.js';
import { randomToken, TOKEN_FORMAT } from './security.js';

export const SESSION_COOKIE = '__Host-sd_session';
/** The sign-in form's token, before there is a session to hold one. */
export const LOGIN_COOKIE = '__Host-sd_login';
export const COOKIE_OPTIONS = { path: '/', secure: true, httpOnly: true, sameSite: 'strict' } as const;

export interface SessionPolicy {
  idleMs: number;
  maxMs: number;
}

export function sessionPolicy(config: Pick<Config, 'cabinetSessionIdleMinutes' | 'cabinetSessionMaxHours'>): SessionPolicy {
  return { idleMs: config.cabinetSessionIdleMinutes * 60_000, maxMs: config.cabinetSessionMaxHours * 3_600_000 };
}

/** Who is signed in, for which school, and the token every form of theirs must carry. */
export interface SignedIn {
  sessionId: string;
  csrf: string;
  director: { id: string; email: string };
  school: { id: string; name: string; plan: string; timezone: string };
}

export type SessionLookup = { state: 'none' } | { state: 'expired' } | { state: 'active'; session: SignedIn };

const sessionId = (token: string): string => hash('sha256', token, 'hex');

/** Starts a session and returns the token for the cookie (the only place it exists). */
export async function startSession(db: Kysely<Database>, directorId: string, policy: SessionPolicy): Promise<string> {
  // Ended sessions are cleared here, a sign-in being rare enough to pay for it (not in a
  // password change: its transaction holds the director's rows, and clearing others' there
  // could deadlock with a sign-in's clearing on PostgreSQL).
  const now = nowTimestamp();
  await db.deleteFrom('cabinet_sessions').where((eb) => eb.or([eb('idle_expires_at', '<=', now), eb('expires_at', '<=', now)])).execute();
  return (await insertSession(db, directorId, policy)).token;
}

/**
 * A new session for the director signed in as `current`, written in the caller's
 * transaction after it has ended theirs (a password change): a new cookie token and a new
 * form token, so a copy of the old cookie no longer signs in.
 */
export async function startSessionIn(trx: Transaction<Database>, current: SignedIn, policy: SessionPolicy): Promise<{ token: string; session: SignedIn }> {
  const made = await insertSession(trx, current.director.id, policy);
  return { token: made.token, session: { ...current, sessionId: made.id, csrf: made.csrf } };
}

async function insertSession(db: Kysely<Database>, directorId: string, policy: SessionPolicy): Promise<{ token: string; id: string; csrf: string }> {
  const token = randomToken();
  const id = sessionId(token);
  const csrf = randomToken();
  const now = Date.now();
  const created = formatTimestamp(now);
  await db
    .insertInto('cabinet_sessions')
    .values({
      id,
      director_id: directorId,
      csrf_token: csrf,
      created_at: created,
      idle_expires_at: formatTimestamp(Math.min(now + policy.idleMs, now + policy.maxMs)),
      expires_at: formatTimestamp(now + policy.maxMs),
    })
    .execute();
  return { token, id, csrf };
}

/**
 * A session's upkeep, written when it can be at once: while another process holds SQLite's
 * write lock (an import merging), an expired session's row stays until a later request
 * removes it, and an idle period is extended by a later request; the page does not wait.
 */
async function unlessLocked(write: () => Promise<unknown>): Promise<void> {
  try {
    await withoutLockWait(write);
  } catch (error) {
    if (!isLockWait(error)) throw error;
  }
}

/**
 * The session a cookie names, if it is still valid. Each use moves the idle expiry
 * forward (written at most once a minute, not on every page view), never past the
 * absolute one.
 */
export async function findSession(db: Kysely<Database>, token: string | undefined, policy: SessionPolicy): Promise<SessionLookup> {
  if (token === undefined || !TOKEN_FORMAT.test(token)) return { state: 'none' };
  const id = sessionId(token);
  const row = await db
    .selectFrom('cabinet_sessions as s')
    .innerJoin('directors as d', 'd.id', 's.director_id')
    .innerJoin('schools as sc', 'sc.id', 'd.school_id')
    .select(['s.csrf_token', 's.idle_expires_at', 's.expires_at', 'd.id as directorId', 'd.email', 'sc.id as schoolId', 'sc.name', 'sc.plan', 'sc.timezone'])
    .where('s.id', '=', id)
    .executeTakeFirst();
  if (!row) return { state: 'none' };
  const now = Date.now();
  const nowText = formatTimestamp(now);
  if (nowText >= row.idle_expires_at || nowText >= row.expires_at) {
    await unlessLocked(() => endSession(db, id));
    return { state: 'expired' };
  }
  const idleExpiresAt = formatTimestamp(Math.min(now + policy.idleMs, Date.parse(row.expires_at)));
  if (Date.parse(idleExpiresAt) - Date.parse(row.idle_expires_at) >= Math.min(60_000, policy.idleMs / 10)) {
    await unlessLocked(() => db.updateTable('cabinet_sessions').set({ idle_expires_at: idleExpiresAt }).where('id', '=', id).execute());
  }
  return {
    state: 'active',
    session: {
      sessionId: id,
      csrf: row.csrf_token,
      director: { id: row.directorId, email: row.email },
      school: { id: row.schoolId, name: row.name, plan: row.plan, timezone: row.timezone },
    },
  };
}

export async function endSession(db: Kysely<Database>, id: string): Promise<void> {
  await db.deleteFrom('cabinet_sessions').where('id', '=', id).execute();
}

/**
 * Whether the session `id` is still valid, held so for the rest of the caller's transaction: on
 * PostgreSQL its row is locked against a sign-out, a reset or a password change until the
 * transaction ends (SQLite's transactions take the write lock first). A change the session
 * asked for runs this first, so that one that ended after its page was checked changes nothing.
 */
export async function holdSession(trx: Transaction<Database>, id: string): Promise<boolean> {
  const now = nowTimestamp();
  let query = trx.selectFrom('cabinet_sessions').select('id').where('id', '=', id).where('idle_expires_at', '>', now).where('expires_at', '>', now);
  if (onPostgres(trx)) query = query.forShare();
  return (await query.executeTakeFirst()) !== undefined;
}

/**
 * Accepts a create-key or roll-key form's one-time token once per session: false when it
 * was accepted before (a reload, a back-and-resubmit, an older tab sent again) or the
 * session has just ended.
 */
export async function claimFormNonce(db: Kysely<Database>, id: string, nonce: string): Promise<boolean> {
  const result = await db
    .insertInto('cabinet_form_nonces')
    .columns(['session_id', 'nonce'])
    .expression((eb) => eb.selectFrom('cabinet_sessions').select((s) => ['id', s.val(nonce).as('nonce')]).where('id', '=', id))
    .onConflict((oc) => oc.columns(['session_id', 'nonce']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
}

/** Ends the session a cookie names, if any (sign-in replaces an older session of the browser). */
export async function endSessionByToken(db: Kysely<Database>, token: string | undefined): Promise<void> {
  if (token !== undefined && TOKEN_FORMAT.test(token)) await endSession(db, sessionId(token));
}
