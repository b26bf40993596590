/**
 * The usage flush through a PostgreSQL outage (its store behind a fault-injecting proxy,
 * the usage waiting in Redis): it says once that it fails and once that it works again,
 * and a flush that had nothing to write in between is not taken for the store working.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { RedisRateLimiter } from '../../src/access/ratelimit/redis.js';
import { UsageRecorder } from '../../src/access/usage.js';
import { openStore, type Store } from '../../src/db/index.js';
import { FaultProxy } from '../helpers/faultproxy.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { seedWorld, type World } from '../helpers/world.js';

const BOTH = process.env.DATABASE_URL && process.env.REDIS_URL ? false : 'PostgreSQL and Redis only: the usage waits in Redis, and SQLite is a local file';

describe('the usage flush through a PostgreSQL outage', { skip: BOTH }, () => {
  let direct: TestStore;
  let proxy: FaultProxy;
  let proxied: Store;
  let limiter: RedisRateLimiter;
  let w: World;

  before(async () => {
    direct = await createTestStore();
    w = await seedWorld(direct.db);
    let url: string;
    ({ proxy, url } = await FaultProxy.inFrontOf(direct.url!));
    proxied = openStore({ databaseUrl: url, dataDir: direct.dataDir, dbTimeoutMs: 1000, dbPoolSize: 2 });
    limiter = new RedisRateLimiter(process.env.REDIS_URL!, 1000);
  });
  after(async () => {
    await proxy.setMode('forward');
    await limiter.close();
    await proxied.close();
    await proxy.close();
    await direct.close();
  });

  it('one line when it starts failing, one when it works again, none for a flush with nothing to write', async () => {
    const lines: { msg: string; store?: string }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as { msg: string });
        done();
      },
    });
    const recorder = await UsageRecorder.open(proxied.db, pino({ level: 'info' }, sink), 3_600_000, limiter);
    try {
      const count = async () => Number((await direct.db.selectFrom('api_keys').select('request_count').where('id', '=', w.a.keyId).executeTakeFirstOrThrow()).request_count);
      const before = await count();
      // A request's usage, recorded in Redis with its check.
      assert.equal((await limiter.consume(w.a.id, 1000, w.a.keyId)).allowed, true);
      await proxy.setMode('refuse');
      // Taken from Redis, not applied: it waits there under its lease.
      await recorder.flush();
      // Nothing else to write: these say nothing of PostgreSQL.
      await recorder.flush();
      await recorder.flush();
      const storeLines = () => lines.filter((l) => l.store === 'postgres').map((l) => l.msg);
      assert.deepEqual(storeLines(), ['usage flush failing on postgres; retried until it succeeds']);
      await proxy.setMode('forward');
      // A request counted in this process (as when Redis did not answer): written now.
      recorder.record(w.a.keyId);
      await recorder.flush();
      assert.deepEqual(storeLines(), ['usage flush failing on postgres; retried until it succeeds', 'postgres works again']);
      assert.equal(await count(), before + 1, 'the request counted here is written; the one in Redis waits for its lease');
    } finally {
      await recorder.close();
    }
  });
});
