/**
 * Rate limits per school on both limiter backends (memory, and Redis when REDIS_URL
 * is set), through the real app; and the fail-closed behaviour against a private
 * redis-server that is stopped, frozen and restarted during the test; and the checks of one
 * turn sent to Redis together, as exact as one by one. Restarts under
 * concurrent load, and slowness and blackholes through a proxy: test/faults/redis.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MemoryRateLimiter } from '../../src/access/ratelimit/memory.js';
import { RedisRateLimiter } from '../../src/access/ratelimit/redis.js';
import { RateLimiterUnavailable, type RateLimiter } from '../../src/access/ratelimit/index.js';
import type { Redis } from 'ioredis';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { privateLimiter, PrivateRedis, REDIS_ONLY } from '../helpers/redis.js';
import { createTestStore } from '../helpers/store.js';
import { randomBytes } from 'node:crypto';

const fresh = (tag: string) => `rl_${tag}_${randomBytes(5).toString('hex')}`;

async function schoolWithKeys(t: TestApp, plan: 'Profi' | 'VIP', keys = 1): Promise<{ id: string; keys: string[] }> {
  const created = await createSchool(t.store.db, { name: 'Rate', plan, id: fresh(plan) });
  assert.ok(created.ok);
  const values: string[] = [];
  for (let i = 0; i < keys; i++) {
    const k = await createKey(t.store.db, created.value.id, `k${i}`);
    assert.ok(k.ok);
    values.push(k.value.key);
  }
  return { id: created.value.id, keys: values };
}

function limiterContract(name: string, make: () => Promise<{ limiter: RateLimiter; done: () => Promise<void> }>) {
  describe(`${name} limiter`, () => {
    let limiter: RateLimiter;
    let done: () => Promise<void>;
    before(async () => ({ limiter, done } = await make()));
    after(() => done());

    it('lets the first N requests of a window pass and refuses the rest', async () => {
      const school = fresh('unit');
      const decisions = [];
      for (let i = 0; i < 6; i++) decisions.push(await limiter.consume(school, 5));
      assert.deepEqual(
        decisions.map((d) => d.allowed),
        [true, true, true, true, true, false],
      );
      assert.deepEqual(
        decisions.map((d) => d.remaining),
        [4, 3, 2, 1, 0, 0],
      );
      for (const d of decisions) assert.ok(d.resetSeconds >= 1 && d.resetSeconds <= 60, String(d.resetSeconds));
    });

    it('keeps one budget per school', async () => {
      const [a, b] = [fresh('a'), fresh('b')];
      for (let i = 0; i < 3; i++) await limiter.consume(a, 3);
      assert.equal((await limiter.consume(a, 3)).allowed, false);
      assert.equal((await limiter.consume(b, 3)).allowed, true);
    });

    it('is exact under concurrent requests', async () => {
      const school = fresh('burst');
      const results = await Promise.all(Array.from({ length: 50 }, async () => limiter.consume(school, 20)));
      assert.equal(results.filter((r) => r.allowed).length, 20);
    });
  });
}

limiterContract('memory', () => {
  const limiter = new MemoryRateLimiter();
  return Promise.resolve({ limiter, done: () => limiter.close() });
});

describe('memory limiter windows', () => {
  it('starts a new window with the first request after the previous one ended', async () => {
    // It answers at once (no promise): the access check decides without waiting on it.
    let now = 1_000_000;
    const limiter = new MemoryRateLimiter(() => now);
    assert.equal(limiter.consume('s', 1).allowed, true);
    now += 59_000;
    const refused = limiter.consume('s', 1);
    assert.equal(refused.allowed, false);
    assert.equal(refused.resetSeconds, 1);
    now += 1_000;
    assert.equal(limiter.consume('s', 1).allowed, true);
    now += 30_000;
    assert.equal(limiter.consume('s', 1).allowed, false, 'the new window began 30 s ago');
    // A window begun at a time whose end, less itself, rounds to a hair over 60,000 ms.
    now = 122_391.529_819_965_64;
    assert.ok(now + 60_000 - now > 60_000);
    assert.equal(limiter.consume('t', 1).resetSeconds, 60, 'never more seconds than the window has');
    await limiter.close();
  });

  it('by default ends a window on the process\'s own clock, which a wall clock set back does not stretch', async () => {
    const wallClock = Date.now;
    let wall = wallClock();
    Date.now = () => wall;
    const limiter = new MemoryRateLimiter();
    try {
      assert.equal(limiter.consume('s', 5).allowed, true);
      wall -= 3_600_000;
      const decision = limiter.consume('s', 5);
      assert.equal(decision.remaining, 3);
      assert.ok(decision.resetSeconds <= 60, `${decision.resetSeconds} s to the window's end`);
    } finally {
      Date.now = wallClock;
      await limiter.close();
    }
  });
});

if (process.env.REDIS_URL) {
  limiterContract('redis', () => {
    const limiter = new RedisRateLimiter(process.env.REDIS_URL!, 250);
    return limiter.ready(5000).then(() => ({ limiter, done: () => limiter.close() }));
  });
}

describe('plan limits through the API', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ config: { rateLimitProfi: 5, rateLimitVip: 8 } });
  });
  after(() => t.close());

  it('429 with Retry-After: 60 past the limit, shared by all keys of the school', async () => {
    const school = await schoolWithKeys(t, 'Profi', 2);
    const statuses = [];
    for (let i = 0; i < 6; i++) {
      const res = await t.request('/api/public/v1/students', { key: school.keys[i % 2] });
      statuses.push(res.status);
      assert.equal(res.headers['ratelimit-policy'], '"default";q=5;w=60');
      if (res.status === 429) {
        assert.equal(res.headers['retry-after'], '60');
        assert.match(String(res.headers.ratelimit), /^"default";r=0;t=\d+$/);
        const body = res.json() as { code: string; status: number };
        assert.equal(body.code, 'rate_limited');
      }
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
  });

  it('VIP gets its own (configured) limit, and other schools are not affected', async () => {
    const vip = await schoolWithKeys(t, 'VIP');
    const other = await schoolWithKeys(t, 'Profi');
    const statuses = [];
    for (let i = 0; i < 9; i++) statuses.push((await t.request('/api/public/v1/students', { key: vip.keys[0] })).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 429]);
    assert.equal((await t.request('/api/public/v1/students', { key: other.keys[0] })).status, 200);
  });

  it('counts the requests the limiter refused on the key card as well', async () => {
    const school = await schoolWithKeys(t, 'Profi');
    for (let i = 0; i < 7; i++) await t.request('/api/public/v1/vehicles', { key: school.keys[0] });
    const deadline = Date.now() + 5000;
    let count = 0;
    while (Date.now() < deadline) {
      const row = await t.store.db.selectFrom('api_keys').select('request_count').where('school_id', '=', school.id).executeTakeFirstOrThrow();
      count = Number(row.request_count);
      if (count === 7) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(count, 7);
  });
});

describe('Redis: the checks of one turn in one call', { skip: REDIS_ONLY }, () => {
  let admin: Redis;
  let limiter: RedisRateLimiter;
  let close: () => Promise<void>;

  let redisUrl: string;

  before(async () => {
    let redis: PrivateRedis;
    ({ admin, limiter, close, redis } = await privateLimiter(2000));
    redisUrl = redis.url;
    await limiter.consume(fresh('warm'), 1);
  });
  after(() => close());

  const scriptCalls = async () => {
    const stats = await admin.info('commandstats');
    return [...stats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
  };

  it('gives each request its own place in its school\'s count and records each key\'s usage, in one script call', async () => {
    const shared = limiter.shareUsage('turn-test', () => undefined);
    const [a, b] = [fresh('a'), fresh('b')];
    const before = await scriptCalls();
    const asked = [
      ...Array.from({ length: 30 }, (_, i) => limiter.consume(a, 20, i % 3 === 0 ? 'key-a1' : 'key-a2')),
      ...Array.from({ length: 10 }, () => limiter.consume(b, 5, 'key-b')),
    ];
    const decisions = await Promise.all(asked);
    assert.equal((await scriptCalls()) - before, 1);
    assert.deepEqual(
      decisions.slice(0, 30).map((d) => d.remaining),
      [...Array.from({ length: 20 }, (_, i) => 19 - i), ...Array.from({ length: 10 }, () => 0)],
    );
    assert.deepEqual(
      decisions.slice(0, 30).map((d) => d.allowed),
      Array.from({ length: 30 }, (_, i) => i < 20),
    );
    assert.deepEqual(
      decisions.slice(30).map((d) => d.allowed),
      Array.from({ length: 10 }, (_, i) => i < 5),
    );
    const ids = await shared.claim('batch-1', 5000);
    const usage = new Map<string, number>();
    for (const id of ids) for (const [key, u] of await shared.read(id)) usage.set(key, [...u.days.values()].reduce((x, y) => x + y, 0));
    assert.deepEqual(Object.fromEntries(usage), { 'key-a1': 10, 'key-a2': 20, 'key-b': 10 });
  });

  it('fails closed only the school whose counter refuses the count', async () => {
    limiter.shareUsage('turn-test', () => undefined);
    const [bad, good] = [fresh('bad'), fresh('good')];
    await admin.hset(`school-data:rl:{turn-test}:${bad}`, 'not', 'a counter');
    const [refused, counted] = await Promise.allSettled([limiter.consume(bad, 10), limiter.consume(good, 10)]);
    assert.equal(refused.status, 'rejected');
    assert.ok(refused.reason instanceof RateLimiterUnavailable);
    assert.equal(counted.status, 'fulfilled');
    assert.equal((counted as PromiseFulfilledResult<{ remaining: number }>).value.remaining, 9);
  });

  it('takes a reply that arrived while a long turn ran as the answer, not as a timeout', async () => {
    const limiter = new RedisRateLimiter(redisUrl, 100);
    try {
      limiter.shareUsage('busy-turn', () => undefined);
      assert.ok(await limiter.ready(2000));
      const decision = limiter.consume(fresh('busy'), 10);
      // Runs once the check is sent (the same phase of the loop): the server's work holds the
      // event loop past the timeout while Redis answers at once.
      setImmediate(() => {
        const until = Date.now() + 300;
        while (Date.now() < until);
      });
      assert.equal((await decision).allowed, true);
    } finally {
      await limiter.close();
    }
  });

  it('keeps the counts of two databases sharing one Redis apart', async () => {
    const other = new RedisRateLimiter(redisUrl, 2000);
    try {
      limiter.shareUsage('database-one', () => undefined);
      other.shareUsage('database-two', () => undefined);
      const school = fresh('shared-id');
      const ours = await Promise.all(Array.from({ length: 3 }, () => limiter.consume(school, 3)));
      const theirs = await other.consume(school, 3);
      assert.deepEqual(ours.map((d) => d.allowed), [true, true, true]);
      assert.deepEqual([theirs.allowed, theirs.remaining], [true, 2], 'another database\'s school of the same id has its own budget');
      assert.equal((await limiter.consume(school, 3)).allowed, false);
    } finally {
      await other.close();
    }
  });
});

describe('fail closed when Redis is down, slow or restarted', { skip: REDIS_ONLY }, () => {
  let redis: PrivateRedis;
  let t: TestApp;
  let key: string;

  before(async () => {
    redis = await PrivateRedis.start();
    const store = await createTestStore();
    t = await startTestApp({ store, limiter: new RedisRateLimiter(redis.url, 250) });
    key = (await schoolWithKeys(t, 'VIP')).keys[0]!;
  });
  after(async () => {
    redis.resume();
    await t.close();
    await t.store.close();
    await redis.stop();
  });

  const timed = async () => {
    const started = Date.now();
    const res = await t.request('/api/public/v1/students', { key });
    return { res, ms: Date.now() - started };
  };

  it('serves while Redis answers', async () => {
    assert.equal((await timed()).res.status, 200);
  });

  it('503 rate_limit_unavailable at once while Redis is stopped, no data served', async () => {
    await redis.stop();
    for (let i = 0; i < 3; i++) {
      const { res, ms } = await timed();
      assert.equal(res.status, 503);
      const body = res.json() as { code: string; items?: unknown };
      assert.equal(body.code, 'rate_limit_unavailable');
      assert.equal(body.items, undefined);
      assert.ok(res.headers['retry-after']);
      assert.ok(ms < 2000, `took ${ms} ms`);
    }
  });

  it('answers normally again once Redis is back, without a restart', async () => {
    await redis.start();
    const deadline = Date.now() + 5000;
    let status = 0;
    while (Date.now() < deadline) {
      status = (await timed()).res.status;
      if (status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, 200);
  });

  it('503 within the timeout while Redis is frozen, normal after it thaws', async () => {
    redis.pause();
    try {
      const { res, ms } = await timed();
      assert.equal(res.status, 503);
      assert.ok(ms < 1500, `took ${ms} ms`);
    } finally {
      redis.resume();
    }
    const deadline = Date.now() + 5000;
    let status = 0;
    while (Date.now() < deadline) {
      status = (await timed()).res.status;
      if (status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, 200);
  });
});
