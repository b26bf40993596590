/**
 * Client-side pacing from the service's RateLimit header (`"default";r=<remaining>;t=<seconds to reset>`):
 * the requests that remain in the window are spread over the time left in it, so a
 * long export keeps under the school's limit instead of running into 429, and leaves
 * room between its requests for the school's other programs that share the limit.
 * Every answer re-reads the header, so requests by others are taken into account.
 */
import { setTimeout as sleep } from 'node:timers/promises';

export interface ThrottleOptions {
  /** Requests of each window to leave unused, for other programs of the school. Default 0. */
  reserve?: number;
}

type Headers = Record<string, string | string[] | undefined>;

// `t` is rounded up to whole seconds by the service; a little margin covers the trip.
const RESET_MARGIN_MS = 250;

export function parseRateLimit(headers: Headers): { remaining: number; resetSeconds: number } | null {
  const value = headers.ratelimit;
  if (typeof value !== 'string') return null;
  const r = /(?:^|;)\s*r=(\d+)/.exec(value);
  const t = /(?:^|;)\s*t=(\d+)/.exec(value);
  if (!r || !t) return null;
  return { remaining: Number(r[1]), resetSeconds: Number(t[1]) };
}

export class Throttle {
  private readonly reserve: number;
  private remaining: number | null = null;
  private resetAt = 0;
  private nextAt = 0;
  private queue: Promise<void> = Promise.resolve();

  constructor(options: ThrottleOptions = {}) {
    this.reserve = Math.max(0, Math.floor(options.reserve ?? 0));
  }

  /** Resolves when the next request may be sent. Concurrent callers are let through one by one. */
  acquire(): Promise<void> {
    const turn = this.queue.then(async () => {
      const wait = this.nextAt - Date.now();
      if (wait > 0) await sleep(wait);
      this.spendOne();
    });
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  /** Learns the state of the window from an answer's headers. */
  observe(headers: Headers, now = Date.now()): void {
    const state = parseRateLimit(headers);
    if (!state) return;
    this.remaining = state.remaining;
    this.resetAt = now + state.resetSeconds * 1000 + RESET_MARGIN_MS;
    this.schedule(now);
  }

  // Counts a request on its way before its answer arrives, so concurrent callers space out too.
  private spendOne(): void {
    const now = Date.now();
    if (this.remaining === null || now >= this.resetAt) {
      // Nothing known about the current window: the next answer will tell.
      this.remaining = null;
      this.nextAt = 0;
      return;
    }
    this.remaining = Math.max(0, this.remaining - 1);
    this.schedule(now);
  }

  private schedule(now: number): void {
    const budget = (this.remaining ?? 0) - this.reserve;
    this.nextAt = budget <= 0 ? this.resetAt : now + (this.resetAt - now) / budget;
  }
}
