/**
 * Redis that answers with an error (here: out of memory, so INCR is refused) is as
 * good as no Redis: the request fails closed with 503 rate_limit_unavailable, and the
 * readiness probe (a write) says it is not ready, though a PING is answered.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RateLimiterUnavailable } from '../../src/access/ratelimit/index.js';
import type { RedisRateLimiter } from '../../src/access/ratelimit/redis.js';
import { privateLimiter, REDIS_ONLY } from '../helpers/redis.js';

describe('Redis answering with errors', { skip: REDIS_ONLY }, () => {
  let admin: Redis;
  let limiter: RedisRateLimiter;
  let close: () => Promise<void>;

  before(async () => ({ admin, limiter, close } = await privateLimiter(250)));
  after(() => close());

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
});
