/**
 * PostgreSQL failing under the app, through a fault-injecting proxy: refused, black-
 * holed (live pooled connections included) and cut mid-load. Each time requests get
 * 503 data_unavailable within the configured timeout (never a 500, never a hang), the
 * readiness check names the database, and the app recovers by itself once the
 * database is reachable again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
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

describe('PostgreSQL outages through a fault proxy', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only: SQLite is a local file' }, () => {
  let direct: TestStore;
  let proxy: FaultProxy;
  let proxied: Store;
  let t: TestApp;
  let w: World;
  const ops = Fastify();

  before(async () => {
    direct = await createTestStore();
    w = await seedWorld(direct.db);
    const url = new URL(direct.url!);
    proxy = await FaultProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(proxy.address.port);
    proxied = openStore({ databaseUrl: url.toString(), dataDir: direct.dataDir, dbTimeoutMs: DB_TIMEOUT_MS, dbPoolSize: 4 });
    t = await startTestApp({ store: { ...proxied, url: url.toString(), dataDir: direct.dataDir }, config: { dbTimeoutMs: DB_TIMEOUT_MS, rateLimitVip: 10_000_000, rateLimitProfi: 10_000_000 } });
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

  async function get(path = '/api/public/v1/students?limit=1') {
    const started = Date.now();
    const res = await withDeadline(t.request(path, { key: w.a.key }), 15_000, path);
    return { res, ms: Date.now() - started };
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
    await proxy.setMode('refuse');
    await assertUnavailable(3);
    // A request that needs no data is still answered: the process is up.
    assert.equal((await t.request('/nothing')).status, 404);
    await proxy.setMode('forward');
    await assertRecovers();
  });

  it('blackholed, live pooled connections too: 503 within the timeout, then recovers', async () => {
    assert.equal((await get()).res.status, 200);
    assert.ok(proxy.connections > 0, 'the pool holds live connections');
    await proxy.setMode('blackhole');
    await assertUnavailable(3);
    await proxy.setMode('forward');
    await assertRecovers();
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
