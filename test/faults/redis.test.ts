/**
 * The Redis rate limiter failing under load, through a private redis-server behind a
 * fault-injecting proxy: restarted while concurrent clients keep asking, slowed past
 * its timeout, and blackholed. While it is down every answer is 503
 * rate_limit_unavailable (fail closed, never data), no request hangs, the readiness
 * check names the rate limiter, and answers are normal again as soon as it is back; the
 * requests refused meanwhile count on their keys' cards once, and in no rate-limit window.
 * @waits
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import { RedisRateLimiter } from '../../src/access/ratelimit/redis.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool, setPlan } from '../../src/management/schools.js';
import { causeOf } from '../../src/ops/dependency.js';
import { opsPlugin } from '../../src/ops/health.js';
import { ApiMetrics } from '../../src/ops/metrics.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { FaultProxy } from '../helpers/faultproxy.js';
import { withDeadline } from '../helpers/fuzz.js';
import { PrivateRedis, REDIS_ONLY } from '../helpers/redis.js';
import { seedWorld, type World } from '../helpers/world.js';

const REDIS_TIMEOUT_MS = 250;
// Waiting for the connection plus the command, each bounded by the timeout; the rest is
// slack for a loaded machine. A bound, not a measurement.
const ANSWER_BOUND_MS = 2000;

describe('Redis failing under load', { skip: REDIS_ONLY }, () => {
  let redis: PrivateRedis;
  let proxy: FaultProxy;
  let limiter: RedisRateLimiter;
  let t: TestApp;
  let w: World;
  const ops = Fastify();

  before(async () => {
    redis = await PrivateRedis.start();
    proxy = await FaultProxy.start({ host: '127.0.0.1', port: redis.port });
    limiter = new RedisRateLimiter(`redis://127.0.0.1:${proxy.address.port}`, REDIS_TIMEOUT_MS);
    t = await startTestApp({ limiter, config: { rateLimitVip: 10_000_000, rateLimitProfi: 10_000_000 } });
    w = await seedWorld(t.store.db);
    await ops.register(opsPlugin, { metrics: new ApiMetrics(), db: t.store.db, limiter, checkTimeoutMs: 1000 });
  });
  after(async () => {
    proxy.delayMs = 0;
    await proxy.setMode('forward');
    await t.close();
    await ops.close();
    await proxy.close();
    await redis.stop();
  });

  async function get() {
    const started = Date.now();
    const res = await withDeadline(t.request('/api/public/v1/students?limit=1', { key: w.a.key }), 10_000, 'a request');
    return { res, ms: Date.now() - started };
  }

  function assertFailsClosed(res: Awaited<ReturnType<typeof get>>['res']) {
    assert.equal(res.status, 503, res.text);
    const body = res.json() as { code: string; items?: unknown };
    assert.equal(body.code, 'rate_limit_unavailable');
    assert.equal(body.items, undefined);
  }

  /** Requests and readiness are normal again within 10 s (answers delayed before the path healed may still time out a check on a loaded machine). */
  async function assertRecovers() {
    const deadline = Date.now() + 10_000;
    let status = 0;
    let ready = 0;
    while (Date.now() < deadline) {
      status = (await get()).res.status;
      if (status === 200) ready = (await ops.inject('/readyz')).statusCode;
      if (status === 200 && ready === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, 200, 'requests did not recover');
    assert.equal(ready, 200, 'readiness did not recover');
  }

  it('restarted mid-load: every answer is 200 or 503 rate_limit_unavailable, none hangs, normal after', async () => {
    assert.equal((await get()).res.status, 200);
    const statuses: number[] = [];
    let slowest = 0;
    let stop = false;
    const clients = Array.from({ length: 6 }, async () => {
      try {
        while (!stop) {
          const { res, ms } = await get();
          statuses.push(res.status);
          slowest = Math.max(slowest, ms);
          if (res.status !== 200) assertFailsClosed(res);
        }
      } finally {
        // One client's failure ends them all, so none outlives the test.
        stop = true;
      }
    });
    await new Promise((r) => setTimeout(r, 400));
    await redis.stop();
    await new Promise((r) => setTimeout(r, 800));
    const ready = await ops.inject('/readyz');
    assert.equal(ready.statusCode, 503);
    assert.deepEqual(ready.json(), { status: 'not_ready', checks: { database: 'ok', rate_limiter: 'unavailable' } });
    await redis.start();
    await new Promise((r) => setTimeout(r, 1500));
    stop = true;
    await Promise.all(clients);
    assert.deepEqual([...new Set(statuses)].sort(), [200, 503], `statuses seen: ${[...new Set(statuses)].join(', ')}`);
    assert.ok(slowest < ANSWER_BOUND_MS, `slowest answer ${slowest} ms`);
    await assertRecovers();
  });

  it('slower than its timeout: 503 within the bound, normal once it is fast again', async () => {
    proxy.delayMs = 4 * REDIS_TIMEOUT_MS;
    try {
      for (let i = 0; i < 3; i++) {
        const { res, ms } = await get();
        assertFailsClosed(res);
        assert.ok(ms < ANSWER_BOUND_MS, `answered after ${ms} ms`);
      }
      assert.equal((await ops.inject('/readyz')).statusCode, 503);
    } finally {
      proxy.delayMs = 0;
    }
    await assertRecovers();
  });

  /**
   * A key's request count once nothing waits in the private Redis (a claim that timed out
   * there is taken over after its lease) and the count has held still for a second.
   */
  async function settledCount(keyId: string): Promise<number> {
    const read = async () => Number((await t.store.db.selectFrom('api_keys').select('request_count').where('id', '=', keyId).executeTakeFirstOrThrow()).request_count);
    const look = new Redis(redis.url);
    try {
      const waiting = async () => {
        const [claimed] = await look.keys('school-data:usage:*:claimed');
        return (await look.keys('school-data:usage:*:pending')).length + (claimed ? await look.zcard(claimed) : 0);
      };
      let last = -1;
      for (let i = 0; i < 60; i++) {
        const now = await read();
        if (now === last && (await waiting()) === 0) return now;
        last = now;
        await new Promise((r) => setTimeout(r, 1000));
      }
      return last;
    } finally {
      look.disconnect();
    }
  }

  /** A new key of a new school on `plan`: no usage of other tests on its card. */
  async function freshKey(plan: 'VIP' | 'Standart', name: string) {
    const school = await createSchool(t.store.db, { name, plan: 'VIP', timezone: 'Europe/Moscow' });
    assert.ok(school.ok);
    const created = await createKey(t.store.db, school.value.id, name);
    assert.ok(created.ok);
    if (plan !== 'VIP') assert.ok((await setPlan(t.store.db, school.value.id, plan)).ok);
    return { ...created.value, schoolId: school.value.id };
  }

  /** The requests counted in a school's current rate-limit window. */
  async function windowCount(schoolId: string): Promise<number> {
    const look = new Redis(redis.url);
    try {
      const [counter] = await look.keys(`school-data:rl:*:${schoolId}`);
      return counter === undefined ? 0 : Number(await look.get(counter));
    } finally {
      look.disconnect();
    }
  }

  // Each request counts once on its key's card, whatever became of the script call that
  // carried it: answered late (the 503 was sent at the timeout), lost with its connection,
  // dropped by the client after its command timeout (2 s here), or run by a Redis that was
  // frozen and carried on, after the instance had given the call up.
  const fates: [string, () => Promise<void>, () => Promise<void>][] = [
    // Answered a little after the last 503: a call Redis runs within its slack of the
    // instance giving it up (tens of ms) still counts in the window.
    ['answered after the timeout', () => proxy.setMode('blackhole'), async () => {
      await new Promise((r) => setTimeout(r, 200));
      await proxy.setMode('forward');
    }],
    ['held past the command timeout', () => proxy.setMode('blackhole'), async () => {
      await new Promise((r) => setTimeout(r, 3000));
      await proxy.setMode('forward');
    }],
    ['lost with the connection', () => proxy.setMode('blackhole'), async () => {
      proxy.cut();
      await proxy.setMode('forward');
    }],
    ['run by a frozen Redis once it carries on', () => Promise.resolve(redis.pause()), async () => {
      await new Promise((r) => setTimeout(r, 3000));
      redis.resume();
    }],
  ];
  for (const [fate, fault, heal] of fates) {
    it(`requests refused 503 and 402 while Redis is silent count once on their keys' cards and in no rate-limit window: their calls ${fate}`, async () => {
      // A key whose requests have a rate-limit check (CONSUME), and one refused 402 before it (RECORD).
      const keys = [await freshKey('VIP', `silent ${fate}`), await freshKey('Standart', `silent ${fate} 402`)];
      const ask = (key: string) => withDeadline(t.request('/api/public/v1/students?limit=1', { key }), 10_000, 'a request');
      // Answered through Redis before the fault, as a school's requests usually are.
      assert.equal((await ask(keys[0]!.key)).status, 200);
      let passed = 1;
      await fault();
      const sent = [1, 0];
      try {
        for (let i = 0; i < 3; i++) {
          const [checked, refused] = await Promise.all(keys.map((k) => ask(k.key)));
          assertFailsClosed(checked!);
          assert.ok(refused!.status === 402 || refused!.status === 503, refused!.text);
          sent[0]! += 1;
          sent[1]! += 1;
        }
      } finally {
        await heal();
      }
      // Until both are answered through Redis again: each request, passed or refused, counts once.
      const deadline = Date.now() + 15_000;
      for (;;) {
        const [checked, refused] = await Promise.all(keys.map((k) => ask(k.key)));
        sent[0]! += 1;
        sent[1]! += 1;
        if (checked!.status === 200) passed += 1;
        if (checked!.status === 200 && refused!.status === 402 && (await ops.inject('/readyz')).statusCode === 200) break;
        assert.ok(Date.now() < deadline, 'requests did not recover');
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.deepEqual([await settledCount(keys[0]!.id), await settledCount(keys[1]!.id)], sent);
      // The school's window holds the requests that passed: those refused 503 left the rest of its limit to later ones.
      assert.equal(await windowCount(keys[0]!.schoolId), passed);
    });
  }

  it('blackholed: 503 within the bound, normal once the path is open again', async () => {
    await proxy.setMode('blackhole');
    try {
      for (let i = 0; i < 3; i++) {
        const { res, ms } = await get();
        assertFailsClosed(res);
        assert.ok(ms < ANSWER_BOUND_MS, `answered after ${ms} ms`);
      }
    } finally {
      await proxy.setMode('forward');
    }
    await assertRecovers();
  });
});

describe('Redis that asks for a password it was not given', { skip: REDIS_ONLY }, () => {
  it('fails closed, and the cause names what Redis said (NOAUTH), not only that it is not connected', async () => {
    const redis = await PrivateRedis.start();
    const limiter = new RedisRateLimiter(redis.url, REDIS_TIMEOUT_MS);
    const admin = new Redis(redis.url);
    try {
      assert.equal((await limiter.consume('school-1', 100, 'key-1')).allowed, true);
      await admin.config('SET', 'requirepass', 'a-password-now');
      await admin.auth('a-password-now');
      await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      // Every check fails closed; once the client has tried to connect again, the cause says why.
      const causes: string[] = [];
      const deadline = Date.now() + 5000;
      while (!causes.some((c) => c.includes('NOAUTH')) && Date.now() < deadline) {
        await assert.rejects(limiter.consume('school-1', 100, 'key-1'), (err: Error) => err.name === 'RateLimiterUnavailable' && causes.push(causeOf(err)) > 0);
      }
      assert.ok(causes.some((c) => c.includes('NOAUTH')), causes.join('\n'));
    } finally {
      admin.disconnect();
      await limiter.close();
      await redis.stop();
    }
  });
});

describe('Redis failing over behind one address', { skip: REDIS_ONLY }, () => {
  it('fails closed while its node is a replica, and counts again once the address leads to the primary, with no restart', async () => {
    const [old, next] = await Promise.all([PrivateRedis.start(), PrivateRedis.start()]);
    const proxy = await FaultProxy.start({ host: '127.0.0.1', port: old.port });
    const limiter = new RedisRateLimiter(`redis://127.0.0.1:${proxy.address.port}`, REDIS_TIMEOUT_MS);
    const admin = new Redis(old.url);
    try {
      assert.equal((await limiter.consume('school-1', 100, 'key-1')).allowed, true);
      // The old primary is demoted: the client's connection still leads to it.
      await admin.replicaof('127.0.0.1', String(next.port));
      // The outage's line says why: a failover is told apart from an outage.
      await assert.rejects(limiter.consume('school-1', 100, 'key-1'), (err: Error) => err.name === 'RateLimiterUnavailable' && causeOf(err).includes('READONLY'));
      assert.equal(await limiter.ping(), false, 'not ready while no write is taken');
      // The address now leads to the new primary (DNS, a proxy, a managed service's endpoint).
      proxy.retarget({ host: '127.0.0.1', port: next.port });
      const deadline = Date.now() + 5000;
      for (;;) {
        const counted = await limiter.consume('school-1', 100, 'key-1').then(
          (d) => d.allowed,
          () => false,
        );
        if (counted && (await limiter.ping())) break;
        assert.ok(Date.now() < deadline, 'still refused 5 s after the address led to the primary');
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      admin.disconnect();
      await limiter.close();
      await proxy.close();
      await Promise.all([old.stop(), next.stop()]);
    }
  });
});
