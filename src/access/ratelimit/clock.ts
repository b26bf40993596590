/**
 * Where Redis's clock stands against this process's, as far as the rate-limit checks need
 * it: each check carries a deadline in Redis's clock (redis.ts, CONSUME), so that one Redis
 * runs after the instance gave it up counts in no school's window. docs/decisions.md ("A
 * check Redis runs after the instance gave it up counts in no window") says why.
 */

/** How far past its deadline by RedisClock's bound a check may run and still count: both clocks' steps and rounding. */
const CLOCK_SLACK_MS = 20;
/** How fast the two clocks may drift apart (1 ms a second: far more than NTP lets them). */
const CLOCK_DRIFT = 1 / 1000;

/**
 * An upper bound on how far Redis's clock is ahead of this process's, read from the checks'
 * answers: Redis ran each check after it was sent, so its time then less the time it was sent
 * bounds the offset from above; the bound ages by the clocks' possible drift, and a sample
 * tighter than the aged bound replaces it. A check carries a deadline in Redis's clock by
 * it: run later (the instance has given it up and answered its requests 503), it counts in
 * no window.
 */
export class RedisClock {
  private bound = Infinity;
  private at = 0;

  /** The deadline, in Redis's clock, of a check given up at `giveUpAt` (local ms); 0 (none) before the first sample. */
  deadline(giveUpAt: number): number {
    const bound = this.aged(Date.now());
    return bound === Infinity ? 0 : Math.ceil(giveUpAt + bound + CLOCK_SLACK_MS);
  }

  /** A check sent at `sentAt` (local ms) ran at `redisMs` (Redis's clock). */
  sample(sentAt: number, redisMs: number): void {
    const now = Date.now();
    if (redisMs - sentAt <= this.aged(now)) this.take(redisMs - sentAt, now);
  }

  /** Takes this sample as the bound (also when the bound was wrong: a clock was stepped). */
  reset(sentAt: number, redisMs: number): void {
    this.take(redisMs - sentAt, Date.now());
  }

  private take(bound: number, now: number): void {
    this.bound = bound;
    this.at = now;
  }

  private aged(now: number): number {
    return this.bound + Math.max(0, now - this.at) * CLOCK_DRIFT;
  }
}
