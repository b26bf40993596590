/**
 * The one indexed lookup every API request makes: a key's hash to the key's state and
 * options and its school's plan, time zone, currency and data version. Nothing here outlives a turn of the
 * event loop, so a key revoked or a plan changed is seen by the next turn's requests on
 * every instance. On SQLite a lookup reads the process's own file, and a key asked for
 * again in the same turn is the row already read in that turn's snapshot. On PostgreSQL
 * the lookups of one turn go out together as one statement (`key_hash = any($1)`) and
 * each request gets its own row back (docs/performance.md, "Where the time goes").
 */
import { sql, type Kysely } from 'kysely';
import { prepared, type Reader } from '../db/index.js';
import { SqliteReader } from '../db/reader.js';
import type { Database } from '../db/schema.js';

export interface KeyRow {
  keyHash: string;
  keyId: string;
  revokedAt: string | null;
  /** The key's options (docs/api/keys.md): stored text, null when unlimited. */
  scopes: string | null;
  expiresAt: string | null;
  retiresAt: string | null;
  allow: string | null;
  createdAt: string;
  lastUsedAt: string | null;
  schoolId: string;
  plan: string;
  timezone: string;
  currency: string;
  dataVersion: number;
}

const COLUMNS = [
  'api_keys.key_hash as keyHash', 'api_keys.id as keyId', 'api_keys.revoked_at as revokedAt',
  'api_keys.scopes', 'api_keys.expires_at as expiresAt', 'api_keys.retires_at as retiresAt', 'api_keys.allow',
  'api_keys.created_at as createdAt', 'api_keys.last_used_at as lastUsedAt',
  'schools.id as schoolId', 'schools.plan', 'schools.timezone', 'schools.currency', 'schools.data_version as dataVersion',
] as const;

const keysWithSchools = (db: Kysely<Database>) => db.selectFrom('api_keys').innerJoin('schools', 'schools.id', 'api_keys.school_id').select(COLUMNS);

const findOne = prepared((db, p: { hash: string }) => keysWithSchools(db).where('api_keys.key_hash', '=', p.hash));

const findMany = prepared((db, p: { hashes: string[] }) => keysWithSchools(db).where('api_keys.key_hash', '=', sql<string>`any(${p.hashes})`));

/** Lookups per statement at most; more waiting go out in further statements at once. */
const MAX_BATCH = 500;

interface Waiting {
  resolve(row: KeyRow | undefined): void;
  reject(err: unknown): void;
}

export class KeyFinder {
  private waiting = new Map<string, Waiting[]>();
  private scheduled = false;

  constructor(private readonly reads: Reader) {}

  /** On SQLite: the rows read in the open snapshot, by hash (misses included). */
  private readonly inSnapshot = { snapshot: 0, rows: new Map<string, KeyRow | undefined>() };

  /** The key with this hash and its school: at once on SQLite, with a promise on PostgreSQL. */
  find(hash: string): KeyRow | undefined | Promise<KeyRow | undefined> {
    if (this.reads instanceof SqliteReader) return this.findInSnapshot(this.reads, hash);
    return new Promise((resolve, reject) => {
      const same = this.waiting.get(hash);
      if (same) same.push({ resolve, reject });
      else this.waiting.set(hash, [{ resolve, reject }]);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  private findInSnapshot(reads: SqliteReader, hash: string): KeyRow | undefined {
    const kept = this.inSnapshot;
    if (kept.snapshot !== 0 && kept.snapshot === reads.snapshot && kept.rows.has(hash)) return kept.rows.get(hash);
    // Reading opens the turn's snapshot if none is open.
    const row = (findOne(reads, { hash }) as KeyRow[])[0];
    if (kept.snapshot !== reads.snapshot) {
      kept.snapshot = reads.snapshot;
      kept.rows.clear();
    }
    kept.rows.set(hash, row);
    return row;
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    const all = this.waiting;
    this.waiting = new Map();
    const hashes = [...all.keys()];
    for (let i = 0; i < hashes.length; i += MAX_BATCH) void this.lookUp(all, hashes.slice(i, i + MAX_BATCH));
  };

  private async lookUp(all: Map<string, Waiting[]>, hashes: string[]): Promise<void> {
    let rows: KeyRow[];
    try {
      rows = await findMany(this.reads, { hashes });
    } catch (err) {
      for (const hash of hashes) for (const w of all.get(hash)!) w.reject(err);
      return;
    }
    const byHash = new Map(rows.map((row) => [row.keyHash, row]));
    for (const hash of hashes) {
      const row = byHash.get(hash);
      for (const w of all.get(hash)!) w.resolve(row);
    }
  }
}
