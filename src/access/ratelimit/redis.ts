import { createRequire } from 'node:module';
import type * as IORedis from 'ioredis';
import type { Redis } from 'ioredis';
import { decide, RateLimiterUnavailable, utcDay, WINDOW_SECONDS, type KeyUsage, type RateLimitDecision, type RateLimiter, type SharedUsage } from './index.js';

/**
 * Usage waiting for the database, per database (the id of its usage queue, in braces: one
 * Redis Cluster slot): the hash `...:pending`, fields `c|<key id>|<day>` (requests of the
 * key on that UTC day) and `t|<key id>` (its last use, epoch ms). A flush renames it to a
 * batch of its own, `...:batch:<batch id>`, noted in the sorted set `...:claimed` (score:
 * when it was claimed) until it is applied and released.
 */
const queueKeys = (databaseId: string) => {
  const base = `school-data:usage:{${databaseId}}`;
  return { pending: `${base}:pending`, claimed: `${base}:claimed`, batch: (id: string) => `${base}:batch:${id}` };
};

// One round trip, atomic: count the request, and start the window's expiry when the
// key is new (or, defensively, when it somehow has none); with a key id, record the
// request's usage too, whatever the decision.
const CONSUME = `
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
if ARGV[2] then
  redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
end
return {n, ttl}
`;

// A request's usage without a rate-limit check (402).
const RECORD = `
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
return 1
`;

// Takes the batches claimed before the lease ended (their instance died or is stuck) and
// moves what is pending into the new batch ARGV[1]; returns the ids to apply. Redis's
// clock, so instances' clocks need not agree.
const CLAIM = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[2]))
for _, id in ipairs(out) do redis.call('ZADD', KEYS[2], now, id) end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('RENAME', KEYS[1], KEYS[3])
  redis.call('ZADD', KEYS[2], now, ARGV[1])
  table.insert(out, ARGV[1])
end
return out
`;

type ConsumeFn = (key: string, usage: string, windowMs: number, countField?: string, timeField?: string, now?: number) => Promise<[number, number]>;
type RecordFn = (key: string, countField: string, timeField: string, now: number) => Promise<number>;
type ClaimFn = (pending: string, claimed: string, batch: string, id: string, leaseMs: number) => Promise<string[]>;

/** Counters in Redis, shared by every API instance. Fails closed within `timeoutMs`. */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis & { sdConsume: ConsumeFn; sdRecord: RecordFn; sdClaim: ClaimFn };
  /** The usage queue's keys, once shareUsage named the database. */
  private queue = queueKeys('none');
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
    redis.defineCommand('sdConsume', { numberOfKeys: 2, lua: CONSUME });
    redis.defineCommand('sdRecord', { numberOfKeys: 1, lua: RECORD });
    redis.defineCommand('sdClaim', { numberOfKeys: 3, lua: CLAIM });
    this.redis = redis as Redis & { sdConsume: ConsumeFn; sdRecord: RecordFn; sdClaim: ClaimFn };
  }

  readonly sharesUsage = true;
  shareUsage(databaseId: string): SharedUsage {
    const queue = (this.queue = queueKeys(databaseId));
    return {
      record: (keyId) => this.record(keyId),
      claim: async (id, leaseMs) => {
        await this.whenReady();
        return this.redis.sdClaim(queue.pending, queue.claimed, queue.batch(id), id, leaseMs);
      },
      read: async (id) => {
        await this.whenReady();
        return usageOf(await this.redis.hgetall(queue.batch(id)));
      },
      release: async (id) => {
        await this.whenReady();
        await this.redis.multi().del(queue.batch(id)).zrem(queue.claimed, id).exec();
      },
    };
  }

  private async record(keyId: string): Promise<void> {
    await this.whenReady();
    const now = Date.now();
    await this.redis.sdRecord(this.queue.pending, `c|${keyId}|${utcDay(now)}`, `t|${keyId}`, now);
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

  async consume(schoolId: string, limit: number, keyId?: string): Promise<RateLimitDecision> {
    let reply: [number, number];
    try {
      await this.whenReady();
      const rl = `school-data:rl:{${schoolId}}`;
      if (keyId === undefined) reply = await this.redis.sdConsume(rl, this.queue.pending, WINDOW_SECONDS * 1000);
      else {
        const now = Date.now();
        reply = await this.redis.sdConsume(rl, this.queue.pending, WINDOW_SECONDS * 1000, `c|${keyId}|${utcDay(now)}`, `t|${keyId}`, now);
      }
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

  /** Whether Redis answers now; like a request, waits for a connection still being made. */
  async ping(): Promise<boolean> {
    try {
      await this.whenReady();
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

/** The fields of a usage hash (see queueKeys) by key id. */
function usageOf(fields: Record<string, string>): Map<string, KeyUsage> {
  const out = new Map<string, KeyUsage>();
  const of = (keyId: string) => {
    let u = out.get(keyId);
    if (u === undefined) out.set(keyId, (u = { lastUsedAt: 0, days: new Map() }));
    return u;
  };
  for (const [field, value] of Object.entries(fields)) {
    const [kind, keyId, day] = field.split('|');
    if (kind === 'c' && keyId && day) of(keyId).days.set(day, Number(value));
    else if (kind === 't' && keyId) of(keyId).lastUsedAt = Number(value);
  }
  return out;
}
