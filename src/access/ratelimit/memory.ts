import { decide, WINDOW_SECONDS, type LimitWindow, type RateLimitDecision, type RateLimiter } from './index.js';

interface Window {
  count: number;
  endsAt: number;
}

/** The embedded default: counters in this process's memory (one instance only). */
export class MemoryRateLimiter implements RateLimiter {
  readonly sharesUsage = false;
  readonly checking = false;
  /** One process: its usage is counted in its own memory (src/access/usage.ts). */
  shareUsage(): null {
    return null;
  }
  private readonly windows = new Map<string, Window>();
  private readonly sweeper: NodeJS.Timeout;

  /** Milliseconds on a clock that only moves on (the process's own): a wall clock set back would stretch every window. */
  private readonly now: () => number;

  constructor(now: () => number = () => performance.now()) {
    this.now = now;
    // Ended windows are dropped so memory follows the active schools, not all schools ever seen.
    this.sweeper = setInterval(() => this.sweep(), WINDOW_SECONDS * 1000);
    this.sweeper.unref();
  }

  consume(schoolId: string, limit: number): RateLimitDecision {
    const now = this.now();
    let w = this.windows.get(schoolId);
    if (!w || w.endsAt <= now) {
      w = { count: 0, endsAt: now + WINDOW_SECONDS * 1000 };
      this.windows.set(schoolId, w);
    }
    w.count += 1;
    return decide(w.count, limit, w.endsAt - now);
  }

  peek(schoolId: string): LimitWindow {
    const now = this.now();
    const w = this.windows.get(schoolId);
    return w === undefined || w.endsAt <= now ? { count: 0, msLeft: 0 } : { count: w.count, msLeft: w.endsAt - now };
  }

  ping(): Promise<boolean> {
    return Promise.resolve(true);
  }

  ready(): Promise<boolean> {
    return Promise.resolve(true);
  }

  private sweep(): void {
    const now = this.now();
    for (const [id, w] of this.windows) if (w.endsAt <= now) this.windows.delete(id);
  }

  close(): Promise<void> {
    clearInterval(this.sweeper);
    return Promise.resolve();
  }
}
