/**
 * A key's recent requests and its requests per day (docs/api/keys.md),
 * for the CLI's `key log` and the cabinet's key page.
 *
 * Stand-in: the activity store (recorded on the request path, flushed in batches) lands
 * separately and replaces this file with the same interface; until then both are empty.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';

export interface KeyRequestEntry {
  at: string;
  method: string;
  target: string;
  status: number;
  request_id: string;
  address: string;
  duration_ms: number;
}

export interface KeyDay {
  /** YYYY-MM-DD, UTC. */
  day: string;
  requests: number;
}

/** Newest first, at most 100; [] for an unknown key or another school's. */
export function keyRequests(_db: Kysely<Database>, _schoolId: string, _keyId: string): Promise<KeyRequestEntry[]> {
  return Promise.resolve([]);
}

/** One entry per UTC day for the last `days` days ending today (zeros included), oldest first. */
export function keyDays(_db: Kysely<Database>, _schoolId: string, _keyId: string, _days = 90): Promise<KeyDay[]> {
  return Promise.resolve([]);
}
