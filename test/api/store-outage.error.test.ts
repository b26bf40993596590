/**
 * A data store that refuses connections or never answers gives 503 data_unavailable
 * within the configured timeout, and the process keeps serving. Recovery, stalled live
 * pool connections and connections cut mid-load: test/faults/postgres.test.ts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MemoryRateLimiter } from '../../src/access/ratelimit/memory.js';
import { isStoreUnavailable, openStore } from '../../src/db/index.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { freePort } from '../helpers/redis.js';
import type { TestStore } from '../helpers/store.js';

describe('data store outage', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only: SQLite is a local file' }, () => {
  let blackhole: net.Server;
  const sockets = new Set<net.Socket>();
  let refusedPort: number;
  const apps: TestApp[] = [];
  const dirs: string[] = [];

  before(async () => {
    // Accepts connections and never answers: a blackholed database.
    blackhole = net.createServer((s) => {
      sockets.add(s);
      s.on('error', () => undefined);
    });
    await new Promise<void>((r) => blackhole.listen(0, '127.0.0.1', r));
    refusedPort = await freePort();
  });
  after(async () => {
    for (const t of apps) {
      await t.close();
      await t.store.close();
    }
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
    for (const s of sockets) s.destroy();
    blackhole.close();
  });

  async function appOn(port: number): Promise<TestApp> {
    const url = `postgres://postgres@127.0.0.1:${port}/test`;
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-outage-'));
    dirs.push(dataDir);
    const store = openStore({ databaseUrl: url, dataDir, dbTimeoutMs: 800, dbPoolSize: 2 });
    const testStore: TestStore = { ...store, url, dataDir };
    // The in-memory limiter: with Redis, usage needs the database's queue id at start, which a
    // server reads right after its migrations, before any outage.
    const t = await startTestApp({ store: testStore, config: { dbTimeoutMs: 800 }, limiter: new MemoryRateLimiter() });
    apps.push(t);
    return t;
  }

  for (const [name, port] of [
    ['refused', () => refusedPort],
    ['blackholed', () => (blackhole.address() as net.AddressInfo).port],
  ] as const) {
    it(`${name}: 503 data_unavailable within the timeout, again and again`, async () => {
      const t = await appOn(port());
      for (let i = 0; i < 3; i++) {
        const started = Date.now();
        const res = await t.request('/api/public/v1/students', { key: `service_pk_${'a'.repeat(32)}` });
        const ms = Date.now() - started;
        assert.equal(res.status, 503, res.text);
        assert.equal((res.json() as { code: string }).code, 'data_unavailable');
        assert.ok(ms < 3000, `took ${ms} ms`);
      }
      // A request that needs no data is still answered: the process is up.
      assert.equal((await t.request('/nothing')).status, 404);
    });
  }
});

describe('which failures of a store are an outage', () => {
  it('takes a name not resolved now, a network or host out of reach, a connection aborted for an outage (503), not a bug (500)', () => {
    for (const [code, syscall, message] of [
      ['EAI_AGAIN', 'getaddrinfo', 'getaddrinfo EAI_AGAIN db'],
      ['ENETUNREACH', 'connect', 'connect ENETUNREACH 10.0.0.5:5432'],
      ['ENETDOWN', 'connect', 'connect ENETDOWN 10.0.0.5:5432'],
      ['EHOSTDOWN', 'connect', 'connect EHOSTDOWN 10.0.0.5:5432'],
      ['EADDRNOTAVAIL', 'connect', 'connect EADDRNOTAVAIL 10.0.0.5:5432'],
      ['ECONNABORTED', 'read', 'read ECONNABORTED'],
    ] as const) {
      assert.ok(isStoreUnavailable(Object.assign(new Error(message), { code, syscall })), code);
    }
    assert.ok(!isStoreUnavailable(Object.assign(new Error('Cannot read properties of undefined'), { code: 'ERR_SOMETHING' })), 'a bug stays a bug');
  });
});
