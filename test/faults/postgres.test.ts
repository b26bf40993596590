/**
 * PostgreSQL failing under the app, through a fault-injecting proxy: refused, black-
 * holed (live pooled connections included) and cut mid-load. Each time requests get
 * 503 data_unavailable within the configured timeout (never a 500, never a hang), the
 * readiness check names the database, and the app recovers by itself once the
 * database is reachable again. A stored answer of a key the server keeps is the one thing
 * still served during an outage, and only for as long as the key is kept.
 * @waits
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
import { KEPT_MS } from '../../src/access/lookup.js';
import { MemoryRateLimiter } from '../../src/access/ratelimit/memory.js';
import { openStore, type Store } from '../../src/db/index.js';
import { opsPlugin } from '../../src/ops/health.js';
import { ApiMetrics } from '../../src/ops/metrics.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { FaultProxy } from '../helpers/faultproxy.js';
import { withDeadline } from '../helpers/fuzz.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { seedWorld, type World } from '../helpers/world.js';

const DB_TIMEOUT_MS = 1000;
// The client gives a query the timeout plus 500 ms (src/db/index.ts); one more second
// covers waiting for a pooled connection. A bound, not a measurement.
const ANSWER_BOUND_MS = 2 * DB_TIMEOUT_MS + 1500;
const APP_CONFIG = { dbTimeoutMs: DB_TIMEOUT_MS, rateLimitVip: 10_000_000, rateLimitProfi: 10_000_000 };
/** How long after its read a key row may still answer: KEPT_MS, plus a margin for a busy machine's timers. */
const KEPT_BOUND_MS = KEPT_MS + 1000;

describe('PostgreSQL outages through a fault proxy', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only: SQLite is a local file' }, () => {
  let direct: TestStore;
  let proxy: FaultProxy;
  let proxied: Store;
  /** Stored answers off: every request reads the database. */
  let t: TestApp;
  let w: World;
  const ops = Fastify();

  before(async () => {
    direct = await createTestStore();
    w = await seedWorld(direct.db);
    let url: string;
    ({ proxy, url } = await FaultProxy.inFrontOf(direct.url!));
    proxied = openStore({ databaseUrl: url, dataDir: direct.dataDir, dbTimeoutMs: DB_TIMEOUT_MS, dbPoolSize: 4 });
    t = await startTestApp({ store: { ...proxied, url, dataDir: direct.dataDir }, config: { ...APP_CONFIG, responseCacheMb: 0 } });
    await ops.register(opsPlugin, { metrics: new ApiMetrics(), db: proxied.db, limiter: new MemoryRateLimiter(), checkTimeoutMs: DB_TIMEOUT_MS });
  });
  after(async () => {
    await proxy.setMode('forward');
    await t.close();
    await ops.close();
    await proxied.close();
    await proxy.close();
    await direct.close();
  });

  async function get(path = '/api/public/v1/students?limit=1', app = t, key = w.a.key) {
    const started = Date.now();
    const res = await withDeadline(app.request(path, { key }), 15_000, path);
    return { res, ms: Date.now() - started };
  }

  /** Runs `body` with the proxy in `mode`, and forwards again however it ends: one failure must not fail the tests after it. */
  async function during(mode: 'refuse' | 'blackhole', body: () => Promise<void>) {
    await proxy.setMode(mode);
    try {
      await body();
    } finally {
      await proxy.setMode('forward');
    }
  }

  async function assertUnavailable(times: number) {
    for (let i = 0; i < times; i++) {
      const { res, ms } = await get();
      assert.equal(res.status, 503, res.text);
      assert.equal((res.json() as { code: string }).code, 'data_unavailable');
      assert.equal(res.headers['retry-after'], '5');
      assert.ok(ms < ANSWER_BOUND_MS, `answered after ${ms} ms`);
    }
    const ready = await ops.inject('/readyz');
    assert.equal(ready.statusCode, 503);
    assert.deepEqual(ready.json(), { status: 'not_ready', checks: { database: 'unavailable', rate_limiter: 'ok' } });
  }

  /** Polls until a normal request is answered 200 again, without any restart. */
  async function assertRecovers() {
    const deadline = Date.now() + 15_000;
    let last = 0;
    while (Date.now() < deadline) {
      last = (await get()).res.status;
      if (last === 200) break;
      assert.equal(last, 503);
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(last, 200, 'did not recover');
    assert.equal((await ops.inject('/readyz')).statusCode, 200);
  }

  it('serves through the proxy', async () => {
    assert.equal((await get()).res.status, 200);
    assert.equal((await ops.inject('/readyz')).statusCode, 200);
  });

  it('refused: 503 within the timeout, then recovers on its own', async () => {
    await during('refuse', async () => {
      await assertUnavailable(3);
      // A request that needs no data is still answered: the process is up.
      assert.equal((await t.request('/nothing')).status, 404);
    });
    await assertRecovers();
  });

  it('blackholed, live pooled connections too: 503 within the timeout, then recovers', async () => {
    assert.equal((await get()).res.status, 200);
    assert.ok(proxy.connections > 0, 'the pool holds live connections');
    await during('blackhole', () => assertUnavailable(3));
    await assertRecovers();
  });

  it('a stored answer of a kept key is served during an outage only while the key is kept, then 503', async () => {
    // Stored answers on (the default). A command that changes keys, plans or data does not
    // return before every server's key watch has heard of it or its lease has run out, so a
    // key kept under the watch may answer without a read.
    const stored = await startTestApp({ store: t.store, config: APP_CONFIG });
    try {
      const path = '/api/public/v1/students?limit=2';
      // The key is read here, and kept from now for KEPT_MS.
      const first = (await get(path, stored)).res;
      assert.equal(first.status, 200);
      assert.equal((await get(path, stored)).res.text, first.text);
      await during('blackhole', async () => {
        const cut = Date.now();
        const logged = stored.logs.length;
        const { res: kept } = await get(path, stored);
        assert.equal(kept.status, 200, 'the key read just before the outage is still kept');
        assert.equal(kept.text, first.text);
        // A key this server has not read needs the database: its request marks it down.
        const { res: unread } = await get(path, stored, w.b.key);
        assert.equal(unread.status, 503);
        for (;;) {
          const sent = Date.now() - cut;
          const { res } = await get(path, stored);
          if (res.status !== 200) {
            assert.equal((res.json() as { code: string }).code, 'data_unavailable');
            break;
          }
          assert.equal(res.text, first.text, 'only the stored answer is served');
          assert.ok(sent < KEPT_BOUND_MS, `answered 200 to a request sent ${sent} ms into the outage`);
          await new Promise((r) => setTimeout(r, 200));
        }
        // Once the key is no longer kept it is not kept again until the database answers.
        assert.equal((await get(path, stored)).res.status, 503);
        // An answer from memory is no sign that the database is back: one line says it is down, none that it is back.
        assert.equal(stored.logs.slice(logged).filter((line) => line.includes('postgres unavailable')).length, 1);
        assert.deepEqual(stored.logs.slice(logged).filter((line) => line.includes('postgres available again')), []);
      });
    } finally {
      await stored.close();
    }
  });

  it('live connections cut mid-load (as when the server is killed): 200 or 503, never a 500 or a hang, then normal', async () => {
    const statuses = new Map<number, number>();
    let stop = false;
    const loops = Array.from({ length: 4 }, async () => {
      try {
        while (!stop) {
          const { res } = await get(['/api/public/v1/students', '/api/public/v1/lessons', '/api/public/v1/students/s1'][statuses.size % 3]);
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status !== 200) assert.equal((res.json() as { code: string }).code, 'data_unavailable', res.text);
        }
      } finally {
        // One loop's failure ends them all, so none outlives the test.
        stop = true;
      }
    });
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 400));
      proxy.cut();
    }
    await new Promise((r) => setTimeout(r, 400));
    stop = true;
    await Promise.all(loops);
    assert.deepEqual([...statuses.keys()].filter((s) => s !== 200 && s !== 503), [], JSON.stringify([...statuses]));
    await assertRecovers();
  });
});
