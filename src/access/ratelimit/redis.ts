import { createRequire } from 'node:module';
import type * as IORedis from 'ioredis';
import type { Redis } from 'ioredis';
import { decide, RateLimiterUnavailable, utcDay, WINDOW_SECONDS, type KeyUsage, type RateLimitDecision, type RateLimiter, type SharedUsage } from './index.js';

/**
 * The keys of one database (the id of its usage queue, in braces: one Redis Cluster
 * slot), so deployments sharing a Redis never share a count. `counter(school)`: the
 * school's requests in the current window. Usage waiting for the database: the hash
 * `...:pending`, fields `c|<key id>|<day>` (requests of the key on that UTC day) and
 * `t|<key id>` (its last use, epoch ms). A flush renames it to a batch of its own,
 * `...:batch:<batch id>`, noted in the sorted set `...:claimed` (score: when it was
 * claimed) until it is applied and released. `...:ready-probe`: what the readiness probe
 * writes (its value says nothing).
 */
const keysOf = (databaseId: string) => {
  const usage = `school-data:usage:{${databaseId}}`;
  return {
    counter: (schoolId: string) => `school-data:rl:{${databaseId}}:${schoolId}`,
    pending: `${usage}:pending`,
    claimed: `${usage}:claimed`,
    batch: (id: string) => `${usage}:batch:${id}`,
    readyProbe: `${usage}:ready-probe`,
  };
};

// One round trip for the checks of a turn, atomic: per school (KEYS[2..]), count its
// requests and start the window's expiry when the counter is new (or, defensively, has
// none), and record its keys' usage in the usage hash (KEYS[1]). ARGV: the window (ms), the
// UTC day, now (epoch ms), then per school: its requests, its number of keys, and that many
// pairs of key id and requests. Returns per school the count after its requests and the
// window's ms left; -1, -1 for a school whose counter refused the increment (its requests
// fail closed, and their usage is counted by the instance instead).
const CONSUME = `
local window, day, now = ARGV[1], ARGV[2], ARGV[3]
local out = {}
local a = 4
for i = 2, #KEYS do
  local keys = tonumber(ARGV[a + 1])
  local n = redis.pcall('INCRBY', KEYS[i], ARGV[a])
  if type(n) == 'number' then
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl < 0 then
      redis.call('PEXPIRE', KEYS[i], window)
      ttl = tonumber(window)
    end
    for j = a + 2, a + 2 * keys, 2 do
      redis.call('HINCRBY', KEYS[1], 'c|' .. ARGV[j] .. '|' .. day, ARGV[j + 1])
      redis.call('HSET', KEYS[1], 't|' .. ARGV[j], now)
    end
    out[#out + 1] = n
    out[#out + 1] = ttl
  else
    out[#out + 1] = -1
    out[#out + 1] = -1
  end
  a = a + 2 + 2 * keys
end
return out
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

type ConsumeFn = (keyCount: number, ...keysThenArgs: (string | number)[]) => Promise<number[]>;
type RecordFn = (key: string, countField: string, timeField: string, now: number) => Promise<number>;
type ClaimFn = (pending: string, claimed: string, batch: string, id: string, leaseMs: number) => Promise<string[]>;

/** A school's checks asked for in one turn, in the order they came, and its keys' requests among them. */
interface SchoolChecks {
  waiting: { limit: number; resolve(decision: RateLimitDecision): void; reject(err: unknown): void }[];
  keys: Map<string, number>;
}

/** Schools per script call at most; more in one turn go out in further calls at once. */
const MAX_SCHOOLS_PER_CALL = 500;

/** Counters in Redis, shared by every API instance. Fails closed within `timeoutMs`. */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis & { sdConsume: ConsumeFn; sdRecord: RecordFn; sdClaim: ClaimFn };
  /** The database's keys, once shareUsage named it. */
  private keys = keysOf('none');
  /** Shared by every request that arrives while the connection is (re)established. */
  private connecting: Promise<void> | null = null;
  /** The checks asked for in this turn of the event loop, by school: sent together at its end. */
  private asked = new Map<string, SchoolChecks>();
  private scheduled = false;
  /** Script calls sent and not answered yet. */
  private sent = 0;

  get checking(): boolean {
    return this.sent > 0;
  }

  constructor(url: string, private readonly timeoutMs: number) {
    // Loaded when Redis is configured: a process on the in-memory limiter never loads the client.
    const { Redis: Client } = createRequire(import.meta.url)('ioredis') as typeof IORedis;
    const redis = new Client(url, {
      // Fail fast instead of queueing while disconnected: the request gets 503 at once.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // A backstop only: each call is given up after `timeoutMs` by `timed`, which does not
      // take a busy server for a slow Redis; this one releases the client's own waiting command.
      commandTimeout: Math.max(4 * timeoutMs, 2000),
      connectTimeout: Math.max(timeoutMs, 1000),
      // Keep reconnecting forever, so service returns on its own when Redis does.
      retryStrategy: (times) => Math.min(times * 100, 1000),
      lazyConnect: false,
    });
    redis.on('error', () => undefined);
    // The number of keys varies (one counter per school of the turn): given with each call.
    redis.defineCommand('sdConsume', { lua: CONSUME });
    redis.defineCommand('sdRecord', { numberOfKeys: 1, lua: RECORD });
    redis.defineCommand('sdClaim', { numberOfKeys: 3, lua: CLAIM });
    this.redis = redis as Redis & { sdConsume: ConsumeFn; sdRecord: RecordFn; sdClaim: ClaimFn };
  }

  readonly sharesUsage = true;
  shareUsage(databaseId: string): SharedUsage {
    const queue = (this.keys = keysOf(databaseId));
    return {
      record: (keyId) => this.record(keyId),
      claim: async (id, leaseMs) => {
        await this.whenReady();
        return this.timed(this.redis.sdClaim(queue.pending, queue.claimed, queue.batch(id), id, leaseMs));
      },
      read: async (id) => {
        await this.whenReady();
        return usageOf(await this.timed(this.redis.hgetall(queue.batch(id))));
      },
      release: async (id) => {
        await this.whenReady();
        await this.timed(this.redis.multi().del(queue.batch(id)).zrem(queue.claimed, id).exec());
      },
    };
  }

  private async record(keyId: string): Promise<void> {
    await this.whenReady();
    const now = Date.now();
    await this.timed(this.redis.sdRecord(this.keys.pending, `c|${keyId}|${utcDay(now)}`, `t|${keyId}`, now));
  }

  /**
   * `reply`, or the error `failure` once `timeoutMs` have passed without it (a command's
   * reply, or the connection made). The timeout is judged
   * after the event loop has read its sockets (a setImmediate from the timer): when a long
   * turn of other work makes the timer due, Node runs the due timers before it reads the
   * sockets, and Redis's reply may be waiting there. So a busy server is not taken for a
   * slow Redis, and its requests are not refused 503 for it.
   */
  private timed<T>(reply: Promise<T>, timeoutMs = this.timeoutMs, failure = `no answer within ${timeoutMs} ms`): Promise<T> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        setImmediate(() => {
          if (settled) return;
          settled = true;
          reject(new Error(failure));
        });
      }, timeoutMs);
      reply.then(
        (value) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(value);
        },
        (error: Error) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          reject(error);
        },
      );
    });
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
    return this.timed(this.connecting, timeoutMs, 'rate-limit service not connected');
  }

  /**
   * The checks of one turn go out in one script call at its end (setImmediate), as the key
   * lookups of a turn do: each request gets its own place in its school's count, so the
   * limit is as exact as with a call per request.
   */
  consume(schoolId: string, limit: number, keyId?: string): Promise<RateLimitDecision> {
    return new Promise((resolve, reject) => {
      let school = this.asked.get(schoolId);
      if (school === undefined) this.asked.set(schoolId, (school = { waiting: [], keys: new Map() }));
      school.waiting.push({ limit, resolve, reject });
      if (keyId !== undefined) school.keys.set(keyId, (school.keys.get(keyId) ?? 0) + 1);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.sendChecks);
      }
    });
  }

  private readonly sendChecks = (): void => {
    this.scheduled = false;
    const asked = [...this.asked];
    this.asked = new Map();
    for (let i = 0; i < asked.length; i += MAX_SCHOOLS_PER_CALL) void this.check(asked.slice(i, i + MAX_SCHOOLS_PER_CALL));
  };

  private async check(schools: [string, SchoolChecks][]): Promise<void> {
    let reply: number[];
    this.sent += 1;
    try {
      await this.whenReady();
      const now = Date.now();
      const keys: string[] = [this.keys.pending];
      const args: (string | number)[] = [WINDOW_SECONDS * 1000, utcDay(now), now];
      for (const [schoolId, school] of schools) {
        keys.push(this.keys.counter(schoolId));
        args.push(school.waiting.length, school.keys.size);
        for (const [keyId, n] of school.keys) args.push(keyId, n);
      }
      reply = await this.timed(this.redis.sdConsume(keys.length, ...keys, ...args));
    } catch (err) {
      const failed = new RateLimiterUnavailable('rate-limit service did not answer', { cause: err });
      for (const [, school] of schools) for (const w of school.waiting) w.reject(failed);
      return;
    } finally {
      this.sent -= 1;
    }
    if (!Array.isArray(reply) || reply.length !== 2 * schools.length || !reply.every(Number.isSafeInteger)) {
      // A reply of the wrong shape means the connection can no longer be trusted to pair
      // replies with commands (e.g. after timeouts on a slow link): fail closed and start
      // a fresh connection.
      this.redis.disconnect(true);
      const failed = new RateLimiterUnavailable('rate-limit service gave an unexpected reply');
      for (const [, school] of schools) for (const w of school.waiting) w.reject(failed);
      return;
    }
    schools.forEach(([, school], i) => {
      const count = reply[2 * i]!;
      const msLeft = reply[2 * i + 1]!;
      if (count < 0) {
        const failed = new RateLimiterUnavailable('rate-limit service refused the count');
        for (const w of school.waiting) w.reject(failed);
        return;
      }
      // The school's requests of this call are the last `waiting.length` of its count, in the order they came.
      const first = count - school.waiting.length + 1;
      school.waiting.forEach((w, j) => w.resolve(decide(first + j, w.limit, msLeft)));
    });
  }

  async ready(timeoutMs: number): Promise<boolean> {
    try {
      await this.whenReady(timeoutMs);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Whether Redis takes a write now, as every check needs (a PING is answered by a Redis out
   * of memory that refuses them); like a request, waits for a connection still being made.
   */
  async ping(): Promise<boolean> {
    try {
      await this.whenReady();
      return (await this.timed(this.redis.set(this.keys.readyProbe, '1', 'PX', 60_000))) === 'OK';
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

/** The fields of a usage hash (see keysOf) by key id. */
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
