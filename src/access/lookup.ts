/**
 * The one indexed lookup every API request makes: a key's hash to the key's state and options
 * and its school's plan, time zone, currency and data version and stamp. A key revoked or a
 * plan changed is seen by the next request on every instance:
 * - SQLite: a key found is kept while the file's data version is unchanged (no connection of
 *   any process has committed since it was read), checked once per turn; a hash that is no
 *   key is kept for the turn only;
 * - PostgreSQL: a key found is kept while the store's key watch trusts what it keeps and its
 *   generation is the one the key was read in (src/db/watch.ts), for KEPT_MS at most; without
 *   the watch nothing outlives the turn. A turn's lookups are one statement (`key_hash =
 *   any($1)`), each request getting its own row (docs/performance.md, "Where the time goes").
 */
import { sql } from 'kysely';
import { prepared, type KeyWatch, type Reader } from '../db/index.js';
import { SqliteReader } from '../db/reader.js';

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
  dataStamp: string;
}

const KEY_COLUMNS = [
  'api_keys.key_hash as keyHash', 'api_keys.id as keyId', 'api_keys.revoked_at as revokedAt',
  'api_keys.scopes', 'api_keys.expires_at as expiresAt', 'api_keys.retires_at as retiresAt', 'api_keys.allow',
  'api_keys.created_at as createdAt', 'api_keys.last_used_at as lastUsedAt',
] as const;

/**
 * On SQLite the school's columns are read by scalar subqueries, each a primary-key seek:
 * the join, though planned as the same seeks, costs many times more there, on a miss as
 * on a hit (docs/performance.md, "One request path"), and a flood of unknown keys is all
 * misses. A key whose school is gone (no plan) is no key, as with the join.
 */
const findOneRow = prepared((db, p: { hash: string }) =>
  db
    .selectFrom('api_keys')
    .select(KEY_COLUMNS)
    .select((eb) => {
      const school = () => eb.selectFrom('schools').whereRef('schools.id', '=', 'api_keys.school_id');
      return [
        'api_keys.school_id as schoolId',
        school().select('schools.plan').as('plan'),
        school().select('schools.timezone').as('timezone'),
        school().select('schools.currency').as('currency'),
        school().select('schools.data_version').as('dataVersion'),
        school().select('schools.data_stamp').as('dataStamp'),
      ];
    })
    .where('api_keys.key_hash', '=', p.hash),
);

function findOne(reads: SqliteReader, hash: string): KeyRow | undefined {
  const row = (findOneRow(reads, { hash }) as (Omit<KeyRow, 'plan'> & { plan: string | null })[])[0];
  return row === undefined || row.plan === null ? undefined : (row as KeyRow);
}

/**
 * On PostgreSQL each key's school is a lateral subquery, one primary-key seek per key: as a
 * plain join, the generic plan of the prepared statement merge-joins the keys with the
 * schools' index in order, which reads every school up to the largest id asked for
 * (docs/performance.md, "The database path on PostgreSQL"). The LIMIT keeps PostgreSQL from
 * turning the subquery back into a join.
 */
const findMany = prepared((db, p: { hashes: string[] }) =>
  db
    .selectFrom('api_keys')
    .innerJoinLateral(
      (eb) => eb.selectFrom('schools').select(['schools.plan', 'schools.timezone', 'schools.currency', 'schools.data_version', 'schools.data_stamp']).whereRef('schools.id', '=', 'api_keys.school_id').limit(sql.lit(1)).as('school'),
      (join) => join.onTrue(),
    )
    .select(KEY_COLUMNS)
    .select(['api_keys.school_id as schoolId', 'school.plan', 'school.timezone', 'school.currency', 'school.data_version as dataVersion', 'school.data_stamp as dataStamp'])
    .where('api_keys.key_hash', '=', sql<string>`any(${p.hashes})`),
);

/** Keys kept at most (all are dropped when more are found): a key is a few hundred bytes. */
const MAX_KEPT = 10_000;

/**
 * How long a key is kept on PostgreSQL: a kept row's last use is as old as the row, and
 * the unused-key rule reads it; the usage counts themselves reach the store only every
 * SCHOOL_DATA_USAGE_FLUSH_MS, so a few seconds more change nothing.
 */
export const KEPT_MS = 5000;

/** A key row kept on PostgreSQL: the watch's generation it was read in, and until when it may answer. */
interface KeptRow {
  row: KeyRow;
  generation: number;
  until: number;
}

/** Lookups per statement at most; more waiting go out in further statements at once. */
const MAX_BATCH = 500;

interface Waiting {
  resolve(row: KeyRow | undefined): void;
  reject(err: unknown): void;
}

export class KeyFinder {
  private waiting = new Map<string, Waiting[]>();
  private scheduled = false;

  /** On PostgreSQL, the keys found while the watch's generation was the one each was read in. */
  private readonly keptPg = new Map<string, KeptRow>();

  private readonly reads: Reader;
  private readonly watch: KeyWatch | null;
  private readonly answered: () => void;

  /**
   * `watch`: PostgreSQL's key watch, started (null: nothing is kept beyond a turn there).
   * `answered`: told whenever the store answered a lookup (a key kept on PostgreSQL says
   * nothing of the database now).
   */
  constructor(
    reads: Reader,
    watch: KeyWatch | null = null,
    answered: () => void = () => undefined,
  ) {
    this.reads = reads;
    this.watch = watch;
    this.answered = answered;
  }

  /**
   * On SQLite: the keys found while the file's data version was `version`, by hash, and
   * the hashes found to be no key in the open snapshot (a flood of unknown keys would
   * otherwise push out the known ones).
   */
  private readonly kept = { version: -1, rows: new Map<string, KeyRow>(), snapshot: 0, misses: new Set<string>() };

  /** The key with this hash and its school: at once on SQLite, with a promise on PostgreSQL. */
  find(hash: string): KeyRow | undefined | Promise<KeyRow | undefined> {
    if (this.reads instanceof SqliteReader) {
      // SQLite reads its file for every lookup (at least its data version); a failure throws.
      const row = this.findKept(this.reads, hash);
      this.answered();
      return row;
    }
    const watch = this.watch;
    if (watch !== null && watch.trusted) {
      const kept = this.keptPg.get(hash);
      if (kept !== undefined && kept.generation === watch.generation && performance.now() < kept.until) return kept.row;
    }
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

  private findKept(reads: SqliteReader, hash: string): KeyRow | undefined {
    const kept = this.kept;
    const known = kept.rows.get(hash);
    if (known !== undefined && this.keepCurrent(reads)) return known;
    if (kept.snapshot !== 0 && kept.snapshot === reads.snapshot && kept.misses.has(hash)) return undefined;
    // Reading opens the turn's snapshot if none is open.
    const row = findOne(reads, hash);
    if (kept.snapshot !== reads.snapshot) {
      kept.snapshot = reads.snapshot;
      kept.misses.clear();
    }
    if (row === undefined) kept.misses.add(hash);
    else {
      this.keepCurrent(reads);
      if (kept.rows.size >= MAX_KEPT) kept.rows.clear();
      kept.rows.set(hash, row);
    }
    return row;
  }

  /**
   * Drops the kept keys if something committed since they were read: the data version is
   * read in the turn's snapshot (opening it if none is open), so a key read in this turn
   * and the version agree. An unknown key costs no such read. False when they were dropped.
   */
  private keepCurrent(reads: SqliteReader): boolean {
    const version = reads.dataVersion();
    if (this.kept.version === version) return true;
    this.kept.version = version;
    this.kept.rows.clear();
    return false;
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    const all = this.waiting;
    this.waiting = new Map();
    const hashes = [...all.keys()];
    for (let i = 0; i < hashes.length; i += MAX_BATCH) void this.lookUp(all, hashes.slice(i, i + MAX_BATCH));
  };

  private async lookUp(all: Map<string, Waiting[]>, hashes: string[]): Promise<void> {
    // Read before the statement is sent: an announcement heard while it runs may be of a
    // change its rows do not show yet, so they are then used for these requests only.
    const generation = this.watch?.generation;
    let rows: KeyRow[];
    try {
      rows = await findMany(this.reads, { hashes });
    } catch (err) {
      for (const hash of hashes) for (const w of all.get(hash)!) w.reject(err);
      return;
    }
    this.answered();
    const watch = this.watch;
    if (watch !== null && watch.trusted && watch.generation === generation) this.keep(rows, generation);
    const byHash = new Map(rows.map((row) => [row.keyHash, row]));
    for (const hash of hashes) {
      const row = byHash.get(hash);
      for (const w of all.get(hash)!) w.resolve(row);
    }
  }

  private keep(rows: KeyRow[], generation: number): void {
    const kept = this.keptPg;
    if (kept.size + rows.length > MAX_KEPT) kept.clear();
    const until = performance.now() + KEPT_MS;
    for (const row of rows) kept.set(row.keyHash, { row, generation, until });
  }
}
