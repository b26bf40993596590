import { createRequire } from 'node:module';
import type * as IORedis from 'ioredis';
import type { Redis } from 'ioredis';
import { decide, RateLimiterUnavailable, WINDOW_SECONDS, type RateLimitDecision, type RateLimiter } from './index.js';

// One round trip, atomic: count the request, and start the window's expiry when the
// key is new (or, defensively, when it somehow has none).
const CONSUME = `
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
`;

type ConsumeFn = (key: string, windowMs: number) => Promise<[number, number]>;

/** Counters in Redis, shared by every API instance. Fails closed within `timeoutMs`. */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis & { sdConsume: ConsumeFn };
  /** Shared by every request that arrives while the connection is (re)established. */
  private connecting: Promise<void> | null = null;

  constructor(url: string, private readonly timeoutMs: number) {
    // Loaded when Redis is configured: a process on the in-memory limiter never loads the client.
    const { Redis: Client } = createRequire(import.meta.url)('ioredis') as typeof IORedis;
    const redis = new Client(url, {
      // Fail fast instead of queueing while disconnected: the request gets 503 at once.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: timeoutMs,
      connectTimeout: Math.max(timeoutMs, 1000),
      // Keep reconnecting forever, so service returns on its own when Redis does.
      retryStrategy: (times) => Math.min(times * 100, 1000),
      lazyConnect: false,
    });
    redis.on('error', () => undefined);
    redis.defineCommand('sdConsume', { numberOfKeys: 1, lua: CONSUME });
    this.redis = redis as Redis & { sdConsume: ConsumeFn };
  }

  /**
   * Commands are never queued while disconnected (a queue would grow without bound
   * during an outage and replay stale counts afterwards). Instead a request that finds
   * the connection not ready yet - at start, or while reconnecting - waits for it up to
   * the timeout, then fails closed.
   */
  private whenReady(timeoutMs = this.timeoutMs): Promise<void> {
    if (this.redis.status === 'ready') return Promise.resolve();
    this.connecting ??= new Promise<void>((resolve) => this.redis.once('ready', resolve)).finally(() => {
      this.connecting = null;
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('rate-limit service not connected')), timeoutMs);
    });
    return Promise.race([this.connecting, timeout]).finally(() => clearTimeout(timer));
  }

  async consume(schoolId: string, limit: number): Promise<RateLimitDecision> {
    let reply: [number, number];
    try {
      await this.whenReady();
      // The hash tag keeps each school's counter in one slot on Redis Cluster.
      reply = await this.redis.sdConsume(`school-data:rl:{${schoolId}}`, WINDOW_SECONDS * 1000);
    } catch (err) {
      throw new RateLimiterUnavailable('rate-limit service did not answer', { cause: err });
    }
    const [count, msLeft] = Array.isArray(reply) ? reply : [];
    if (!Number.isSafeInteger(count) || !Number.isSafeInteger(msLeft)) {
      // A reply of the wrong shape means the connection can no longer be trusted to pair
      // replies with commands (e.g. after timeouts on a slow link): fail closed and start
      // a fresh connection.
      this.redis.disconnect(true);
      throw new RateLimiterUnavailable('rate-limit service gave an unexpected reply');
    }
    return decide(count!, limit, msLeft!);
  }

  async ready(timeoutMs: number): Promise<boolean> {
    try {
      await this.whenReady(timeoutMs);
      return true;
    } catch {
      return false;
    }
  }

  async ping(): Promise<boolean> {
    try {
      return (await this.redis.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}
