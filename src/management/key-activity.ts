/**
 * What a key has been doing: its last requests and its requests
 * per UTC day, as the usage flush writes them (src/access/usage.ts). Read by the CLI's
 * `key log` and the cabinet's key page; a key of another school reads as unknown.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { formatTimestamp } from '../domain/time.js';

export interface KeyRequestEntry {
  /** ISO timestamp of the request (UTC, as formatTimestamp gives). */
  at: string;
  method: string;
  /** Path and query as received. */
  target: string;
  status: number;
  request_id: string;
  /** Client address (request.ip, or the TCP peer when that is no address). */
  address: string;
  /** Response time, ms, rounded to 0.1. */
  duration_ms: number;
}

export interface KeyDay {
  /** YYYY-MM-DD, UTC. */
  day: string;
  requests: number;
}

const REQUESTS_SHOWN = 100;
const DAY_MS = 86_400_000;

async function ownKey(db: Kysely<Database>, schoolId: string, keyId: string): Promise<boolean> {
  const row = await db.selectFrom('api_keys').select('id').where('id', '=', keyId).where('school_id', '=', schoolId).executeTakeFirst();
  return row !== undefined;
}

/** The key's last requests, newest first, at most 100; [] for an unknown key or another school's. */
export async function keyRequests(db: Kysely<Database>, schoolId: string, keyId: string): Promise<KeyRequestEntry[]> {
  if (!(await ownKey(db, schoolId, keyId))) return [];
  const rows = await db
    .selectFrom('key_requests')
    .select(['at_ms', 'method', 'target', 'status', 'request_id', 'address', 'duration_ms'])
    .where('key_id', '=', keyId)
    .orderBy('at_ms', 'desc')
    .orderBy('request_id', 'desc')
    .limit(REQUESTS_SHOWN)
    .execute();
  return rows.map((r) => ({
    at: formatTimestamp(Number(r.at_ms)),
    method: r.method,
    target: r.target,
    status: Number(r.status),
    request_id: r.request_id,
    address: r.address,
    duration_ms: Math.round(Number(r.duration_ms) * 10) / 10,
  }));
}

/** One entry per UTC day for the last `days` days ending today (zeros included), oldest first. */
export async function keyDays(db: Kysely<Database>, schoolId: string, keyId: string, days = 90): Promise<KeyDay[]> {
  const count = Math.max(1, Math.floor(days));
  const today = Date.now() - (Date.now() % DAY_MS);
  const out: KeyDay[] = [];
  for (let i = count - 1; i >= 0; i--) out.push({ day: new Date(today - i * DAY_MS).toISOString().slice(0, 10), requests: 0 });
  if (!(await ownKey(db, schoolId, keyId))) return out;
  const rows = await db.selectFrom('key_days').select(['day', 'requests']).where('key_id', '=', keyId).where('day', '>=', out[0]!.day).execute();
  const byDay = new Map(rows.map((r) => [r.day, Number(r.requests)]));
  for (const entry of out) entry.requests = byDay.get(entry.day) ?? 0;
  return out;
}
