/**
 * Key values never leave the request that carried them: not in an error body, not in
 * a log line (at the most verbose level), not in the database. Exercised through every
 * error path with real keys: 401 for a revoked key, 402, 429, 503 from the rate
 * limiter (and from the data store on PostgreSQL), invalid parameters, and keys pasted
 * where they do not belong (query values and names, paths, other headers).
 *
 * Every test app and spawned process also checks its own logs when it closes
 * (test/helpers/app.ts, processes.ts), so the whole suite is a scan as well.
 * @waits
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MemoryRateLimiter } from '../../src/access/ratelimit/memory.js';
import { RedisRateLimiter } from '../../src/access/ratelimit/redis.js';
import { openStore } from '../../src/db/index.js';
import { KEY_VALUE, startTestApp, type TestApp } from '../helpers/app.js';
import type { TestResponse } from '../helpers/http.js';
import { freePort } from '../helpers/redis.js';
import { seedWorld, type World } from '../helpers/world.js';

describe('key values never leak', () => {
  const apps: TestApp[] = [];
  let t: TestApp;
  let w: World;
  let keys: string[];
  const answers: { what: string; res: TestResponse }[] = [];

  async function record(what: string, app: TestApp, p: string, opts: Parameters<TestApp['request']>[1]): Promise<TestResponse> {
    const res = await app.request(p, opts);
    answers.push({ what, res });
    return res;
  }

  before(async () => {
    // Trace level: whatever the service might log about a request, it logs here.
    t = await startTestApp({ config: { logLevel: 'trace', rateLimitProfi: 3 } });
    apps.push(t);
    w = await seedWorld(t.store.db);
    keys = [w.a.key, w.b.key, w.lone.key, w.revokedKey, w.downgradedKey];
  });
  after(async () => {
    for (const app of apps) await app.close();
  });

  it('401, 402 and 429 with real keys', async () => {
    assert.equal((await record('revoked', t, '/api/public/v1/students', { key: w.revokedKey })).status, 401);
    assert.equal((await record('downgraded', t, '/api/public/v1/students', { key: w.downgradedKey })).status, 402);
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await record('rate limited', t, '/api/public/v1/vehicles', { key: w.b.key })).status);
    assert.deepEqual(statuses, [200, 200, 200, 429]);
  });

  it('keys pasted into the URL and other headers', async () => {
    const k = w.a.key;
    const cases: [string, string, Parameters<TestApp['request']>[1], number][] = [
      ['query value', `/api/public/v1/students?api_key=${k}`, { key: k }, 400],
      // Percent-encoded anywhere in its prefix, once or twice, or wholly.
      ['encoded query value', `/api/public/v1/students?api_key=%73ervice%5Fpk_${k.slice(11)}`, { key: k }, 400],
      ['twice-encoded query value', `/api/public/v1/lessons?student_id=%2573ervice_pk_${k.slice(11)}`, { key: k }, 400],
      ['wholly encoded query value', `/api/public/v1/students?api_key=${[...k].map((c) => `%${c.charCodeAt(0).toString(16)}`).join('')}`, { key: k }, 400],
      ['query name', `/api/public/v1/students?${k}=1`, { key: k }, 400],
      // A key is shaped like an id: a valid filter that matches nothing.
      ['filter value', `/api/public/v1/lessons?student_id=${k}`, { key: k }, 200],
      ['path', `/api/public/v1/students/${k}`, { key: k }, 404],
      ['unknown path', `/api/public/v1/${k}`, { key: k }, 404],
      ['outside the API', `/${k}`, { key: null }, 404],
      ['no scheme', '/api/public/v1/students', { key: null, headers: { authorization: k } }, 401],
      ['basic', '/api/public/v1/students', { key: null, headers: { authorization: `Basic ${k}` } }, 401],
      ['trailing junk', '/api/public/v1/students', { key: null, headers: { authorization: `Bearer ${k}x` } }, 401],
      ['other header', '/api/public/v1/students', { key: null, headers: { 'x-api-key': k, cookie: `key=${k}` } }, 401],
      ['invalid parameter', '/api/public/v1/students?limit=abc', { key: k }, 400],
    ];
    for (const [what, p, opts, status] of cases) assert.equal((await record(what, t, p, opts)).status, status, what);
  });

  it('503 when the rate limiter is unreachable', async () => {
    const down = new RedisRateLimiter(`redis://127.0.0.1:${await freePort()}`, 250);
    const app = await startTestApp({ config: { logLevel: 'trace' }, limiter: down });
    apps.push(app);
    const world = await seedWorld(app.store.db);
    keys.push(world.a.key, world.b.key);
    const res = await record('limiter down', app, '/api/public/v1/students', { key: world.a.key });
    assert.equal(res.status, 503);
    assert.equal((res.json() as { code: string }).code, 'rate_limit_unavailable');
  });

  it('503 when the data store is unreachable', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-secrets-'));
    const url = `postgres://postgres@127.0.0.1:${await freePort()}/test`;
    const store = openStore({ databaseUrl: url, dataDir, dbTimeoutMs: 500, dbPoolSize: 1 });
    // The in-memory limiter: with Redis, usage needs the database's queue id at start (a server reads it after migrating).
    const app = await startTestApp({ config: { logLevel: 'trace', dbTimeoutMs: 500 }, store: { ...store, url, dataDir }, limiter: new MemoryRateLimiter() });
    apps.push(app);
    const res = await record('store down', app, '/api/public/v1/students', { key: w.a.key });
    assert.equal(res.status, 503);
    assert.equal((res.json() as { code: string }).code, 'data_unavailable');
    await store.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('no answer and no log line holds a key value', () => {
    assert.ok(answers.length >= 15);
    for (const { what, res } of answers) {
      for (const key of keys) assert.ok(!res.text.includes(key), `${what}: the ${res.status} body holds a key`);
      assert.ok(!KEY_VALUE.test(res.text), `${what}: the ${res.status} body holds a key value`);
      for (const value of Object.values(res.headers)) assert.ok(!KEY_VALUE.test(String(value)), `${what}: a header holds a key value`);
    }
    const logs = apps.flatMap((app) => app.logs).join('');
    assert.ok(logs.includes('"url":"/api/public/v1/students?api_key=[redacted-key]"'), 'the logs were captured, with the pasted key masked');
    for (const key of keys) assert.ok(!logs.includes(key) && !logs.includes(key.slice(11)), 'a key value is in the logs');
    assert.ok(!KEY_VALUE.test(logs), 'a key value is in the logs');
  });

  it('the database holds hashes, never key values', async () => {
    const rows = await t.store.db.selectFrom('api_keys').selectAll().execute();
    const dump = JSON.stringify(rows);
    for (const key of keys) assert.ok(!dump.includes(key));
    assert.ok(!KEY_VALUE.test(dump));
  });
});
