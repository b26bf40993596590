/**
 * With the Redis limiter, the front begins an allowed-looking request's read in the turn its
 * rate-limit check is sent, and answers only once the decision is back: a refused request
 * gets its refusal and none of the data, and the reads begun early stop as soon as this
 * process has seen its school refused (a flood over the limit) or the limiter down.
 * The reads are counted on the real store's reader (they still run).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RedisRateLimiter } from '../../src/access/ratelimit/redis.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { ResponseCache } from '../../src/resources/cache.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { PrivateRedis, REDIS_ONLY } from '../helpers/redis.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

const STUDENTS = '/api/public/v1/students';

/** Counts the store's reads of the students list from now on. */
function countStudentReads(store: TestStore): { readonly count: number } {
  const reads = store.reads;
  const run = reads.run.bind(reads);
  const counter = { count: 0 };
  reads.run = <R>(sql: string, parameters: readonly unknown[]) => {
    if (/from "students"/.test(sql)) counter.count += 1;
    return run<R>(sql, parameters);
  };
  return counter;
}

async function schoolKey(t: TestApp, tag: string, plan: 'Profi' | 'VIP'): Promise<string> {
  const school = await createSchool(t.store.db, { name: 'Early', plan, id: `early_${tag}_${Date.now().toString(36)}` });
  assert.ok(school.ok);
  const key = await createKey(t.store.db, school.value.id, 'k');
  assert.ok(key.ok);
  return key.value.key;
}

describe('the read begun beside the rate-limit check', { skip: REDIS_ONLY }, () => {
  let redis: PrivateRedis;
  let store: TestStore;
  let t: TestApp;
  let reads: { readonly count: number };

  before(async () => {
    redis = await PrivateRedis.start();
    store = await createTestStore();
    // No stored answers: every allowed request reads.
    t = await startTestApp({ store, limiter: new RedisRateLimiter(redis.url, 250), config: { rateLimitProfi: 5, rateLimitVip: 1000, responseCacheMb: 0 } });
    reads = countStudentReads(store);
  });
  after(async () => {
    redis.resume();
    await t.close();
    await store.close();
    await redis.stop();
  });

  it('answers a flood over the limit with 429 and no data, reading for none but the first refused', async () => {
    const key = await schoolKey(t, 'flood', 'Profi');
    const before = reads.count;
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await t.request(STUDENTS, { key });
      statuses.push(res.status);
      if (res.status === 429) assert.equal((res.json() as { items?: unknown }).items, undefined);
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429, 429, 429, 429]);
    // The sixth request's read was begun before its refusal came back; after it, none.
    assert.equal(reads.count - before, 6);
  });

  it('gives 503 and no data while the limiter does not answer, reading early only while no check is on its way and it is not known down', async () => {
    // The checks sent while Redis is stopped are counted when it resumes: a limit far off.
    const key = await schoolKey(t, 'frozen', 'VIP');
    assert.equal((await t.request(STUDENTS, { key })).status, 200);
    redis.pause();
    try {
      const before = reads.count;
      // The second request comes while the first one's check is still waiting for Redis.
      const first = t.request(STUDENTS, { key });
      await new Promise((r) => setTimeout(r, 50));
      const second = t.request(STUDENTS, { key });
      const answers = [await first, await second];
      for (let i = 0; i < 2; i++) answers.push(await t.request(STUDENTS, { key }));
      for (const res of answers) {
        assert.equal(res.status, 503);
        assert.equal((res.json() as { code: string }).code, 'rate_limit_unavailable');
      }
      assert.equal(reads.count - before, 1, 'only the first request\'s read was begun early');
    } finally {
      redis.resume();
    }
    const deadline = Date.now() + 5000;
    let status = 0;
    while (Date.now() < deadline && status !== 200) {
      status = (await t.request(STUDENTS, { key })).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, 200);
  });
});

describe('the read begun beside the rate-limit check, with stored answers', { skip: REDIS_ONLY }, () => {
  let redis: PrivateRedis;
  let store: TestStore;
  let t: TestApp;
  let reads: { readonly count: number };
  const cache = new ResponseCache(1 << 20);

  before(async () => {
    redis = await PrivateRedis.start();
    store = await createTestStore();
    t = await startTestApp({ store, cache, limiter: new RedisRateLimiter(redis.url, 2000), config: { rateLimitVip: 1000 } });
    reads = countStudentReads(store);
  });
  after(async () => {
    await t.close();
    await store.close();
    await redis.stop();
  });

  it('counts the first request a miss and the next a hit, and reads once', async () => {
    const key = await schoolKey(t, 'stored', 'VIP');
    const before = { ...cache.lookups, reads: reads.count };
    const first = await t.request(STUDENTS, { key });
    assert.equal(first.status, 200);
    assert.deepEqual([cache.lookups.hits - before.hits, cache.lookups.misses - before.misses, reads.count - before.reads], [0, 1, 1]);
    const second = await t.request(STUDENTS, { key });
    assert.equal(second.text, first.text);
    assert.deepEqual([cache.lookups.hits - before.hits, cache.lookups.misses - before.misses, reads.count - before.reads], [1, 1, 1]);
  });
});
