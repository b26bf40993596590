import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type * as IORedis from 'ioredis';
import type { Redis } from 'ioredis';
import { decide, RateLimiterUnavailable, utcDay, WINDOW_SECONDS, type KeyUsage, type LimitWindow, type RateLimitDecision, type RateLimiter, type SharedUsage } from './index.js';
import { RedisClock } from './clock.js';
import { CallLedger, type CallUsage, type Unrecorded } from './ledger.js';

/**
 * The keys of one database (the id of its usage queue, in braces: one Redis Cluster
 * slot), so deployments sharing a Redis never share a count. `counter(school)`: the
 * school's requests in the current window. Usage waiting for the database: the hash
 * `...:pending`, fields `c|<key id>|<day>` (requests of the key on that UTC day) and
 * `t|<key id>` (its last use, epoch ms). A flush renames it to a batch of its own,
 * `...:batch:<batch id>`, noted in the sorted set `...:claimed` (score: when it was
 * claimed) until it is applied and released. `...:stream:<id>`: a connection's calls
 * (fields `last` and `void`, ledger.ts), a day after its last call. `...:ready-probe`:
 * what the readiness probe writes (its value says nothing).
 */
const keysOf = (databaseId: string) => {
  const usage = `school-data:usage:{${databaseId}}`;
  return {
    counter: (schoolId: string) => `school-data:rl:{${databaseId}}:${schoolId}`,
    pending: `${usage}:pending`,
    claimed: `${usage}:claimed`,
    batch: (id: string) => `${usage}:batch:${id}`,
    stream: (id: string) => `${usage}:stream:${id}`,
    readyProbe: `${usage}:ready-probe`,
  };
};

/** How long Redis keeps a connection's stream key after its last call or settle. */
const STREAM_KEPT_MS = 86_400_000;
/** A script's answer: not applied, as Redis refused its first write (out of memory, a replica). */
const NOT_APPLIED = -2;
/**
 * A script's answer: skipped, as its place was voided by a settle. A settle counts only
 * the calls whose replies were lost, so the instance counts one answered so.
 */
const VOIDED = -3;
/**
 * CONSUME's answer: run after the instance had given the call up (its requests were
 * answered 503), it recorded their usage and counted them in no window.
 */
const LATE = -4;
/**
 * A script's answer: not applied, as Redis refused its first write for being a replica (a
 * primary demoted by a failover the client did not see): the connection is dropped, and a
 * new one finds the primary its address names now.
 */
const READ_ONLY = -5;
/** Whether a script's answer code says it applied nothing (its usage is then counted by the instance). */
const appliedNothing = (code: number | undefined) => code === NOT_APPLIED || code === VOIDED || code === READ_ONLY;
/** Whether a Redis error, or a script's answer, says Redis refused to write as a replica. */
const readOnly = (answer: unknown) =>
  Array.isArray(answer) ? answer[0] === READ_ONLY : answer instanceof Error && answer.message.includes('READONLY');
/** The least time between two connections dropped for a replica's refusal: a Redis left read-only is not reconnected to in a loop. */
const READ_ONLY_RECONNECT_MS = 1000;
/** CONSUME's answer for the whole call, a code, rather than Redis's time and a count per school. */
const wholeCallRefused = (reply: number[]) => Array.isArray(reply) && appliedNothing(reply[0]);
/** Why a script applied nothing, by its code, for the outage's line: a failover and a full Redis look alike otherwise. */
const refusedBecause = (code: number | undefined): string =>
  code === READ_ONLY ? 'Redis is a read-only replica (READONLY), as after a failover'
  : code === VOIDED ? 'its place was settled as lost'
  : 'Redis refused the write (out of memory, or its usage key holds another type)';

// The start of every usage-recording call: KEYS[1] is the usage hash, KEYS[2] the call's
// connection's stream, ARGV[1] its place there. A place voided by a settle is skipped; else
// the stream's last applied place is written first, as a script's first write is the one
// Redis refuses when out of memory (after it, a script's writes all go through): then
// nothing is applied. A usage hash of another type is refused before anything is written.
const PLACE = `
local stream, seq = KEYS[2], tonumber(ARGV[1])
if seq <= tonumber(redis.call('HGET', stream, 'void') or 0) then return ${VOIDED} end
local usage = redis.call('TYPE', KEYS[1]).ok
if usage ~= 'hash' and usage ~= 'none' then return ${NOT_APPLIED} end
local noted = redis.pcall('HSET', stream, 'last', math.max(seq, tonumber(redis.call('HGET', stream, 'last') or 0)))
if type(noted) == 'table' and noted.err then
  if string.find(noted.err, 'READONLY', 1, true) then return ${READ_ONLY} end
  return ${NOT_APPLIED}
end
redis.call('PEXPIRE', stream, ${STREAM_KEPT_MS})
return 0
`;

// One round trip for the checks of a turn, atomic: per school (KEYS[3..]), count its
// requests and start the window's expiry when the counter is new (or, defensively, has
// none), and record its keys' usage in the usage hash (KEYS[1]). KEYS[2] and ARGV[1]: the
// call's stream and place (PLACE). ARGV[2..]: the window (ms), the UTC day, now (epoch ms),
// the deadline (Redis's epoch ms; 0: none), then per school: its requests, its number of
// keys, and that many pairs of key id and requests. Returns Redis's time, then per school
// the count after its requests and the window's ms left; -1, -1 for a school whose counter
// refused the increment (its requests fail closed; their usage is recorded all the same);
// LATE and Redis's time when run past its deadline (usage recorded, no window counted); or
// one number, NOT_APPLIED, VOIDED or READ_ONLY, for the whole call.
const CONSUME = `
local t = redis.call('TIME')
local clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local late = tonumber(ARGV[5]) > 0 and clock > tonumber(ARGV[5])
local function place() ${PLACE} end
local placed = place()
if placed ~= 0 then return {placed} end
local window, day, now = ARGV[2], ARGV[3], ARGV[4]
local out = {clock}
local a = 6
for i = 3, #KEYS do
  local keys = tonumber(ARGV[a + 1])
  if not late then
    local n = redis.pcall('INCRBY', KEYS[i], ARGV[a])
    if type(n) == 'number' then
      local ttl = redis.call('PTTL', KEYS[i])
      if ttl < 0 then
        redis.call('PEXPIRE', KEYS[i], window)
        ttl = tonumber(window)
      end
      out[#out + 1] = n
      out[#out + 1] = ttl
    else
      out[#out + 1] = -1
      out[#out + 1] = -1
    end
  end
  for j = a + 2, a + 2 * keys, 2 do
    redis.call('HINCRBY', KEYS[1], 'c|' .. ARGV[j] .. '|' .. day, ARGV[j + 1])
    redis.call('HSET', KEYS[1], 't|' .. ARGV[j], now)
  end
  a = a + 2 + 2 * keys
end
if late then return {${LATE}, clock} end
return out
`;

// A request's usage without a rate-limit check (402, 403): KEYS[1] the usage hash, KEYS[2]
// and ARGV[1] the stream and place (PLACE), ARGV[2..]: the count's field, the last use's
// field, now. KEYS[3], when given: a school's counter, read, not counted. Returns 1 (or
// NOT_APPLIED, VOIDED or READ_ONLY), then the counter's value and its ms left (0, -2 when it has none).
const RECORD = `
local window = {0, -2}
if KEYS[3] then
  local n = redis.pcall('GET', KEYS[3])
  if type(n) == 'string' then window = {tonumber(n) or 0, redis.call('PTTL', KEYS[3])} end
end
local function place() ${PLACE} end
local placed = place()
if placed ~= 0 then return {placed, window[1], window[2]} end
redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
return {1, window[1], window[2]}
`;

// Settles a stream (ledger.ts): returns its last applied place and voids every place up
// to ARGV[1] not applied yet, so none of them applies later.
const SETTLE = `
local last = tonumber(redis.call('HGET', KEYS[1], 'last') or 0)
local upTo = tonumber(ARGV[1])
if upTo > last and upTo > tonumber(redis.call('HGET', KEYS[1], 'void') or 0) then
  redis.call('HSET', KEYS[1], 'void', upTo)
  redis.call('PEXPIRE', KEYS[1], ${STREAM_KEPT_MS})
end
return last
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

// The readiness probe: a write, by a script, as every check is.
const PROBE = `return redis.call('SET', KEYS[1], '1', 'PX', 60000)`;

type ConsumeFn = (keyCount: number, ...keysThenArgs: (string | number)[]) => Promise<number[]>;
type RecordFn = (keyCount: number, ...keysThenArgs: (string | number)[]) => Promise<number[]>;
type SettleFn = (stream: string, upTo: number) => Promise<number>;
type ProbeFn = (key: string) => Promise<string>;
type ClaimFn = (pending: string, claimed: string, batch: string, id: string, leaseMs: number) => Promise<string[]>;

/** A school's checks asked for in one turn, in the order they came, and its keys' requests among them. */
interface SchoolChecks {
  waiting: { limit: number; resolve(decision: RateLimitDecision): void; reject(err: unknown): void }[];
  keys: Map<string, number>;
}

/** Schools per script call at most; more in one turn go out in further calls at once. */
const MAX_SCHOOLS_PER_CALL = 500;
/** How often the settle of calls whose answer was lost is tried again while Redis does not answer. */
const SETTLE_RETRY_MS = 500;

/** Counters in Redis, shared by every API instance. Fails closed within `timeoutMs`. */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis & { sdConsume: ConsumeFn; sdRecord: RecordFn; sdClaim: ClaimFn; sdSettle: SettleFn; sdProbe: ProbeFn };
  /** Which calls whose answer was lost Redis applied; counts the usage of those it did not. */
  private readonly ledger = new CallLedger(
    () => this.keys.stream(randomUUID()),
    async (stream, upTo) => {
      await this.whenReady();
      return this.timed(this.redis.sdSettle(stream, upTo));
    },
    SETTLE_RETRY_MS,
  );
  /** The database's keys, once shareUsage named it. */
  private keys = keysOf('none');
  /** Shared by every request that arrives while the connection is (re)established. */
  private connecting: Promise<void> | null = null;
  /** What Redis or the connection last said while not ready (NOAUTH, a refused connection): the cause a wait for it gives. */
  private connectionError: Error | null = null;
  /** The checks asked for in this turn of the event loop, by school: sent together at its end. */
  private asked = new Map<string, SchoolChecks>();
  private scheduled = false;
  /** Connections dropped for a command timeout or a replica's refusal (once each: ioredis closes a socket in steps). */
  private readonly dropped = new WeakSet<object>();
  /** When a connection was last dropped for a replica's refusal (performance.now()). */
  private readOnlyDroppedAt = -Infinity;
  /** Script calls sent and not answered yet. */
  private sent = 0;
  private readonly clock = new RedisClock();

  get checking(): boolean {
    return this.sent > 0;
  }

  /** The client's own backstop on a command's answer (see the constructor). */
  private get commandTimeoutMs(): number {
    return Math.max(4 * this.timeoutMs, 2000);
  }

  private readonly timeoutMs: number;

  constructor(url: string, timeoutMs: number) {
    this.timeoutMs = timeoutMs;
    // Loaded when Redis is configured: a process on the in-memory limiter never loads the client.
    const { Redis: Client } = createRequire(import.meta.url)('ioredis') as typeof IORedis;
    const redis = new Client(url, {
      // Fail fast instead of queueing while disconnected: the request gets 503 at once.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // A backstop only: each call is given up after `timeoutMs` by `timed`, which does not
      // take a busy server for a slow Redis; this one releases the client's own waiting command.
      commandTimeout: this.commandTimeoutMs,
      connectTimeout: Math.max(timeoutMs, 1000),
      // Keep reconnecting forever, so service returns on its own when Redis does.
      retryStrategy: (times) => Math.min(times * 100, 1000),
      // A command refused by a replica (the probe's write, a claim): reconnect, as for a script's READ_ONLY above.
      reconnectOnError: (err) => readOnly(err) && this.readOnlyReconnectDue(),
      lazyConnect: false,
    });
    redis.on('error', (err: Error) => {
      this.connectionError = err;
    });
    redis.on('ready', () => {
      this.connectionError = null;
    });
    // The number of keys varies (one counter per school of the turn): given with each call.
    redis.defineCommand('sdConsume', { lua: CONSUME });
    redis.defineCommand('sdRecord', { lua: RECORD });
    redis.defineCommand('sdClaim', { numberOfKeys: 3, lua: CLAIM });
    redis.defineCommand('sdSettle', { numberOfKeys: 1, lua: SETTLE });
    redis.defineCommand('sdProbe', { numberOfKeys: 1, lua: PROBE });
    this.redis = redis as Redis & { sdConsume: ConsumeFn; sdRecord: RecordFn; sdClaim: ClaimFn; sdSettle: SettleFn; sdProbe: ProbeFn };
  }

  readonly sharesUsage = true;
  shareUsage(databaseId: string, unrecorded: Unrecorded): SharedUsage {
    const queue = (this.keys = keysOf(databaseId));
    this.ledger.countInto(unrecorded);
    return {
      record: (keyId, schoolId) => this.record(keyId, schoolId),
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
      close: () => this.ledger.close(this.commandTimeoutMs + this.timeoutMs),
    };
  }

  private async record(keyId: string, schoolId?: string): Promise<LimitWindow | null> {
    const now = Date.now();
    const usage = new Map([[keyId, 1]]);
    const send = (stream: string, seq: number) => {
      const args = [`c|${keyId}|${utcDay(now)}`, `t|${keyId}`, now];
      return schoolId === undefined
        ? this.redis.sdRecord(2, this.keys.pending, stream, seq, ...args)
        : this.redis.sdRecord(3, this.keys.pending, stream, this.keys.counter(schoolId), seq, ...args);
    };
    const reply = await this.timed(this.recording(usage, now, send, (r) => appliedNothing(r[0])));
    if (!Array.isArray(reply) || reply[0] !== 1) throw new RateLimiterUnavailable(`rate-limit service refused the record: ${Array.isArray(reply) ? refusedBecause(reply[0]) : 'an unexpected reply'}`);
    return schoolId === undefined ? null : { count: reply[1] ?? 0, msLeft: reply[2] ?? 0 };
  }

  /**
   * Sends a usage-recording script call (`send`, given its stream and place) once connected,
   * and has its usage accounted for whatever becomes of it: the usage of a call never sent,
   * refused by Redis with an error (`BUSY`, `NOPERM` ...: not run) or whose writes Redis
   * refused (`refused` of its reply) is counted by this process, and a call whose reply is
   * lost is settled later (ledger.ts). A connection silent past the client's command timeout
   * is dropped: its calls are settled, and later ones go out on a new connection, or fail at
   * once while there is none.
   */
  private async recording<T>(usage: CallUsage, at: number, send: (stream: string, seq: number) => Promise<T>, refused: (reply: T) => boolean): Promise<T> {
    try {
      await this.whenReady();
    } catch (err) {
      this.ledger.notApplied(usage, at);
      throw err;
    }
    const connection = this.redis.stream;
    const { stream, seq } = this.ledger.place(connection);
    const reply = send(stream.key, seq);
    const applied = reply.then(
      (answer) => {
        if (readOnly(answer)) this.dropReadOnly(connection);
        return !refused(answer);
      },
      (error: unknown) => {
        if (error instanceof Error && error.name === 'ReplyError') return false;
        if (error instanceof Error && error.message === 'Command timed out' && !this.dropped.has(connection)) {
          this.dropped.add(connection);
          this.redis.disconnect(true);
        }
        throw error;
      },
    );
    this.ledger.follow(stream, seq, usage, at, applied);
    return reply;
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
    return this.timed(this.connecting, timeoutMs, 'rate-limit service not connected').catch((err: unknown) => {
      throw this.connectionError === null ? err : new Error((err as Error).message, { cause: this.connectionError });
    });
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

  /** With Redis, a school's window comes with the record of the request's usage (record). */
  peek(): null {
    return null;
  }

  private async check(schools: [string, SchoolChecks][]): Promise<void> {
    let reply: number[];
    const now = Date.now();
    const giveUpAt = now + this.timeoutMs;
    let sentAt = now;
    this.sent += 1;
    try {
      const usage = new Map<string, number>();
      const keys: string[] = [this.keys.pending, ''];
      const args: (string | number)[] = [0, WINDOW_SECONDS * 1000, utcDay(now), now, 0];
      for (const [schoolId, school] of schools) {
        keys.push(this.keys.counter(schoolId));
        args.push(school.waiting.length, school.keys.size);
        for (const [keyId, n] of school.keys) {
          args.push(keyId, n);
          usage.set(keyId, (usage.get(keyId) ?? 0) + n);
        }
      }
      const send = (stream: string, seq: number) => {
        keys[1] = stream;
        args[0] = seq;
        sentAt = Date.now();
        args[4] = this.clock.deadline(giveUpAt);
        return this.redis.sdConsume(keys.length, ...keys, ...args);
      };
      reply = await this.timed(this.recording(usage, now, send, wholeCallRefused));
    } catch (err) {
      failAll(schools, new RateLimiterUnavailable('rate-limit service did not answer', { cause: err }));
      return;
    } finally {
      this.sent -= 1;
    }
    if (Array.isArray(reply) && reply[0] === LATE && Number.isSafeInteger(reply[1])) {
      // Still awaited here, yet run past its deadline there: Redis was slow, or the bound is
      // wrong (a clock was stepped). Its sample is a valid bound either way, and a tighter
      // one replaces it at the next answer: were the bound left, a loop too busy to read
      // answers before their give-up moment would fail every check.
      this.clock.reset(sentAt, reply[1]!);
      failAll(schools, new RateLimiterUnavailable('rate-limit service ran the count after its deadline'));
      return;
    }
    if (wholeCallRefused(reply)) {
      failAll(schools, new RateLimiterUnavailable(`rate-limit service refused the count: ${refusedBecause(reply[0])}`));
      return;
    }
    if (!Array.isArray(reply) || reply.length !== 1 + 2 * schools.length || !reply.every(Number.isSafeInteger)) {
      // A reply of the wrong shape means the connection can no longer be trusted to pair
      // replies with commands (e.g. after timeouts on a slow link): fail closed and start
      // a fresh connection.
      this.redis.disconnect(true);
      failAll(schools, new RateLimiterUnavailable('rate-limit service gave an unexpected reply'));
      return;
    }
    this.clock.sample(sentAt, reply[0]!);
    schools.forEach(([, school], i) => {
      const count = reply[1 + 2 * i]!;
      const msLeft = reply[2 + 2 * i]!;
      if (count < 0) {
        const failed = new RateLimiterUnavailable("rate-limit service refused the count: the school's counter in Redis holds another type");
        for (const w of school.waiting) w.reject(failed);
        return;
      }
      // The school's requests of this call are the last `waiting.length` of its count, in the order they came.
      const first = count - school.waiting.length + 1;
      school.waiting.forEach((w, j) => w.resolve(decide(first + j, w.limit, msLeft)));
    });
  }

  /** Drops `connection` after a replica refused a write on it (see readOnlyReconnectDue). */
  private dropReadOnly(connection: object): void {
    if (this.dropped.has(connection) || !this.readOnlyReconnectDue()) return;
    this.dropped.add(connection);
    this.redis.disconnect(true);
  }

  /** Whether a reconnect for a replica's refusal may be made now: one a READ_ONLY_RECONNECT_MS at most, whatever refused. */
  private readOnlyReconnectDue(): boolean {
    const now = performance.now();
    if (now - this.readOnlyDroppedAt < READ_ONLY_RECONNECT_MS) return false;
    this.readOnlyDroppedAt = now;
    return true;
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
   * Whether Redis runs a script that writes now, as every check needs (a PING is answered by
   * a Redis out of memory that refuses writes, or by one whose user may not run scripts);
   * like a request, waits for a connection still being made.
   */
  async ping(): Promise<boolean> {
    try {
      await this.whenReady();
      return (await this.timed(this.redis.sdProbe(this.keys.readyProbe))) === 'OK';
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

/** Refuses every check of `schools`. */
function failAll(schools: [string, SchoolChecks][], failed: RateLimiterUnavailable): void {
  for (const [, school] of schools) for (const w of school.waiting) w.reject(failed);
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
