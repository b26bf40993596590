/**
 * Rate limiting per school: a fixed 60-second window that starts with the first
 * request after the previous window ended; the first `limit` requests pass.
 * Two implementations behind one interface: in-process memory (one process) and
 * Redis (shared by every instance). Both fail closed: an unanswerable check throws
 * RateLimiterUnavailable and the request gets 503, never a free pass.
 */
export const WINDOW_SECONDS = 60;

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Whole seconds until the window ends (at least 1). */
  resetSeconds: number;
}

/**
 * A school's window as it stands, read without counting (for an answer refused before the
 * check, which carries the limit's headers all the same): its requests so far, and the ms
 * until it ends (0 or less: no window runs; the next counted request starts one).
 */
export interface LimitWindow {
  count: number;
  msLeft: number;
}

/** What the headers of an answer say of a window read with peek or a record. */
export function windowDecision(window: LimitWindow, limit: number): RateLimitDecision {
  return decide(window.count, limit, window.msLeft > 0 ? window.msLeft : WINDOW_SECONDS * 1000);
}

/** A key's usage not yet in the database: its requests per UTC day (`YYYY-MM-DD`) and its last use. */
export interface KeyUsage {
  /** Epoch milliseconds. */
  lastUsedAt: number;
  days: Map<string, number>;
}

/**
 * Usage kept in a service every instance shares (Redis) until one of them moves it to the
 * database (src/access/usage.ts): recorded with each request's rate-limit check, taken in
 * batches with ids, each applied once.
 */
export interface SharedUsage {
  /**
   * Records one request of `keyId` that had no rate-limit check (402, 403), and reads the
   * window of `schoolId` when given (null when not). Rejects when Redis does not answer or
   * refuses; the request counts once all the same (see consume).
   */
  record(keyId: string, schoolId?: string): Promise<LimitWindow | null>;
  /**
   * Moves what is pending into a new batch `id`, and takes over the batches claimed more
   * than `leaseMs` ago and not released (their instance died, or is stuck): the ids to apply.
   */
  claim(id: string, leaseMs: number): Promise<string[]>;
  /** A batch's usage by key id (empty once released). */
  read(id: string): Promise<Map<string, KeyUsage>>;
  /** Forgets a batch that is applied. */
  release(id: string): Promise<void>;
  /**
   * Before the last write of usage at shutdown: accounts for every request sent to Redis
   * whose answer is still due or was lost, counting here what Redis may not have recorded.
   */
  close(): Promise<void>;
}

export interface RateLimiter {
  /**
   * Counts a request. The in-memory limiter answers at once; Redis with a promise. Either
   * way an unanswerable check is a RateLimiterUnavailable (thrown or rejected). With
   * `keyId` (only once shareUsage gave a queue) the request's usage is recorded in the
   * same round trip, whatever the decision; and it counts once even when the check fails:
   * in Redis, or, when Redis did not record it, through shareUsage's `unrecorded`.
   */
  consume(schoolId: string, limit: number, keyId?: string): RateLimitDecision | Promise<RateLimitDecision>;
  /**
   * Where usage waits for the database `databaseId` (the id of its usage queue) when the
   * limiter's service is shared (Redis); null: in each process's memory. Called once, before
   * consume() is given a key id. `unrecorded` counts in this process's memory the requests
   * Redis did not record (it was not reached, refused them, or a lost call was settled as
   * not applied).
   */
  shareUsage(databaseId: string, unrecorded: (keyId: string, requests: number, at: number) => void): SharedUsage | null;
  /**
   * The school's window, read without counting; null where it comes with the shared usage's
   * record instead (Redis: one round trip for both).
   */
  peek(schoolId: string): LimitWindow | null;
  /**
   * Whether a check sent earlier is still waiting for the service's answer (always false
   * for the in-memory limiter, which answers at once).
   */
  readonly checking: boolean;
  /** Whether shareUsage gives a shared place (then it needs the database's queue id). */
  readonly sharesUsage: boolean;
  /** True when the backing service answers now (for readiness checks). */
  ping(): Promise<boolean>;
  /** Waits up to `timeoutMs` for the backing service to be connected; false if it is not. */
  ready(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

export class RateLimiterUnavailable extends Error {
  override name = 'RateLimiterUnavailable';
}

/** The UTC day (`YYYY-MM-DD`) of an epoch-millisecond time; the text is made once a day. */
export function utcDay(ms: number): string {
  if (ms < dayCache.start || ms >= dayCache.start + DAY_MS) {
    dayCache.start = ms - (ms % DAY_MS);
    dayCache.day = new Date(dayCache.start).toISOString().slice(0, 10);
  }
  return dayCache.day;
}
const DAY_MS = 86_400_000;
const dayCache = { start: -Infinity, day: '' };

export function decide(count: number, limit: number, msLeft: number): RateLimitDecision {
  return {
    allowed: count <= limit,
    limit,
    remaining: Math.max(0, limit - count),
    // Within the window's length: a window's end less the time now, in fractional
    // milliseconds, can come out a hair over it (and Redis's clock is read across a trip).
    resetSeconds: Math.min(WINDOW_SECONDS, Math.max(1, Math.ceil(msLeft / 1000))),
  };
}
