/**
 * The bound on Redis's clock that the rate-limit checks' deadlines are made from
 * (src/access/ratelimit/clock.ts): it never claims Redis's clock is further behind than a
 * sample showed, takes tighter samples, ages with time, and starts again from a sample it
 * is told was wrong.
 * @store-free
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { RedisClock } from '../../src/access/ratelimit/clock.js';

describe('the bound on Redis\'s clock', () => {
  const realNow = Date.now;
  let now = 1_000_000;
  afterEach(() => {
    Date.now = realNow;
  });
  const at = (ms: number) => {
    now = ms;
    Date.now = () => now;
  };
  /** A clock at local time 1,000,000 whose check sent then ran at Redis's `redisMs`. */
  const sampledAt = (redisMs: number) => {
    at(1_000_000);
    const clock = new RedisClock();
    clock.sample(1_000_000, redisMs);
    return clock;
  };

  it('sets no deadline before a check was answered', () => {
    at(1_000_000);
    assert.equal(new RedisClock().deadline(1_000_250), 0);
  });

  it('keeps the tightest sample: a check sent at 1,000,000 and run at Redis\'s 1,004,003 says Redis is at most 4003 ms ahead', () => {
    const clock = sampledAt(1_004_010);
    clock.sample(1_000_000, 1_004_003);
    // A looser sample (a check that waited in Redis's queue) does not replace it.
    clock.sample(1_000_000, 1_004_050);
    assert.equal(clock.deadline(1_000_250), 1_000_250 + 4003 + 20);
  });

  it('ages by a millisecond a second, and a fresher sample tighter than the aged bound replaces it', () => {
    const clock = sampledAt(1_000_000);
    at(1_010_000);
    assert.equal(clock.deadline(1_010_250), 1_010_250 + 10 + 20);
    clock.sample(1_010_000, 1_010_008);
    assert.equal(clock.deadline(1_010_250), 1_010_250 + 8 + 20);
  });

  it('starts again from a sample it is told was wrong, looser or tighter', () => {
    const clock = sampledAt(1_000_000);
    clock.reset(990_000, 1_000_001);
    assert.equal(clock.deadline(1_000_250), 1_000_250 + 10_001 + 20);
  });
});
