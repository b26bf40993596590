/**
 * API key administration shared by the operator CLI and the director's cabinet: creating
 * (with options), listing, rolling, revoking, changing the allowlist, the sweep that marks
 * expired, rolled and unused keys revoked, and the audit of key events.
 * The key value exists only in the result of createKey and rollKey; the database keeps its hash.
 *
 * Every change here takes effect on the next API request on every instance, because each
 * request reads the key's row (src/access/lookup.ts). The sweep only records what the
 * request path already refuses (expiry, the end of a roll's overlap, disuse), with its
 * audit event written once whichever instance sweeps first.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { generateKey, holdsKey, UNUSED_GRACE_MS, unusedBeforeMs } from '../access/keys.js';
import { announceKeyChanges, onPostgres, type Step } from '../db/index.js';
import type { Database } from '../db/schema.js';
import { parseAllowlist } from '../domain/addresses.js';
import { API_PLANS, type Plan } from '../domain/enums.js';
import { parseScopes, storedScopes, type KeyScope, KEY_SCOPES } from '../domain/scopes.js';
import { OVERLAPS, type Overlap } from '../domain/overlaps.js';
import { isOneLine } from '../domain/text.js';
import { formatTimestamp, parseDateTime, YEAR_10000_MS } from '../domain/time.js';
import type { Outcome } from './schools.js';

export const MAX_ACTIVE_KEYS = 10;
const DAY_MS = 86_400_000;

/** Who made a change: a director's email, or `operator` (the CLI, and the automatic revocations). */
export type Actor = string;
export const OPERATOR: Actor = 'operator';

export const KEY_EVENTS = ['created', 'rolled', 'revoked', 'expired', 'revoked_unused', 'options_changed'] as const;
export type KeyEvent = (typeof KEY_EVENTS)[number];

/** Why a key's revoked_at is set. */
export type RevokeReason = 'revoked' | 'rolled' | 'expired' | 'unused';

/** A key change's first step when its caller gives none (the CLI; the cabinet's checks the asking session, and claims a create or roll form's one-time token). */
const noStep: Step = async () => {};

/** How keys age: SCHOOL_DATA_KEY_UNUSED_DAYS (0: never revoked for disuse). */
export interface KeyPolicy {
  unusedDays: number;
  /**
   * Whether this caller marks keys revoked as unused (default true). Only a server, whose
   * setting is the one its request path refuses by, does: the command line shows the dates
   * by its shell's setting, which may not be the servers', and marks only expiries and
   * overlaps' ends (a mark cannot be undone).
   */
  marksUnused?: boolean;
}

/** `query` with its rows locked FOR UPDATE on PostgreSQL (SQLite's writers already run one at a time). */
const lockedOnPostgres = <Q extends { forUpdate(): Q }>(trx: Transaction<Database>, query: Q): Q => (onPostgres(trx) ? query.forUpdate() : query);

/** The days after which a sweep by this policy marks a key unused (0: it marks none). */
const markedUnusedDays = (policy: KeyPolicy): number => (policy.marksUnused === false ? 0 : policy.unusedDays);

export interface KeyOptions {
  /** null or left out: every scope. */
  scopes?: KeyScope[] | null;
  /** Stored form (UTC whole seconds), in the future; null or left out: never. */
  expiresAt?: string | null;
  /** Addresses and CIDR ranges (parseAllowlist's entries); null or left out: any address. */
  allow?: string[] | null;
}

export interface CreatedKey {
  id: string;
  /** The secret value, shown once. */
  key: string;
  name: string;
  hint: string;
  created_at: string;
  scopes: KeyScope[];
  expires_at: string | null;
  allow: string[] | null;
  rolled_from: string | null;
}

export type KeyStatus = 'active' | 'expired' | 'revoked';

export interface KeyCard {
  id: string;
  name: string;
  hint: string;
  created_at: string;
  last_used_at: string | null;
  request_count: number;
  revoked_at: string | null;
  /** active; expired (expires_at passed); revoked (by hand, rolled, or unused: see revoke_reason). */
  status: KeyStatus;
  revoke_reason: RevokeReason | null;
  scopes: KeyScope[];
  expires_at: string | null;
  allow: string[] | null;
  rolled_from: string | null;
  /** A rolled key's end of overlap: it is refused from then on. */
  retires_at: string | null;
  /** When the key will be revoked as unused if it is not used before (null: it will not be, or it expires or retires by then). */
  unused_revoke_at: string | null;
}

export interface KeyEventEntry {
  at: string;
  key_id: string;
  key_name: string | null;
  key_hint: string | null;
  event: KeyEvent;
  actor: Actor;
  detail: Record<string, unknown> | null;
}

const CARD_COLUMNS = [
  'id', 'name', 'hint', 'created_at', 'last_used_at', 'request_count', 'revoked_at',
  'revoke_reason', 'scopes', 'expires_at', 'allow', 'rolled_from', 'retires_at',
] as const;

type CardRow = {
  id: string; name: string; hint: string; created_at: string; last_used_at: string | null; request_count: number;
  revoked_at: string | null; revoke_reason: string | null; scopes: string | null; expires_at: string | null;
  allow: string | null; rolled_from: string | null; retires_at: string | null;
};

function addDays(timestamp: string, days: number): string {
  return formatTimestamp(Date.parse(timestamp) + days * DAY_MS);
}

/** When a key whose unused period ends at `unusedAt` is judged unused: UNUSED_GRACE_MS later. */
const judgedUnusedAt = (unusedAt: string) => formatTimestamp(Date.parse(unusedAt) + UNUSED_GRACE_MS);

function cardOf(row: CardRow, policy: KeyPolicy, now: string): KeyCard {
  const expired = row.expires_at !== null && row.expires_at <= now;
  const revoked = row.revoked_at !== null || (row.retires_at !== null && row.retires_at <= now);
  const status: KeyStatus = expired && (row.revoked_at === null || row.revoke_reason === 'expired') ? 'expired' : revoked ? 'revoked' : 'active';
  const unusedAt = policy.unusedDays > 0 ? addDays(row.last_used_at ?? row.created_at, policy.unusedDays) : null;
  let reason = row.revoke_reason as RevokeReason | null;
  const judgedAt = unusedAt === null ? null : judgedUnusedAt(unusedAt);
  if (status === 'active' && judgedAt !== null && judgedAt <= now) return cardOf({ ...row, revoked_at: unusedAt, revoke_reason: 'unused' }, policy, now);
  if (reason === null && status === 'revoked') reason = 'rolled';
  if (reason === null && status === 'expired') reason = 'expired';
  // A key that expires or retires before it is judged unused is never revoked as unused.
  const endsFirst = judgedAt !== null && [row.expires_at, row.retires_at].some((end) => end !== null && end <= judgedAt);
  return {
    id: row.id,
    name: row.name,
    hint: row.hint,
    created_at: row.created_at,
    last_used_at: row.last_used_at,
    request_count: Number(row.request_count),
    revoked_at: row.revoked_at ?? (status === 'expired' ? row.expires_at : status === 'revoked' ? row.retires_at : null),
    status,
    revoke_reason: reason,
    scopes: row.scopes === null ? [...KEY_SCOPES] : (row.scopes.split(',') as KeyScope[]),
    expires_at: row.expires_at,
    allow: row.allow === null ? null : row.allow.split(','),
    rolled_from: row.rolled_from,
    retires_at: row.retires_at,
    unused_revoke_at: status === 'active' && !endsFirst ? unusedAt : null,
  };
}

/**
 * The options as a director or an operator types them (`students,lessons`, an RFC 3339
 * date-time, `203.0.113.7, 10.0.0.0/8`), checked; each left out or empty means "no limit".
 */
export function parseKeyOptions(raw: { scopes?: string | undefined; expires?: string | undefined; allow?: string | undefined }, nowMs = Date.now()): Outcome<KeyOptions> {
  const options: KeyOptions = {};
  if (raw.scopes !== undefined && raw.scopes.trim() !== '') {
    const scopes = parseScopes(raw.scopes);
    if (!scopes.ok) return { ok: false, reason: scopes.reason };
    options.scopes = scopes.scopes;
  }
  if (raw.expires !== undefined && raw.expires.trim() !== '') {
    const ms = parseDateTime(raw.expires.trim());
    if (ms === null) return { ok: false, reason: `expires must be an RFC 3339 date-time with an offset, such as 2027-01-31T18:00:00Z (got "${raw.expires.slice(0, 60)}")` };
    // Whole seconds, rounded up: a key never ends before the moment asked for.
    const at = Math.ceil(ms / 1000) * 1000;
    if (at <= nowMs) return { ok: false, reason: 'expires must be in the future' };
    if (at >= YEAR_10000_MS) return { ok: false, reason: 'expires must be before the year 10000' };
    options.expiresAt = formatTimestamp(at);
  }
  if (raw.allow !== undefined && raw.allow.trim() !== '') {
    const allow = parseAllowlist(raw.allow);
    if (!allow.ok) return { ok: false, reason: allow.reason };
    options.allow = allow.entries;
  }
  return { ok: true, value: options };
}

async function recordEvent(
  trx: Kysely<Database> | Transaction<Database>,
  event: { schoolId: string; keyId: string; event: KeyEvent; actor: Actor; at: string; detail?: Record<string, unknown> },
): Promise<void> {
  await trx
    .insertInto('key_events')
    .values({ school_id: event.schoolId, key_id: event.keyId, event: event.event, actor: event.actor, at: event.at, detail: event.detail === undefined ? null : JSON.stringify(event.detail) })
    .execute();
}

/** The longest key name, in characters. */
export const KEY_NAME_MAX = 100;

/** A key name's length in characters (code points, not UTF-16 units: an emoji is one). */
export function keyNameLength(name: string): number {
  return [...name].length;
}

function checkName(rawName: string): Outcome<string> {
  const name = rawName.trim();
  const length = keyNameLength(name);
  if (length < 1 || length > KEY_NAME_MAX) return { ok: false, reason: `key name must be 1-${KEY_NAME_MAX} characters` };
  if (!isOneLine(name)) return { ok: false, reason: 'key name must not contain control characters' };
  if (holdsKey(name)) return { ok: false, reason: "key name must not hold an API key: names are shown in lists and in the audit" };
  return { ok: true, value: name };
}

/**
 * The school locked for a key change (on PostgreSQL the row is locked, so two concurrent
 * creates cannot both pass the limit, nor the plan change under them; SQLite runs one
 * write transaction at a time), with its count of active keys, or why no key can be made
 * for it. The lock does not stop the writes that only refer to the school, whose foreign
 * keys share the row's key (FOR NO KEY UPDATE, not FOR UPDATE); a running import locks the
 * row only with the data version's update just before its commit.
 */
async function placeForKey(trx: Transaction<Database>, schoolId: string, now: string, policy: KeyPolicy): Promise<Outcome<null>> {
  let schoolQuery = trx.selectFrom('schools').select(['id', 'plan']).where('id', '=', schoolId);
  if (onPostgres(trx)) schoolQuery = schoolQuery.forNoKeyUpdate();
  const school = await schoolQuery.executeTakeFirst();
  if (!school) return { ok: false, reason: `no school with id "${schoolId}"` };
  if (!API_PLANS.includes(school.plan as Plan)) {
    return { ok: false, reason: `the school's plan ${school.plan} has no API access; keys are issued on the Profi and VIP plans only` };
  }
  // Keys that ended (expired, overlap over, unused) free their places first.
  await sweepIn(trx, now, policy, schoolId);
  const { active } = await trx
    .selectFrom('api_keys')
    .select((eb) => eb.fn.countAll<number>().as('active'))
    .where('school_id', '=', schoolId)
    .where('revoked_at', 'is', null)
    .executeTakeFirstOrThrow();
  if (Number(active) >= MAX_ACTIVE_KEYS) {
    return { ok: false, reason: `the school already has ${MAX_ACTIVE_KEYS} active keys; revoke an unused key first${await unmarkedUnused(trx, now, policy, schoolId)}` };
  }
  return { ok: true, value: null };
}

/**
 * For a refusal by a caller that marks no key unused (the command line): the active keys its
 * policy judges unused, which its key list shows revoked, named with what ends them.
 */
async function unmarkedUnused(trx: Transaction<Database>, now: string, policy: KeyPolicy, schoolId: string): Promise<string> {
  if (markedUnusedDays(policy) > 0 || policy.unusedDays === 0) return '';
  const unused = await endedKeys(trx, now, policy.unusedDays, schoolId).execute();
  if (unused.length === 0) return '';
  const ids = unused.map((key) => key.id).join(', ');
  return ` (${ids}: not used for ${policy.unusedDays} days, shown revoked by the key list; a server with the same SCHOOL_DATA_KEY_UNUSED_DAYS revokes ${unused.length === 1 ? 'it' : 'them'} within a minute)`;
}

/** Whether a key can be made for the school now, by the rules of placeForKey, without making one. */
export function keyRoom(db: Kysely<Database>, schoolId: string, policy: KeyPolicy = { unusedDays: 0 }): Promise<Outcome<null>> {
  return db.transaction().execute((trx) => placeForKey(trx, schoolId, formatTimestamp(Date.now()), policy));
}

async function insertKey(trx: Transaction<Database>, schoolId: string, name: string, options: KeyOptions, now: string, rolledFrom: string | null): Promise<CreatedKey> {
  const value = generateKey();
  const scopes = storedScopes(options.scopes ?? null);
  const created: CreatedKey = {
    id: `key_${randomBytes(8).toString('hex')}`,
    key: value.key,
    name,
    hint: value.hint,
    created_at: now,
    scopes: scopes === null ? [...KEY_SCOPES] : (scopes.split(',') as KeyScope[]),
    expires_at: options.expiresAt ?? null,
    allow: options.allow ?? null,
    rolled_from: rolledFrom,
  };
  await trx
    .insertInto('api_keys')
    .values({
      id: created.id, school_id: schoolId, name, key_hash: value.hash, hint: value.hint, created_at: now,
      scopes, expires_at: created.expires_at, allow: created.allow === null ? null : created.allow.join(','), rolled_from: rolledFrom,
    })
    .execute();
  return created;
}

function optionsDetail(created: CreatedKey): Record<string, unknown> {
  return { scopes: created.scopes, expires_at: created.expires_at, allow: created.allow, ...(created.rolled_from === null ? {} : { rolled_from: created.rolled_from }) };
}

/** Creates a key (its value shown once) if the school has a free place; `first` runs first in its transaction. */
export async function createKey(
  db: Kysely<Database>,
  schoolId: string,
  rawName: string,
  options: KeyOptions = {},
  actor: Actor = OPERATOR,
  policy: KeyPolicy = { unusedDays: 0 },
  first: Step = noStep,
): Promise<Outcome<CreatedKey>> {
  const name = checkName(rawName);
  if (!name.ok) return name;
  const now = formatTimestamp(Date.now());
  if (options.expiresAt != null && options.expiresAt <= now) return { ok: false, reason: 'expires must be in the future' };
  return db.transaction().execute(async (trx): Promise<Outcome<CreatedKey>> => {
    await first(trx);
    const place = await placeForKey(trx, schoolId, now, policy);
    if (!place.ok) return place;
    const created = await insertKey(trx, schoolId, name.value, options, now, null);
    await recordEvent(trx, { schoolId, keyId: created.id, event: 'created', actor, at: now, detail: optionsDetail(created) });
    return { ok: true, value: created };
  });
}

function cardsQuery(db: Kysely<Database>) {
  return db.selectFrom('api_keys').select(CARD_COLUMNS);
}

/** Keys of a school, active first, then newest first; ended keys are marked revoked first (the sweep). */
export async function listKeys(db: Kysely<Database>, schoolId: string, policy: KeyPolicy = { unusedDays: 0 }): Promise<KeyCard[]> {
  const now = formatTimestamp(Date.now());
  await sweepKeys(db, policy, schoolId);
  const rows = await cardsQuery(db)
    .where('school_id', '=', schoolId)
    .orderBy((eb) => eb.case().when('revoked_at', 'is', null).then(0).else(1).end())
    .orderBy('created_at', 'desc')
    .orderBy('id')
    .execute();
  return rows.map((row) => cardOf(row, policy, now));
}

/** One key's card; with `schoolId`, only that school's key (the cabinet's case). */
export async function findKey(db: Kysely<Database>, keyId: string, policy: KeyPolicy = { unusedDays: 0 }, schoolId?: string): Promise<(KeyCard & { school_id: string }) | undefined> {
  let query = db.selectFrom('api_keys').select([...CARD_COLUMNS, 'school_id']).where('id', '=', keyId);
  if (schoolId !== undefined) query = query.where('school_id', '=', schoolId);
  const row = await query.executeTakeFirst();
  if (!row) return undefined;
  return { ...cardOf(row, policy, formatTimestamp(Date.now())), school_id: row.school_id };
}

async function loadCard(db: Kysely<Database>, keyId: string, policy: KeyPolicy): Promise<KeyCard> {
  const row = await cardsQuery(db).where('id', '=', keyId).executeTakeFirstOrThrow();
  return cardOf(row, policy, formatTimestamp(Date.now()));
}

/**
 * Revokes a key. Immediate: every API request that starts after this returns is
 * refused, on every server (a PostgreSQL server that kept the key has dropped it:
 * src/db/watch.ts).
 * With `schoolId`, only that school's key can be revoked (the cabinet's case); `first` runs
 * first in its transaction.
 */
export async function revokeKey(
  db: Kysely<Database>,
  keyId: string,
  schoolId?: string,
  actor: Actor = OPERATOR,
  policy: KeyPolicy = { unusedDays: 0 },
  first: Step = noStep,
): Promise<Outcome<KeyCard>> {
  const now = formatTimestamp(Date.now());
  await db.transaction().execute(async (trx) => {
    await first(trx);
    // A key that has already ended (expired, overlap over, unused) keeps that reason and event.
    if ((await sweepKeyIn(trx, keyId, now, policy, schoolId)) === undefined) return;
    let update = trx.updateTable('api_keys').set({ revoked_at: now, revoke_reason: 'revoked' }).where('id', '=', keyId).where('revoked_at', 'is', null);
    if (schoolId !== undefined) update = update.where('school_id', '=', schoolId);
    const result = await update.returning('school_id').executeTakeFirst();
    if (result) await recordEvent(trx, { schoolId: result.school_id, keyId, event: 'revoked', actor, at: now, detail: { reason: 'revoked' } });
  });
  await announceKeyChanges(db);
  if (!(await findKey(db, keyId, policy, schoolId))) return { ok: false, reason: `no key with id "${keyId}"` };
  return { ok: true, value: await loadCard(db, keyId, policy) };
}

export interface RolledKey {
  created: CreatedKey;
  old: KeyCard;
}

const ENDED: Record<RevokeReason, string> = { revoked: 'is revoked', rolled: 'was rolled', expired: 'has expired', unused: 'was revoked as unused' };
/** How a key that ended did, by its stored reason, in a sentence about it. */
const ended = (reason: string | null): string => ENDED[(reason ?? 'revoked') as RevokeReason];

/**
 * Rolls a key: a new key with the old one's name, scopes and allowlist (shown once), and
 * the old one revoked after `overlap`. The new key needs a free place among the 10 active
 * keys. With `schoolId`, only that school's key (the cabinet's case); `first` runs first in
 * its transaction.
 */
export async function rollKey(
  db: Kysely<Database>,
  keyId: string,
  overlap: Overlap,
  actor: Actor = OPERATOR,
  policy: KeyPolicy = { unusedDays: 0 },
  schoolId?: string,
  first: Step = noStep,
): Promise<Outcome<RolledKey>> {
  const nowMs = Date.now();
  const now = formatTimestamp(nowMs);
  const outcome = await db.transaction().execute(async (trx): Promise<Outcome<CreatedKey>> => {
    await first(trx);
    let query = trx.selectFrom('api_keys').select([...CARD_COLUMNS, 'school_id']).where('id', '=', keyId);
    if (schoolId !== undefined) query = query.where('school_id', '=', schoolId);
    const before = await query.executeTakeFirst();
    if (!before) return { ok: false, reason: `no key with id "${keyId}"` };
    const place = await placeForKey(trx, before.school_id, now, policy);
    // Read again under the school's lock: the sweep may just have ended it. On PostgreSQL the
    // row is locked too, so a revoke or an allowlist change under way (they take no school
    // lock) is waited for and read, never written over.
    const old = await lockedOnPostgres(trx, trx.selectFrom('api_keys').select(CARD_COLUMNS).where('id', '=', keyId)).executeTakeFirstOrThrow();
    if (old.revoked_at !== null) return { ok: false, reason: `key "${keyId}" ${ended(old.revoke_reason)}; only an active key can be rolled` };
    if (old.retires_at !== null) return { ok: false, reason: `key "${keyId}" was already rolled; it ends at ${old.retires_at}` };
    if (!place.ok) return place;
    const options: KeyOptions = {
      scopes: old.scopes === null ? null : (old.scopes.split(',') as KeyScope[]),
      allow: old.allow === null ? null : old.allow.split(','),
    };
    const created = await insertKey(trx, before.school_id, old.name, options, now, keyId);
    const retiresAt = formatTimestamp(nowMs + OVERLAPS[overlap]);
    if (overlap === 'now') await trx.updateTable('api_keys').set({ revoked_at: now, revoke_reason: 'rolled', retires_at: now }).where('id', '=', keyId).execute();
    else await trx.updateTable('api_keys').set({ retires_at: retiresAt }).where('id', '=', keyId).execute();
    await recordEvent(trx, { schoolId: before.school_id, keyId, event: 'rolled', actor, at: now, detail: { new_key_id: created.id, overlap, ends_at: retiresAt } });
    await recordEvent(trx, { schoolId: before.school_id, keyId: created.id, event: 'created', actor, at: now, detail: optionsDetail(created) });
    if (overlap === 'now') await recordEvent(trx, { schoolId: before.school_id, keyId, event: 'revoked', actor, at: now, detail: { reason: 'rolled' } });
    return { ok: true, value: created };
  });
  if (!outcome.ok) return outcome;
  await announceKeyChanges(db);
  return { ok: true, value: { created: outcome.value, old: await loadCard(db, keyId, policy) } };
}

/** Replaces a key's allowlist (null: any address). Takes effect on the next request. `first` runs first in its transaction. */
export async function setAllowlist(
  db: Kysely<Database>,
  keyId: string,
  allow: string[] | null,
  actor: Actor = OPERATOR,
  policy: KeyPolicy = { unusedDays: 0 },
  schoolId?: string,
  first: Step = noStep,
): Promise<Outcome<KeyCard>> {
  const now = formatTimestamp(Date.now());
  const stored = allow === null || allow.length === 0 ? null : allow.join(',');
  const outcome = await db.transaction().execute(async (trx): Promise<Outcome<null>> => {
    await first(trx);
    // A key that has ended but is not yet marked so (expired, overlap over, unused) is marked first.
    if ((await sweepKeyIn(trx, keyId, now, policy, schoolId)) === undefined) return { ok: false, reason: `no key with id "${keyId}"` };
    // Locked on PostgreSQL: a roll under way copies the allowlist before or after this change, whole.
    const before = await lockedOnPostgres(trx, trx.selectFrom('api_keys').select(['school_id', 'allow', 'revoked_at', 'revoke_reason']).where('id', '=', keyId)).executeTakeFirstOrThrow();
    if (before.revoked_at !== null) {
      return { ok: false, reason: `key "${keyId}" ${ended(before.revoke_reason)}; its options can no longer change` };
    }
    if (before.allow === stored) return { ok: true, value: null };
    await trx.updateTable('api_keys').set({ allow: stored }).where('id', '=', keyId).execute();
    await recordEvent(trx, {
      schoolId: before.school_id, keyId, event: 'options_changed', actor, at: now,
      detail: { allow: { from: before.allow === null ? null : before.allow.split(','), to: stored === null ? null : stored.split(',') } },
    });
    return { ok: true, value: null };
  });
  if (!outcome.ok) return outcome;
  await announceKeyChanges(db);
  return { ok: true, value: await loadCard(db, keyId, policy) };
}

/** The active keys (of `schoolId`, when given) whose expiry, rolled end or unused period (`unusedDays`, 0: none) has passed at `now`. */
function endedKeys(db: Kysely<Database> | Transaction<Database>, now: string, unusedDays: number, schoolId?: string) {
  // The grace: a use may reach the database seconds late, and a key used in time is never marked unused.
  const unusedBefore = unusedDays > 0 ? formatTimestamp(unusedBeforeMs(Date.parse(now), unusedDays)) : null;
  let query = db
    .selectFrom('api_keys')
    .select(['id', 'school_id', 'created_at', 'last_used_at', 'expires_at', 'retires_at'])
    .where('revoked_at', 'is', null)
    .where((eb) => {
      const ended = [eb('expires_at', '<=', now), eb('retires_at', '<=', now)];
      if (unusedBefore !== null) {
        ended.push(eb.and([eb('last_used_at', 'is not', null), eb('last_used_at', '<=', unusedBefore)]));
        ended.push(eb.and([eb('last_used_at', 'is', null), eb('created_at', '<=', unusedBefore)]));
      }
      return eb.or(ended);
    });
  if (schoolId !== undefined) query = query.where('school_id', '=', schoolId);
  return query;
}

/** How many keys of each school have ended at `now` but are not marked so yet (read only: nothing is marked). */
export async function endedKeyCounts(db: Kysely<Database>, policy: KeyPolicy): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const key of await endedKeys(db, formatTimestamp(Date.now()), policy.unusedDays).execute()) counts.set(key.school_id, (counts.get(key.school_id) ?? 0) + 1);
  return counts;
}

async function sweepIn(trx: Kysely<Database> | Transaction<Database>, now: string, policy: KeyPolicy, schoolId?: string): Promise<number> {
  const ended = await endedKeys(trx, now, markedUnusedDays(policy), schoolId).execute();
  let count = 0;
  for (const key of ended) {
    // The earliest end that has passed decides the reason and the moment: disuse counts from
    // when it is judged (its grace later), and is dated at the period's end.
    const ends: [string, string, RevokeReason, KeyEvent][] = [];
    if (key.expires_at !== null && key.expires_at <= now) ends.push([key.expires_at, key.expires_at, 'expired', 'expired']);
    if (key.retires_at !== null && key.retires_at <= now) ends.push([key.retires_at, key.retires_at, 'rolled', 'revoked']);
    if (markedUnusedDays(policy) > 0) {
      const at = addDays(key.last_used_at ?? key.created_at, policy.unusedDays);
      const judged = judgedUnusedAt(at);
      if (judged <= now) ends.push([judged, at, 'unused', 'revoked_unused']);
    }
    ends.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    const [, at, reason, event] = ends[0]!;
    // Only the sweep that marks the key records its event, whichever instance runs it.
    const marked = await trx.updateTable('api_keys').set({ revoked_at: at, revoke_reason: reason }).where('id', '=', key.id).where('revoked_at', 'is', null).executeTakeFirst();
    if (Number(marked.numUpdatedRows) !== 1) continue;
    await recordEvent(trx, { schoolId: key.school_id, keyId: key.id, event, actor: OPERATOR, at: now, detail: { reason, since: at } });
    count += 1;
  }
  return count;
}

/** Sweeps the school of one key (of `schoolId`'s only, when given); undefined when there is no such key. */
async function sweepKeyIn(trx: Transaction<Database>, keyId: string, now: string, policy: KeyPolicy, schoolId?: string): Promise<string | undefined> {
  let query = trx.selectFrom('api_keys').select('school_id').where('id', '=', keyId);
  if (schoolId !== undefined) query = query.where('school_id', '=', schoolId);
  const key = await query.executeTakeFirst();
  if (key) await sweepIn(trx, now, policy, key.school_id);
  return key?.school_id;
}

/**
 * Marks revoked every key the request path already refuses: expired, past a roll's overlap,
 * or unused for `policy.unusedDays` (from its last use, or its creation). Each gets its
 * revoke reason and one audit event. Returns how many were marked.
 */
export async function sweepKeys(db: Kysely<Database>, policy: KeyPolicy, schoolId?: string): Promise<number> {
  const now = formatTimestamp(Date.now());
  // Looked for first: a sweep with nothing to end takes no write lock, so the list of keys
  // opens while an import holds SQLite's.
  if ((await endedKeys(db, now, markedUnusedDays(policy), schoolId).limit(1).executeTakeFirst()) === undefined) return 0;
  return db.transaction().execute((trx) => sweepIn(trx, now, policy, schoolId));
}

/** A school's key events, newest first (all, or the latest `limit`); with `keyId`, that key's only. */
export async function keyEvents(db: Kysely<Database>, schoolId: string, options: { keyId?: string; limit?: number } = {}): Promise<KeyEventEntry[]> {
  let query = db
    .selectFrom('key_events')
    .leftJoin('api_keys', 'api_keys.id', 'key_events.key_id')
    .select(['key_events.at', 'key_events.key_id', 'api_keys.name as key_name', 'api_keys.hint as key_hint', 'key_events.event', 'key_events.actor', 'key_events.detail'])
    .where('key_events.school_id', '=', schoolId)
    .orderBy('key_events.seq', 'desc');
  if (options.limit !== undefined) query = query.limit(options.limit);
  if (options.keyId !== undefined) query = query.where('key_events.key_id', '=', options.keyId);
  const rows = await query.execute();
  return rows.map((r) => ({ ...r, event: r.event as KeyEvent, detail: r.detail === null ? null : (JSON.parse(r.detail) as Record<string, unknown>) }));
}
