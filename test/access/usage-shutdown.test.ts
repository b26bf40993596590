/**
 * The usage recorder's shutdown while Redis does not answer: the counts of this process's
 * memory are written, and what waits in Redis is said to stay there (any instance moves it
 * once Redis answers), not reported as counts lost.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { RedisRateLimiter } from '../../src/access/ratelimit/redis.js';
import { UsageRecorder } from '../../src/access/usage.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { seedWorld, type World } from '../helpers/world.js';

describe('usage at shutdown with Redis unreachable', () => {
  let store: TestStore;
  let w: World;
  // A port nothing listens on: a real client, refused at once.
  const limiter = new RedisRateLimiter('redis://127.0.0.1:9', 250);

  before(async () => {
    store = await createTestStore();
    w = await seedWorld(store.db);
  });
  after(async () => {
    await limiter.close();
    await store.close();
  });

  it('writes the counts it holds, and says that what waits in Redis stays there', async () => {
    const lines: { level: number; msg: string }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
        done();
      },
    });
    const recorder = await UsageRecorder.open(store.db, pino({ level: 'info' }, sink), 60_000, limiter);
    const before = await store.db.selectFrom('api_keys').select('request_count').where('id', '=', w.a.keyId).executeTakeFirstOrThrow();
    recorder.record(w.a.keyId);
    await recorder.close();
    const after = await store.db.selectFrom('api_keys').select('request_count').where('id', '=', w.a.keyId).executeTakeFirstOrThrow();
    assert.equal(Number(after.request_count), Number(before.request_count) + 1);
    const said = lines.map((l) => l.msg);
    assert.ok(!said.some((m) => m.includes('could not be written')), said.join('\n'));
    assert.ok(said.some((m) => /waiting in Redis/.test(m)), said.join('\n'));
    // Redis failed, not the store.
    assert.ok(!said.some((m) => /on (sqlite|postgres)/.test(m)), said.join('\n'));
    assert.ok(said.some((m) => m === 'usage move failing on redis; retried until it succeeds'), said.join('\n'));
  });
});
