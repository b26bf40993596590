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

export interface RateLimiter {
  /**
   * Counts a request. The in-memory limiter answers at once; Redis with a promise. Either
   * way an unanswerable check is a RateLimiterUnavailable (thrown or rejected).
   */
  consume(schoolId: string, limit: number): RateLimitDecision | Promise<RateLimitDecision>;
  /** True when the backing service answers now (for readiness checks). */
  ping(): Promise<boolean>;
  /** Waits up to `timeoutMs` for the backing service to be connected; false if it is not. */
  ready(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

export class RateLimiterUnavailable extends Error {
  override name = 'RateLimiterUnavailable';
}

export function decide(count: number, limit: number, msLeft: number): RateLimitDecision {
  return {
    allowed: count <= limit,
    limit,
    remaining: Math.max(0, limit - count),
    resetSeconds: Math.max(1, Math.ceil(msLeft / 1000)),
  };
}
