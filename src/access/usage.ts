/**
 * Key usage (request counter, last use, requests per day) and each key's request log,
 * written in batches, never a write per request. With Redis, a request's usage waits
 * there (recorded with its rate-limit check) and any live instance moves it in batches,
 * each applied once (its id is written in `usage_batches` in the same transaction): a
 * SIGKILL loses nothing. Else it waits in this process's memory: a SIGKILL loses at most
 * one flush interval. The request log waits in memory either way. See docs/operations.md,
 * "Usage counts: what can be lost", and docs/decisions.md.
 */
import { randomUUID } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { sql, type Insertable, type Kysely, type Transaction } from 'kysely';
import type { Logger } from 'pino';
import { isLockWait, onPostgres, withoutLockWait } from '../db/index.js';
import type { Database, KeyRequestsTable } from '../db/schema.js';
import { formatTimestamp } from '../domain/time.js';
import { DependencyState } from '../ops/dependency.js';
import { redactKeys, type KeyRequest } from '../ops/request-log.js';
import { utcDay, type KeyUsage, type RateLimiter, type SharedUsage } from './ratelimit/index.js';

/** Requests kept per key in its request log. */
export const KEY_REQUESTS_KEPT = 100;
/** Days of requests per day kept per key. */
export const KEY_DAYS_KEPT = 90;
/**
 * A claimed batch not released after this long is taken over by the next flush of any
 * instance (its own died, or is stuck). Applying is idempotent, so a takeover of a batch
 * still being applied costs only a little work twice. Short enough that the counts of an
 * instance killed holding a batch are visible within the contract's 5 s at the default
 * flush interval (its age, up to a flush interval, plus the lease and the next flush).
 */
export const BATCH_LEASE_MS = 2500;
/** How long the ids of applied batches are kept (a batch is released within seconds of being applied). */
const APPLIED_KEPT_MS = 7 * 86_400_000;
/** How long after a close began a new try to write the usage may still begin. */
const CLOSE_RETRIES_MS = 8000;
/** A flush put off this long by another writer's lock (a stuck import, an open shell) is told as failing. */
const PUT_OFF_TOLD_MS = 60_000;
/** Old days, old batch ids: pruned at most this often. */
const PRUNE_EVERY_MS = 3_600_000;
/** The request log is written at most this often (docs/performance.md, "Key activity"). */
export const REQUEST_LOG_FLUSH_MS = 5000;
/**
 * Keys whose request logs one transaction writes; a flush writes one such piece per turn
 * of the event loop, so the requests that arrive meanwhile are not held up behind the
 * whole log (docs/performance.md, "The request log in pieces").
 */
const KEYS_PER_WRITE = 5;

/** A request as a key's ring holds it: the key is the ring's. */
type RingedRequest = Omit<KeyRequest, 'keyId'>;

/**
 * A key's requests waiting for the request log's write: the last KEY_REQUESTS_KEPT, in a
 * ring of columns written in place. Logging a request keeps no object of its own: a list
 * of entry objects kept the garbage collector busy at the API's rates (docs/performance.md,
 * "The request log's entries").
 */
export class WaitingRequests {
  private readonly at = new Float64Array(KEY_REQUESTS_KEPT);
  private readonly durationMs = new Float64Array(KEY_REQUESTS_KEPT);
  private readonly status = new Uint16Array(KEY_REQUESTS_KEPT);
  private readonly method: string[] = new Array<string>(KEY_REQUESTS_KEPT).fill('');
  private readonly target: string[] = new Array<string>(KEY_REQUESTS_KEPT).fill('');
  private readonly requestId: string[] = new Array<string>(KEY_REQUESTS_KEPT).fill('');
  private readonly address: string[] = new Array<string>(KEY_REQUESTS_KEPT).fill('');
  /** Requests added, of which the ring holds the last KEY_REQUESTS_KEPT. */
  private added = 0;

  add(r: RingedRequest): void {
    const i = this.added % KEY_REQUESTS_KEPT;
    this.added++;
    this.at[i] = r.at;
    this.durationMs[i] = r.durationMs;
    this.status[i] = r.status;
    this.method[i] = r.method;
    this.target[i] = r.target;
    this.requestId[i] = r.requestId;
    this.address[i] = r.address;
  }

  /** How many requests the ring holds (at most KEY_REQUESTS_KEPT). */
  get held(): number {
    return Math.min(this.added, KEY_REQUESTS_KEPT);
  }

  /** Adds the requests `newer` holds, oldest first, after these (a failed write's, then what came meanwhile). */
  append(newer: WaitingRequests): void {
    for (let n = newer.added - newer.held; n < newer.added; n++) this.add(newer.slot(n % KEY_REQUESTS_KEPT));
  }

  /** The request in slot `i`, as added. */
  private slot(i: number): RingedRequest {
    return { at: this.at[i]!, durationMs: this.durationMs[i]!, status: this.status[i]!, method: this.method[i]!, target: this.target[i]!, requestId: this.requestId[i]!, address: this.address[i]! };
  }

  /**
   * The requests held, oldest first, as request-log rows in the slots that follow
   * `firstSlot`, the target's key values masked: made from the ring's columns, with no
   * request object between.
   */
  rows(keyId: string, firstSlot: number, out: Insertable<KeyRequestsTable>[]): void {
    for (let n = this.added - this.held, k = 0; n < this.added; n++, k++) {
      const i = n % KEY_REQUESTS_KEPT;
      out.push({
        key_id: keyId, slot: (((firstSlot + k) % KEY_REQUESTS_KEPT) + KEY_REQUESTS_KEPT) % KEY_REQUESTS_KEPT, request_id: this.requestId[i]!, at_ms: Math.round(this.at[i]!), method: this.method[i]!,
        target: redactKeys(this.target[i]!), status: this.status[i]!, address: this.address[i]!, duration_ms: Math.round(this.durationMs[i]! * 10) / 10,
      });
    }
  }
}

/** A call to the shared usage (Redis) failed: what waits there stays for the next move. */
class SharedUsageUnavailable extends Error {
  override name = 'SharedUsageUnavailable';
}

/** `call`, its failure marked as the shared usage's. */
async function onShared<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    throw new SharedUsageUnavailable('the shared usage did not answer', { cause: err });
  }
}

export class UsageRecorder {
  /** Whether flushes fail: logged when they start failing and when they succeed again, not at every retry (src/ops/dependency.ts). */
  private readonly flushes: DependencyState;
  /** Whether moving the shared usage out of Redis fails, likewise (it does not stop the rest of a flush). */
  private readonly moves: DependencyState;
  private pending = new Map<string, KeyUsage>();
  private requests = new Map<string, WaitingRequests>();
  private timer: NodeJS.Timeout | null;
  private flushing: Promise<void> | null = null;
  private prunedAt = 0;
  private requestsWrittenAt = 0;
  private closing = false;
  /** When flushes began to be put off by another writer's lock (performance.now()), or null. */
  private putOffSince: number | null = null;
  /** Whether the last flush failed (what close() waits on: the store's state is not known after a flush with nothing to write). */
  private lastFlushFailed = false;

  /** The recorder of a store and its limiter: usage goes through the limiter's service when it is shared (Redis). */
  static async open(db: Kysely<Database>, log: Logger, flushMs: number, limiter: RateLimiter): Promise<UsageRecorder> {
    if (!limiter.sharesUsage) return new UsageRecorder(db, log, flushMs);
    const queue = await db.selectFrom('usage_queue').select('id').executeTakeFirstOrThrow();
    // Requests Redis did not record (the limiter knows which) are counted here, at their time.
    const recorder: UsageRecorder = new UsageRecorder(db, log, flushMs, limiter.shareUsage(queue.id, (keyId, requests, at) => recorder.record(keyId, requests, at)));
    return recorder;
  }

  private readonly db: Kysely<Database>;
  private readonly log: Logger;
  readonly shared: SharedUsage | null;

  /** `shared`: the limiter's shared usage (Redis), or null to count in memory. */
  constructor(
    db: Kysely<Database>,
    log: Logger,
    flushMs: number,
    shared: SharedUsage | null = null,
  ) {
    this.db = db;
    this.log = log;
    this.shared = shared;
    this.flushes = new DependencyState(onPostgres(db) ? 'postgres' : 'sqlite', 'data_unavailable', log);
    this.moves = new DependencyState('redis', 'rate_limit_unavailable', log);
    this.timer = setInterval(() => void this.flush(), flushMs);
    this.timer.unref();
  }

  /** Counts `requests` requests of `keyId`, made at `at`, in this process's memory (see the header for when). */
  record(keyId: string, requests = 1, at = Date.now()): void {
    addRequests(this.pending, keyId, utcDay(at), requests, at);
  }

  /** Notes an answered request of a key for its request log; only the last KEY_REQUESTS_KEPT per key wait for the flush. */
  logRequest(request: KeyRequest): void {
    let waiting = this.requests.get(request.keyId);
    if (waiting === undefined) {
      waiting = new WaitingRequests();
      this.requests.set(request.keyId, waiting);
    }
    waiting.add(request);
  }

  /** Writes what is pending. Concurrent calls share one write. */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async write(): Promise<void> {
    // While another process holds SQLite's write lock (an import), a flush does not wait
    // for it (the cabinet's pages would queue behind it): what it holds is kept for a later
    // flush. The flushes of a close wait as any write does.
    const closing = this.closing;
    try {
      await (closing ? this.writeAll(closing) : withoutLockWait(() => this.writeAll(closing)));
      this.lastFlushFailed = false;
      this.putOffSince = null;
    } catch (err) {
      this.lastFlushFailed = true;
      if (!closing && isLockWait(err)) {
        this.putOffSince ??= performance.now();
        if (performance.now() - this.putOffSince < PUT_OFF_TOLD_MS) {
          this.log.debug({ err }, 'usage flush put off: the data store is busy with another writer');
          return;
        }
      }
      // Retried at the next flush; the store's outage itself is logged by the request path's state.
      this.flushes.failedBeside(err, 'usage flush');
    }
  }

  /** What is pending, in order; throws as soon as a step fails (what it held is kept for the next flush). */
  private async writeAll(closing: boolean): Promise<void> {
    // Counts first: a request seen in a key's log is on its counter too. Each step says
    // whether it used the store: a flush with nothing to write says nothing of the store,
    // and is not taken as the store working again.
    let used = await this.writeLocal();
    if (this.shared) used = (await this.moveSharedOrNote(this.shared)) || used;
    // The request log at most every REQUEST_LOG_FLUSH_MS: its rows are written and pruned
    // per key, and under load that is 100 rows a key each time, however often it runs.
    if (Date.now() - this.requestsWrittenAt >= REQUEST_LOG_FLUSH_MS || closing) {
      this.requestsWrittenAt = Date.now();
      used = (await this.writeRequests()) || used;
    }
    // The hourly prune is housekeeping, not usage: a close does not wait on it (a store
    // silent at a stop would hold the close for its retries).
    if (!closing) used = (await this.prune()) || used;
    if (used) this.flushes.answered();
  }

  /** The counts of this process's memory, in one transaction; kept for the next flush if it fails. Whether there were any. */
  private async writeLocal(): Promise<boolean> {
    if (this.pending.size === 0) return false;
    const batch = this.pending;
    this.pending = new Map();
    try {
      await this.db.transaction().execute((trx) => applyUsage(trx, batch));
    } catch (err) {
      // Merged into what arrived meanwhile and retried.
      for (const [id, entry] of batch) {
        if (!this.pending.has(id)) this.pending.set(id, entry);
        else for (const [day, n] of entry.days) addRequests(this.pending, id, day, n, entry.lastUsedAt);
      }
      throw err;
    }
    return true;
  }

  /**
   * The request logs: each key's log is a ring of KEY_REQUESTS_KEPT slots. Per piece of
   * KEYS_PER_WRITE keys, one transaction: a statement advances each key's count of requests
   * and returns it, which gives the key's new rows their slots (the count's last values,
   * modulo the ring's size); the rows then overwrite those slots. Nothing is deleted, so the
   * table holds at most KEY_REQUESTS_KEPT rows a key and a busy log leaves no dead rows
   * behind for the database to clear.
   */
  private async writeRequests(): Promise<boolean> {
    if (this.requests.size === 0) return false;
    const logs = [...this.requests];
    this.requests = new Map();
    for (let i = 0; i < logs.length; i += KEYS_PER_WRITE) {
      try {
        if (i > 0) await nextTurn();
        const piece = logs.slice(i, i + KEYS_PER_WRITE);
        await this.db.transaction().execute((trx) => writeRings(trx, piece));
      } catch (err) {
        // The pieces not written are kept for the next write, ahead of what was logged meanwhile.
        const meanwhile = this.requests;
        this.requests = new Map(logs.slice(i));
        for (const [keyId, waiting] of meanwhile) {
          const kept = this.requests.get(keyId);
          if (kept === undefined) this.requests.set(keyId, waiting);
          else kept.append(waiting);
        }
        throw err;
      }
    }
    return true;
  }

  /** moveShared; Redis failing is noted on its own state, and the flush goes on. Whether the store was used. */
  private async moveSharedOrNote(shared: SharedUsage): Promise<boolean> {
    try {
      const used = await this.moveShared(shared);
      this.moves.answered();
      return used;
    } catch (err) {
      if (!(err instanceof SharedUsageUnavailable)) throw err;
      this.moves.failedBeside(err.cause, 'usage move');
      return false;
    }
  }

  /** Claims what waits in Redis (and batches left by others) and applies each batch once. Whether a batch reached the store. */
  private async moveShared(shared: SharedUsage): Promise<boolean> {
    const ids = await onShared(shared.claim(randomUUID(), BATCH_LEASE_MS));
    let used = false;
    for (const id of ids) {
      const usage = await onShared(shared.read(id));
      if (usage.size > 0) {
        used = true;
        await this.db.transaction().execute(async (trx) => {
          const fresh = await trx.insertInto('usage_batches').values({ id, applied_at: formatTimestamp(Date.now()) }).onConflict((oc) => oc.column('id').doNothing()).executeTakeFirst();
          // Applied already, by another instance or by this one before a failed release.
          if (Number(fresh.numInsertedOrUpdatedRows ?? 0) === 0) return;
          await applyUsage(trx, usage);
        });
      }
      await onShared(shared.release(id));
    }
    return used;
  }

  /** Days past KEY_DAYS_KEPT and old batch ids, once an hour. Whether it ran. */
  private async prune(): Promise<boolean> {
    const now = Date.now();
    if (now - this.prunedAt < PRUNE_EVERY_MS) return false;
    await this.db.deleteFrom('key_days').where('day', '<', utcDay(now - KEY_DAYS_KEPT * 86_400_000)).execute();
    await this.db.deleteFrom('usage_batches').where('applied_at', '<', formatTimestamp(now - APPLIED_KEPT_MS)).execute();
    this.prunedAt = now;
    return true;
  }

  /**
   * Begins no periodic flush from now on; what the flushes of `close` do instead. Called as
   * the stop begins, before the steps that come ahead of `close`, so none begins meanwhile.
   */
  stopFlushing(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.closing = true;
  }

  /**
   * Stops the timer and writes everything still pending, retrying briefly: up to five tries,
   * none begun CLOSE_RETRIES_MS after the close began, so a stop while a store is silent ends
   * within a service manager's usual grace period.
   */
  async close(): Promise<void> {
    this.stopFlushing();
    const started = performance.now();
    // Requests whose record in Redis is not known yet are known, or counted here, first.
    await this.shared?.close();
    // A write under way may have claimed the shared usage before the last requests were
    // counted there: the flushes below start after it, so they move those too.
    await this.flushing;
    for (let attempt = 0; attempt < 5; attempt++) {
      await this.flush();
      if (this.pending.size === 0 && this.requests.size === 0 && !this.lastFlushFailed && !this.moves.down) return;
      const pause = 200 * (attempt + 1);
      if (performance.now() + pause - started >= CLOSE_RETRIES_MS) break;
      await new Promise((r) => setTimeout(r, pause));
    }
    if (this.pending.size > 0 || this.requests.size > 0 || this.lastFlushFailed) {
      this.log.error({ keys: this.pending.size, requestLogs: this.requests.size }, 'usage counts could not be written before shutdown');
    } else {
      this.log.warn('usage waiting in Redis was not moved before shutdown: it stays there, and any instance moves it once Redis answers');
    }
  }
}

/**
 * Where a key's count of requests starts again from 0: a multiple of the ring's size, so the
 * slots go on in order, within PostgreSQL's integer column (2^31 requests of one key would end it).
 */
const REQUEST_COUNT_WRAP = 1_000_000_000;

/** Advances each key's count of requests by its new ones, and writes them into the slots that gives. */
async function writeRings(trx: Transaction<Database>, logs: [string, WaitingRequests][]): Promise<void> {
  const counts = logs.map(([keyId, waiting]) => ({ key_id: keyId, next: waiting.held }));
  const advanced = await trx
    .insertInto('key_request_next')
    .values(counts)
    .onConflict((oc) => oc.column('key_id').doUpdateSet({ next: sql<number>`(cast(key_request_next.next as bigint) + excluded.next) % ${sql.lit(REQUEST_COUNT_WRAP)}` }))
    .returning(['key_id', 'next'])
    .execute();
  const nextOf = new Map(advanced.map((r) => [r.key_id, Number(r.next)]));
  const rows: Insertable<KeyRequestsTable>[] = [];
  for (const [keyId, waiting] of logs) waiting.rows(keyId, nextOf.get(keyId)! - waiting.held, rows);
  await overwriteSlots(trx, JSON.stringify(rows));
}

/** The request log's columns, and the upsert that overwrites a slot with a new row. */
const RING_COLUMNS = sql`key_id, slot, request_id, at_ms, method, target, status, address, duration_ms`;
const OVERWRITE_SLOT = sql`on conflict (key_id, slot) do update set
  request_id = excluded.request_id, at_ms = excluded.at_ms, method = excluded.method, target = excluded.target,
  status = excluded.status, address = excluded.address, duration_ms = excluded.duration_ms`;

/**
 * Writes request-log rows, given as a JSON array of objects, into their slots, whatever
 * was there: one statement with one parameter on both stores. The query builder's
 * multi-row insert carries a parameter per column and row: on PostgreSQL, parsing it cost
 * more than writing the rows; on SQLite, building it made far more garbage than the JSON,
 * in the server's thread (docs/performance.md, "The request log's write" and "The request
 * log's garbage"). SQLite reads the array with `jsonb_each`, which hands each row on in
 * its binary form (docs/performance.md, "Usage in two statements").
 */
async function overwriteSlots(trx: Transaction<Database>, rowsJson: string): Promise<void> {
  const rows = onPostgres(trx)
    ? sql`select ${RING_COLUMNS} from json_populate_recordset(null::key_requests, ${rowsJson}::json)`
    : // "where true": SQLite's parser needs it between a select and its upsert clause.
      sql`select value ->> 'key_id', value ->> 'slot', value ->> 'request_id', value ->> 'at_ms', value ->> 'method',
        value ->> 'target', value ->> 'status', value ->> 'address', value ->> 'duration_ms'
        from jsonb_each(${rowsJson}) where true`;
  await sql`insert into key_requests (${RING_COLUMNS}) ${rows} ${OVERWRITE_SLOT}`.execute(trx);
}

/** Adds `requests` of `keyId` on `day` to `usage`, its last use moved to `at` if that is later. */
function addRequests(usage: Map<string, KeyUsage>, keyId: string, day: string, requests: number, at: number): void {
  const entry = usage.get(keyId);
  if (entry === undefined) {
    usage.set(keyId, { lastUsedAt: at, days: new Map([[day, requests]]) });
    return;
  }
  entry.days.set(day, (entry.days.get(day) ?? 0) + requests);
  if (at > entry.lastUsedAt) entry.lastUsedAt = at;
}

/** Orders map entries by their key. */
const byName = ([a]: [string, unknown], [b]: [string, unknown]): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Adds `usage` to the keys' counters, last use and requests per day: two statements with one
 * JSON parameter each, whatever the number of keys, never a statement a key (docs/performance.md,
 * "Usage in two statements"). Rows go in key order, so that instances applying batches at
 * once lock rows in one order (a deadlock fails a flush, which the next one retries).
 */
async function applyUsage(trx: Transaction<Database>, usage: Map<string, KeyUsage>): Promise<void> {
  const keys: { id: string; requests: number; last_used_at: string | null }[] = [];
  const days: { key_id: string; day: string; requests: number }[] = [];
  for (const [id, u] of [...usage].sort(byName)) {
    let requests = 0;
    for (const [day, n] of [...u.days].sort(byName)) {
      requests += n;
      days.push({ key_id: id, day, requests: n });
    }
    if (requests === 0 && u.lastUsedAt === 0) continue;
    keys.push({ id, requests, last_used_at: u.lastUsedAt === 0 ? null : formatTimestamp(u.lastUsedAt) });
  }
  const pg = onPostgres(trx);
  if (keys.length > 0) {
    const json = JSON.stringify(keys);
    const given = pg
      ? sql`json_to_recordset(${json}::json) as u(id text, requests bigint, last_used_at text)`
      : sql`(select value ->> 'id' as id, value ->> 'requests' as requests, value ->> 'last_used_at' as last_used_at from jsonb_each(${json})) as u`;
    // The last use only moves forward: a batch applied late (another instance's) may be older.
    await sql`update api_keys set request_count = api_keys.request_count + u.requests,
      last_used_at = case when u.last_used_at is not null and (api_keys.last_used_at is null or api_keys.last_used_at < u.last_used_at)
        then u.last_used_at else api_keys.last_used_at end
      from ${given} where api_keys.id = u.id`.execute(trx);
  }
  if (days.length > 0) {
    const json = JSON.stringify(days);
    const rows = pg
      ? sql`select key_id, day, requests from json_to_recordset(${json}::json) as d(key_id text, day text, requests bigint)`
      : // "where true": SQLite's parser needs it between a select and its upsert clause.
        sql`select value ->> 'key_id', value ->> 'day', value ->> 'requests' from jsonb_each(${json}) where true`;
    await sql`insert into key_days (key_id, day, requests) ${rows}
      on conflict (key_id, day) do update set requests = key_days.requests + excluded.requests`.execute(trx);
  }
}
