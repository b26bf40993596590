/**
 * A key's request log and requests per day, through the real
 * HTTPS server: requests made with a key are written by the usage flush and read back
 * by keyRequests and keyDays, on SQLite and on PostgreSQL (+ Redis when set).
 * @waits
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { keyDays, keyRequests } from '../../src/management/key-activity.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { seedWorld, type World } from '../helpers/world.js';

describe('key activity: request log and requests per day', () => {
  let t: TestApp;
  let w: World;

  before(async () => {
    t = await startTestApp({ config: { rateLimitVip: 10_000_000, rateLimitProfi: 10_000_000 } });
    w = await seedWorld(t.store.db);
  });
  after(async () => {
    await t.close();
  });

  /** Waits until the key's log holds `n` requests (the flush runs every 200 ms here). */
  async function logged(schoolId: string, keyId: string, n: number) {
    const deadline = Date.now() + 10_000;
    let entries = await keyRequests(t.store.db, schoolId, keyId);
    while (entries.length < n && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      entries = await keyRequests(t.store.db, schoolId, keyId);
    }
    return entries;
  }

  it('keeps each request, newest first, with its time, target as received, status, id, address and duration', async () => {
    const { id, key, keyId } = w.a;
    // The last target holds text the log's write must carry as it is: a quote, escapes.
    const paths = ['/api/public/v1/students?limit=2', '/api/public/v1/students?limit=0', "/api/public/v1/students/o'b%22r%D0%AF%00"];
    const answers = [];
    for (const path of paths) answers.push(await t.request(path, { key }));
    const entries = await logged(id, keyId, 3);
    assert.equal(entries.length, 3);
    assert.deepEqual(entries.map((e) => e.target), [...paths].reverse());
    assert.deepEqual(entries.map((e) => e.status), [404, 400, 200]);
    assert.deepEqual(entries.map((e) => e.request_id), answers.map((a) => a.headers['x-request-id']).reverse());
    for (const e of entries) {
      assert.equal(e.method, 'GET');
      assert.match(e.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.ok(Math.abs(Date.parse(e.at) - Date.now()) < 60_000, e.at);
      assert.match(e.address, /^(127\.0\.0\.1|::ffff:127\.0\.0\.1)$/);
      assert.ok(e.duration_ms >= 0 && Math.round(e.duration_ms * 10) === e.duration_ms * 10, String(e.duration_ms));
    }
  });

  it('counts the requests of today, zeros for the other days, oldest first', async () => {
    const { id, keyId } = w.a;
    // With Redis the counts reach the database by their own batches, not with the request log's write.
    const deadline = Date.now() + 10_000;
    let days = await keyDays(t.store.db, id, keyId);
    while (days.at(-1)!.requests < 3 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      days = await keyDays(t.store.db, id, keyId);
    }
    assert.equal(days.length, 90);
    const today = new Date().toISOString().slice(0, 10);
    assert.equal(days.at(-1)!.day, today);
    assert.equal(days.at(-1)!.requests, 3);
    assert.ok(days.slice(0, -1).every((d) => d.requests === 0));
    assert.deepEqual([...days].sort((x, y) => x.day.localeCompare(y.day)), days);
    assert.equal((await keyDays(t.store.db, id, keyId, 7)).length, 7);
    const card = await t.store.db.selectFrom('api_keys').select('request_count').where('id', '=', keyId).executeTakeFirstOrThrow();
    assert.equal(Number(card.request_count), 3, 'the days add up to the counter');
  });

  it('keeps the last 100 requests of a key', async () => {
    const { id, key, keyId } = w.b;
    for (let i = 0; i < 130; i += 10) {
      await Promise.all(Array.from({ length: 10 }, (_, j) => t.request(`/api/public/v1/students?limit=${1 + ((i + j) % 200)}`, { key })));
    }
    const deadline = Date.now() + 10_000;
    let day = 0;
    while (day < 130 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      day = (await keyDays(t.store.db, id, keyId, 1))[0]!.requests;
    }
    assert.equal(day, 130);
    // The log is written every few seconds: wait for the newest request to reach it.
    let entries = await logged(id, keyId, 100);
    while (!entries.some((e) => e.target.endsWith('limit=130')) && Date.now() < deadline + 10_000) {
      await new Promise((r) => setTimeout(r, 100));
      entries = await keyRequests(t.store.db, id, keyId);
    }
    assert.equal(entries.length, 100);
    // The log is a ring of 100 rows: the groups of ten were sent one after another, so
    // exactly the last hundred requests (limit=31 to 130) are kept.
    const rows = await t.store.db.selectFrom('key_requests').select((eb) => eb.fn.countAll().as('n')).where('key_id', '=', keyId).executeTakeFirstOrThrow();
    assert.equal(Number(rows.n), 100);
    const limits = entries.map((e) => Number(new URL(e.target, 'https://x').searchParams.get('limit'))).sort((a, b) => a - b);
    assert.deepEqual(limits, Array.from({ length: 100 }, (_, i) => i + 31));
  });

  it('reads nothing for another school\'s key or an unknown key', async () => {
    assert.deepEqual(await keyRequests(t.store.db, w.b.id, w.a.keyId), []);
    assert.deepEqual(await keyRequests(t.store.db, w.a.id, 'key_0000000000000000'), []);
    assert.ok((await keyDays(t.store.db, w.b.id, w.a.keyId)).every((d) => d.requests === 0));
  });
});
