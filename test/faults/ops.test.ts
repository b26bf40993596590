/**
 * The operator's endpoints on the cabinet listener (/healthz, /readyz, /metrics) and
 * the metrics the API records: counts by route pattern and status, latency by route,
 * connection-level errors, process metrics; label values from bounded sets only,
 * whatever URLs clients send. (Readiness under outages: postgres.test.ts, redis.test.ts.)
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { readiness } from '../../src/ops/health.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { startTestCabinet, type TestCabinet } from '../helpers/cabinet.js';
import { fuzzClient, rawExchange } from '../helpers/fuzz.js';
import { createTestStore } from '../helpers/store.js';
import { seedWorld, type World } from '../helpers/world.js';

describe('health endpoints and metrics', () => {
  let api: TestApp;
  let cabinet: TestCabinet;
  let w: World;
  let ops: ReturnType<typeof fuzzClient>;

  before(async () => {
    // Both record into and serve the process's metrics, as one `serve` process does.
    api = await startTestApp();
    w = await seedWorld(api.store.db);
    cabinet = await startTestCabinet({ store: api.store });
    ops = fuzzClient(cabinet.origin, cabinet.ca);
  });
  after(async () => {
    ops.close();
    await cabinet.close();
    await api.close();
  });

  const get = (path: string) => ops.send({ method: 'GET', path, headers: {} });

  it('/healthz: 200 while the process serves', async () => {
    const res = await get('/healthz');
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), { status: 'ok' });
    assert.equal(res.headers['cache-control'], 'no-store');
  });

  it('/readyz: 200 with each check named when the stores answer', async () => {
    const res = await get('/readyz');
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), { status: 'ready', checks: { database: 'ok', rate_limiter: 'ok' } });
  });

  it('/metrics: request counts by route pattern and status, latencies, client errors, process metrics', async () => {
    assert.equal((await api.request('/api/public/v1/students', { key: w.a.key })).status, 200);
    assert.equal((await api.request(`/api/public/v1/students/${w.a.id}`, { key: w.a.key })).status, 404);
    assert.equal((await api.request('/api/public/v1/students?limit=0', { key: null })).status, 401);
    assert.equal((await api.request(`/no/such/${w.b.id}?school=${w.b.id}`, { key: null })).status, 404);
    const oversized = await rawExchange(api.origin, api.ca, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    assert.equal(oversized.kind === 'response' && oversized.response.status, 431);
    const connect = await rawExchange(api.origin, api.ca, 'CONNECT /api/public/v1/students HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    assert.equal(connect.kind === 'response' && connect.response.status, 405);

    const res = await get('/metrics');
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    const count = (labels: string) => Number(new RegExp(`^school_data_http_requests_total\\{${labels}\\} (\\d+)$`, 'm').exec(res.body)?.[1] ?? 0);
    assert.ok(count('route="/api/public/v1/students",status="200"') >= 1, res.body.slice(0, 2000));
    assert.ok(count('route="/api/public/v1/students/:id",status="404"') >= 1);
    assert.ok(count('route="/api/public/v1/students",status="401"') >= 1);
    assert.ok(count('route="unmatched",status="404"') >= 1);
    assert.ok(count('route="unmatched",status="405"') >= 1, 'CONNECT is counted');
    assert.match(res.body, /^school_data_http_request_duration_seconds_bucket\{le="0\.05",route="\/api\/public\/v1\/students"\} \d+$/m);
    assert.match(res.body, /^school_data_http_client_errors_total\{kind="header_overflow",listener="api"\} [1-9]\d*$/m);
    assert.match(res.body, /^process_resident_memory_bytes \d+/m);
    assert.match(res.body, /^nodejs_eventloop_lag_seconds /m);
  });

  it('label values come from bounded sets: route patterns, never URLs, ids or keys', async () => {
    for (const path of ['/api/public/v1/students/s1', '/api/public/v1/students/s2?x=1', `/${w.a.key}`, `/api/public/v1/${w.a.id}`, '/%zz', '/api/public/v1/students/%zz']) {
      await api.request(path, { key: w.a.key });
    }
    const body = (await get('/metrics')).body;
    const routes = new Set([...body.matchAll(/route="([^"]*)"/g)].map((m) => m[1]));
    for (const route of routes) {
      assert.ok(route === 'unmatched' || /^\/[A-Za-z0-9/:._*-]*$/.test(route ?? ''), `route label ${route}`);
      assert.ok(!route?.includes('?') && !route?.includes(w.a.id) && !route?.includes('service_pk_'), `route label ${route}`);
    }
    assert.ok(routes.has('/api/public/v1/students/:id'));
    assert.ok(!routes.has('/api/public/v1/students/s1'));
  });

  it("/readyz: a SQLite file emptied under the server is no store that answers (a `select 1` read none of it)", { skip: process.env.DATABASE_URL ? 'the embedded store only' : false }, async () => {
    const store = await createTestStore();
    const limiter = { ping: () => Promise.resolve(true) };
    try {
      assert.equal((await readiness({ db: store.db, limiter, checkTimeoutMs: 1000 })).checks.database, 'ok');
      // Its pages all in the file, then the file emptied.
      const file = path.join(store.dataDir, 'school-data.db');
      const other = new SQLite(file);
      other.pragma('wal_checkpoint(TRUNCATE)');
      other.close();
      fs.truncateSync(file, 0);
      assert.equal((await readiness({ db: store.db, limiter, checkTimeoutMs: 1000 })).checks.database, 'unavailable');
    } finally {
      await store.close();
    }
  });
});
