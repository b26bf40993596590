/**
 * Redis that answers with an error (here: out of memory, so INCR is refused) is as
 * good as no Redis: the request fails closed with 503 rate_limit_unavailable, and the
 * readiness probe (a write) says it is not ready, though a PING is answered. Whatever
 * the failure, a request's usage counts once: in Redis, or given back to be counted in
 * the instance's memory.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RateLimiterUnavailable, type SharedUsage } from '../../src/access/ratelimit/index.js';
import { RedisRateLimiter } from '../../src/access/ratelimit/redis.js';
import { privateLimiter, REDIS_ONLY, type PrivateRedis } from '../helpers/redis.js';

describe('Redis answering with errors', { skip: REDIS_ONLY }, () => {
  let admin: Redis;
  let redis: PrivateRedis;
  let limiter: RedisRateLimiter;
  let close: () => Promise<void>;
  /** What the limiter gave back to be counted in memory: key id -> requests. */
  const unrecorded = new Map<string, number>();
  let shared: SharedUsage;

  before(async () => {
    ({ admin, redis, limiter, close } = await privateLimiter(250));
    shared = limiter.shareUsage('errors', (keyId, requests) => unrecorded.set(keyId, (unrecorded.get(keyId) ?? 0) + requests));
  });
  after(() => close());

  /** The requests of `keyId` waiting in Redis's usage hash. */
  async function inRedis(keyId: string): Promise<number> {
    const fields = await admin.hgetall('school-data:usage:{errors}:pending');
    return Object.entries(fields).reduce((n, [field, value]) => (field.startsWith(`c|${keyId}|`) ? n + Number(value) : n), 0);
  }

  it('fails closed while writes are refused, and recovers when they are accepted again', async () => {
    assert.equal((await limiter.consume('err-school', 10)).allowed, true);
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    await assert.rejects(limiter.consume('err-school-2', 10), RateLimiterUnavailable);
    // It still answers a PING: readiness asks for a write, as the checks do.
    assert.equal(await limiter.ping(), false);
    await admin.config('SET', 'maxmemory', '0');
    assert.equal((await limiter.consume('err-school-2', 10)).allowed, true);
    assert.equal(await limiter.ping(), true);
  });

  it('out of memory: a check and a record are refused, and their usage is given back to count here', async () => {
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    try {
      await assert.rejects(limiter.consume('oom-school', 10, 'oom-key'), RateLimiterUnavailable);
      await assert.rejects(shared.record('oom-key'), RateLimiterUnavailable);
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    assert.equal(unrecorded.get('oom-key'), 2);
    assert.equal(await inRedis('oom-key'), 0);
    await limiter.consume('oom-school', 10, 'oom-key');
    await shared.record('oom-key');
    assert.equal(unrecorded.get('oom-key'), 2);
    assert.equal(await inRedis('oom-key'), 2);
  });

  it("a school's counter that is not a number fails its requests closed, and their usage is in Redis", async () => {
    await admin.hset('school-data:rl:{errors}:broken-school', 'x', '1');
    await assert.rejects(limiter.consume('broken-school', 10, 'broken-key'), RateLimiterUnavailable);
    assert.equal((await limiter.consume('whole-school', 10, 'whole-key')).allowed, true);
    assert.equal(await inRedis('broken-key'), 1);
    assert.equal(unrecorded.get('broken-key'), undefined);
  });

  it('a check Redis refuses with an error (BUSY: another script runs long) is counted here, not taken for applied by a later one', async () => {
    await admin.config('SET', 'busy-reply-threshold', '100');
    const blocker = admin.duplicate();
    try {
      // Redis runs nothing else for 1.5 s, and answers BUSY after 100 ms.
      const long = blocker.eval("local t = redis.call('TIME') while true do local n = redis.call('TIME') if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 1500000 then break end end return 1", 0);
      await new Promise((r) => setTimeout(r, 50));
      await assert.rejects(limiter.consume('busy-school', 10, 'busy-key'), RateLimiterUnavailable);
      await long;
      // Later calls on the same connection run, and their place is above the refused one's.
      assert.equal((await limiter.consume('busy-school', 10, 'busy-key')).allowed, true);
      await new Promise((r) => setTimeout(r, 700));
      assert.equal(unrecorded.get('busy-key'), 1);
      assert.equal(await inRedis('busy-key'), 1);
    } finally {
      blocker.disconnect();
      await admin.config('SET', 'busy-reply-threshold', '5000');
    }
  });

  it('a user that may not run scripts: checks fail closed and count here, and readiness says so', async () => {
    await admin.call('ACL', 'SETUSER', 'noscripts', 'on', '>secret', '~*', '+@all', '-eval', '-evalsha');
    const restricted = new RedisRateLimiter(`redis://noscripts:secret@127.0.0.1:${redis.port}`, 250);
    const given = new Map<string, number>();
    restricted.shareUsage('noscripts', (keyId, requests) => given.set(keyId, (given.get(keyId) ?? 0) + requests));
    try {
      await assert.rejects(restricted.consume('ns-school', 10, 'ns-key'), RateLimiterUnavailable);
      assert.equal(given.get('ns-key'), 1);
      assert.equal(await restricted.ping(), false);
    } finally {
      await restricted.close();
    }
  });

  it('a check sent to a frozen Redis and never answered is counted here at shutdown', async () => {
    const { limiter: frozenLimiter, redis: frozen, close: closeFrozen } = await privateLimiter(250);
    const given = new Map<string, number>();
    const frozenShared = frozenLimiter.shareUsage('frozen', (keyId, requests) => given.set(keyId, (given.get(keyId) ?? 0) + requests));
    try {
      assert.equal((await frozenLimiter.consume('frozen-school', 10, 'frozen-key')).allowed, true);
      frozen.pause();
      await assert.rejects(frozenLimiter.consume('frozen-school', 10, 'frozen-key'), RateLimiterUnavailable);
      assert.equal(given.get('frozen-key'), undefined, 'not counted while its fate is unknown');
      await frozenShared.close();
      assert.equal(given.get('frozen-key'), 1);
    } finally {
      frozen.resume();
      await closeFrozen();
    }
  });

  it('a clock stepped back here: the check Redis runs past its wrong deadline fails closed once, its usage recorded, then checks count again', async () => {
    assert.equal((await limiter.consume('step-school', 10, 'step-key')).allowed, true);
    const realNow = Date.now;
    // Ten seconds back: the deadlines sent are ten seconds early in Redis's clock.
    Date.now = () => realNow() - 10_000;
    try {
      await assert.rejects(limiter.consume('step-school', 10, 'step-key'), /after its deadline/);
      const after = await limiter.consume('step-school', 10, 'step-key');
      assert.equal(after.allowed, true);
      // The request refused counts in no window; both answered count on the key.
      assert.equal(Number(await admin.get('school-data:rl:{errors}:step-school')), 2);
      assert.equal(await inRedis('step-key'), 3);
    } finally {
      Date.now = realNow;
    }
  });

  it('a clock stepped back while the loop is too busy to read answers before their give-up moment: one refusal, then checks count again', async () => {
    assert.equal((await limiter.consume('slow-turn-school', 10, 'slow-turn-key')).allowed, true);
    // A turn of other work right after the check is sent: its answer is read after the timeout, and still taken.
    const busyTurn = () =>
      setImmediate(() => {
        const end = performance.now() + 400;
        while (performance.now() < end);
      });
    const realNow = Date.now;
    Date.now = () => realNow() - 10_000;
    try {
      const first = limiter.consume('slow-turn-school', 10, 'slow-turn-key');
      busyTurn();
      await assert.rejects(first, /after its deadline/);
      const second = limiter.consume('slow-turn-school', 10, 'slow-turn-key');
      busyTurn();
      assert.equal((await second).allowed, true);
      assert.equal(Number(await admin.get('school-data:rl:{errors}:slow-turn-school')), 2);
    } finally {
      Date.now = realNow;
    }
  });
});
