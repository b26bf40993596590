/**
 * API key values: `service_pk_` + 32 lowercase hex characters (128 random bits).
 * Only the SHA-256 of the whole value is stored or looked up; the value itself is
 * shown once at creation and never logged.
 */
import { hash, randomBytes } from 'node:crypto';

export const KEY_PREFIX = 'service_pk_';

/**
 * How long after its unused period ends a key is judged unused, by a request or a sweep: a use
 * reaches the database a few seconds late (the usage flush, at most 5 s apart; a Redis entry
 * claimed by an instance that died, 5 s more), and a key row on PostgreSQL is kept up to 5 s:
 * a key used within its period is not judged unused for want of that use. (A use still waiting
 * in Redis while every instance is down for longer can be missed by a sweep: docs/decisions.md.)
 */
export const UNUSED_GRACE_MS = 60_000;

/** The moment (epoch ms) at or before which a key last used (or, never used, created) is judged unused at `nowMs`: its period and the grace ago. */
export function unusedBeforeMs(nowMs: number, unusedDays: number): number {
  return nowMs - unusedDays * 86_400_000 - UNUSED_GRACE_MS;
}

const KEY_FORMAT = /^service_pk_[0-9a-f]{32}$/;
const BEARER = /^bearer +(\S+) *$/i;

export interface NewKeyValue {
  key: string;
  hash: string;
  hint: string;
}

/**
 * Whether `text` holds a key's prefix, as a key pasted where a name or an id was asked for
 * would: such text is refused there, as it would show the secret in lists, logs and audits.
 */
export function holdsKey(text: string): boolean {
  return text.toLowerCase().includes(KEY_PREFIX);
}

/** One-shot (no Hash object per call): every API request hashes its key. */
export function hashKey(key: string): string {
  return hash('sha256', key, 'hex');
}

export function keyHint(key: string): string {
  const hex = key.slice(KEY_PREFIX.length);
  return `${KEY_PREFIX}${hex.slice(0, 4)}...${hex.slice(-4)}`;
}

export function generateKey(): NewKeyValue {
  const key = KEY_PREFIX + randomBytes(16).toString('hex');
  return { key, hash: hashKey(key), hint: keyHint(key) };
}

/**
 * The key carried by an Authorization header, or null when the header is missing,
 * not a Bearer credential, or not shaped like a key (no database work for those).
 * The scheme name is case-insensitive; the key is compared exactly.
 */
export function bearerKey(header: string | string[] | undefined): string | null {
  if (typeof header !== 'string' || header.length > 200) return null;
  const match = BEARER.exec(header);
  const key = match?.[1];
  return key !== undefined && KEY_FORMAT.test(key) ? key : null;
}
