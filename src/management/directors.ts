/**
 * Directors: the people who sign in to a school's cabinet. A director belongs to
 * exactly one school; the email is the login, unique across all schools and compared
 * without regard to case. Shared by the operator CLI (adding directors) and the
 * cabinet (signing in).
 *
 * Passwords are stored as scrypt hashes with a random salt; the cost parameters are
 * stored with each hash, so they can be raised later without breaking old hashes.
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import { holdsKey } from '../access/keys.js';
import type { Step } from '../db/index.js';
import type { Database } from '../db/schema.js';
import { nowTimestamp } from '../domain/time.js';
import { findSchool, type Outcome } from './schools.js';

export const PASSWORD_MIN_LENGTH = 12;
/** Long enough for any passphrase, short enough that hashing it costs nothing extra. */
export const PASSWORD_MAX_LENGTH = 256;
const EMAIL_MAX_LENGTH = 254;
const EMAIL = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/u;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f]/u;

export interface ScryptParams {
  N: number;
  r: number;
  p: number;
}

/**
 * OWASP's scrypt recommendation in its low-memory form (N=2^15, r=8, p=3: 32 MiB per
 * hash, the cost of N=2^17 spread over three passes); a few hundred milliseconds.
 */
export const DEFAULT_SCRYPT: ScryptParams = { N: 2 ** 15, r: 8, p: 3 };
const KEY_LENGTH = 32;
// Hashes stored by older, costlier settings must still verify; the bound keeps a
// tampered row from asking for gigabytes.
const MAX_MEMORY = 256 * 1024 * 1024;

export interface Director {
  id: string;
  school_id: string;
  email: string;
  created_at: string;
}

const DIRECTOR_COLUMNS = ['id', 'school_id', 'email', 'created_at'] as const;

/** The director whose (normalised) email is `login`. */
export function findDirector(db: Kysely<Database>, login: string): Promise<Director | undefined> {
  return db.selectFrom('directors').select(DIRECTOR_COLUMNS).where('email', '=', login).executeTakeFirst();
}

function derive(password: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, KEY_LENGTH, { ...params, maxmem: MAX_MEMORY }, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

export async function hashPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(password, salt, params);
  return ['scrypt', params.N, params.r, params.p, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

/** True when `password` matches `stored`; false for a wrong password or a malformed hash. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !n || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  if (expected.length !== KEY_LENGTH) return false;
  let actual: Buffer;
  try {
    actual = await derive(password, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p) });
  } catch {
    return false;
  }
  return timingSafeEqual(actual, expected);
}

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

function checkEmail(email: string): string | null {
  if (email.length > EMAIL_MAX_LENGTH || CONTROL.test(email) || !EMAIL.test(email)) return 'email must be an address such as director@example.com';
  return null;
}

/** A password's length in characters (code points: an emoji is one, not two UTF-16 units). */
export function passwordLength(password: string): number {
  return [...password].length;
}

export function checkPassword(password: string): string | null {
  const length = passwordLength(password);
  if (length < PASSWORD_MIN_LENGTH || length > PASSWORD_MAX_LENGTH) {
    return `password must be ${PASSWORD_MIN_LENGTH}-${PASSWORD_MAX_LENGTH} characters`;
  }
  if (CONTROL.test(password)) return 'password must not contain control characters';
  return null;
}

/** A strong random password for a new director: 24 characters, 144 bits. */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}

export interface NewDirector {
  schoolId: string;
  email: string;
  password: string;
}

export async function addDirector(db: Kysely<Database>, input: NewDirector, params: ScryptParams = DEFAULT_SCRYPT): Promise<Outcome<Director>> {
  const email = normaliseEmail(input.email);
  const badEmail = checkEmail(email);
  if (badEmail) return { ok: false, reason: badEmail };
  // Only for a new director: one added before the rule still signs in.
  if (holdsKey(email)) return { ok: false, reason: 'email must not hold an API key: a director\'s email is shown in lists and in the audit' };
  const badPassword = checkPassword(input.password);
  if (badPassword) return { ok: false, reason: badPassword };
  // Directors of Free and Standart schools are allowed: they see their plan and why
  // no key can be created, and the keys a downgraded school still holds.
  if (!(await findSchool(db, input.schoolId))) return { ok: false, reason: `no school with id "${input.schoolId}"` };

  const director: Director = { id: `dir_${randomBytes(8).toString('hex')}`, school_id: input.schoolId, email, created_at: nowTimestamp() };
  const password_hash = await hashPassword(input.password, params);
  const inserted = await db
    .insertInto('directors')
    .values({ ...director, password_hash })
    .onConflict((oc) => oc.column('email').doNothing())
    .executeTakeFirst();
  if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 0) return { ok: false, reason: `a director with email "${email}" already exists` };
  return { ok: true, value: director };
}

// Checked against when the email is unknown, so that a wrong email costs the same time
// as a wrong password and the answer's timing does not tell whether an account exists.
// (Made on the first unknown email a process sees, which therefore takes longer once.)
let dummyHash: Promise<string> | null = null;

/**
 * Checks a sign-in. Unknown email and wrong password are one and the same outcome,
 * reached in about the same time.
 */
export async function verifyDirector(db: Kysely<Database>, email: string, password: string): Promise<Director | null> {
  return (await verified(db, email, password))?.director ?? null;
}

/** The director `email` names when `password` is theirs, with the stored hash it matched. */
async function verified(db: Kysely<Database>, email: string, password: string): Promise<{ director: Director; passwordHash: string } | null> {
  const login = normaliseEmail(email);
  // An impossible address (a NUL byte would even be an error on PostgreSQL) is an unknown one.
  const row = checkEmail(login)
    ? undefined
    : await db.selectFrom('directors').select([...DIRECTOR_COLUMNS, 'password_hash']).where('email', '=', login).executeTakeFirst();
  if (!row) {
    dummyHash ??= hashPassword(generatePassword());
    await verifyPassword(password, await dummyHash);
    return null;
  }
  if (!(await verifyPassword(password, row.password_hash))) return null;
  return { director: { id: row.id, school_id: row.school_id, email: row.email, created_at: row.created_at }, passwordHash: row.password_hash };
}

/** A school's directors, or every director, by school then email. */
export async function listDirectors(db: Kysely<Database>, schoolId?: string): Promise<Director[]> {
  let query = db.selectFrom('directors').select(DIRECTOR_COLUMNS);
  if (schoolId !== undefined) query = query.where('school_id', '=', schoolId);
  return query.orderBy('school_id').orderBy('email').execute();
}

/**
 * Removes a director (someone who left the school): their sessions end with them
 * (the foreign key cascades), so an open cabinet tab is signed out at its next request.
 */
export async function removeDirector(db: Kysely<Database>, email: string): Promise<Outcome<Director>> {
  const login = normaliseEmail(email);
  return db.transaction().execute(async (trx) => {
    const found = await findDirector(trx, login);
    if (!found) return { ok: false, reason: `no director with email "${login}"` };
    await trx.deleteFrom('directors').where('id', '=', found.id).execute();
    return { ok: true, value: found };
  });
}

/**
 * Sets a director's password (a forgotten one, or one that may have leaked) and ends
 * every session they have, so that whoever held the old password is signed out.
 */
export async function setDirectorPassword(db: Kysely<Database>, email: string, password: string, params: ScryptParams = DEFAULT_SCRYPT): Promise<Outcome<Director>> {
  const login = normaliseEmail(email);
  const badPassword = checkPassword(password);
  if (badPassword) return { ok: false, reason: badPassword };
  const password_hash = await hashPassword(password, params);
  return db.transaction().execute(async (trx) => {
    const found = await findDirector(trx, login);
    if (!found) return { ok: false, reason: `no director with email "${login}"` };
    await trx.updateTable('directors').set({ password_hash }).where('id', '=', found.id).execute();
    await trx.deleteFrom('cabinet_sessions').where('director_id', '=', found.id).execute();
    return { ok: true, value: found };
  });
}

/** Why a password change was refused: the current password given is not (or no longer) the director's. */
export const WRONG_CURRENT_PASSWORD = 'the current password is not right';
/** Why a password change was refused: the session that asked ended while it was made (a sign-out, a reset). */
export const SESSION_ENDED = 'the session that asked has ended';

/**
 * A director changes their own password, from the session `sessionId`: the current one is
 * required, and every session of theirs ends. `then` runs in the same transaction (the
 * cabinet starts the browser's new session there), so the password and the sessions change
 * together or not at all. Both are checked again in that transaction, after the new password
 * is hashed: an operator's reset, the director's removal or a sign-out meanwhile wins.
 */
export async function changeOwnPassword<T>(
  db: Kysely<Database>,
  input: { email: string; current: string; next: string; sessionId: string },
  then: Step<T>,
  params: ScryptParams = DEFAULT_SCRYPT,
): Promise<Outcome<T>> {
  const found = await verified(db, input.email, input.current);
  if (!found) return { ok: false, reason: WRONG_CURRENT_PASSWORD };
  const badPassword = checkPassword(input.next);
  if (badPassword) return { ok: false, reason: badPassword };
  const password_hash = await hashPassword(input.next, params);
  const id = found.director.id;
  try {
    return await db.transaction().execute(async (trx): Promise<Outcome<T>> => {
      // One statement, so the sessions it ends are the ones a sign-out has not (it waits for their rows).
      const ended = await trx.deleteFrom('cabinet_sessions').where('director_id', '=', id).returning('id').execute();
      if (!ended.some((session) => session.id === input.sessionId)) throw new Refused(SESSION_ENDED);
      const changed = await trx.updateTable('directors').set({ password_hash }).where('id', '=', id).where('password_hash', '=', found.passwordHash).executeTakeFirst();
      if (Number(changed.numUpdatedRows) !== 1) throw new Refused(WRONG_CURRENT_PASSWORD);
      return { ok: true, value: await then(trx) };
    });
  } catch (error) {
    if (error instanceof Refused) return { ok: false, reason: error.reason };
    throw error;
  }
}

/** A password change refused inside its transaction: thrown to roll back what it had written. */
class Refused extends Error {
  readonly reason: string;

  constructor(reason: string) {
    super(reason);
    this.reason = reason;
  }
}
