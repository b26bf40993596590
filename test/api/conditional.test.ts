/**
 * Conditional requests: every 200 of a data endpoint carries a strong ETag per
 * representation and `Cache-Control: private, no-cache`; If-None-Match with the current
 * tag (or `*`) is 304 with no body, whether the answer was stored or not; the tag changes
 * when an import changes the school's data; and a 304 is a request like any other for
 * access, counting and limits, after every other rule.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { importData } from '../../src/importer/index.js';
import { revokeKey } from '../../src/management/keys.js';
import { ResponseCache } from '../../src/resources/cache.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import type { TestResponse } from '../helpers/http.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { seedWorld, type World } from '../helpers/world.js';

const PATHS = [
  '/api/public/v1/students?limit=3',
  '/api/public/v1/students/s1',
  '/api/public/v1/instructors',
  '/api/public/v1/vehicles',
  '/api/public/v1/lessons?period_from=2026-03-01&period_to=2026-03-31',
  '/api/public/v1/contracts',
  '/api/public/v1/payments',
  '/api/public/v1/leads',
  '/api/public/v1/reports/finance-summary?period_from=2026-01-01&period_to=2026-12-31',
];
const STRONG = /^"[A-Za-z0-9_-]+-(identity|gzip|br|deflate)"$/;

function assertNotModified(res: TestResponse, tag: string, what: string): void {
  assert.equal(res.status, 304, `${what}: ${res.text}`);
  assert.equal(res.body.length, 0, what);
  assert.equal(res.headers.etag, tag, what);
  assert.equal(res.headers['cache-control'], 'private, no-cache', what);
  assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/, what);
  assert.match(String(res.headers.ratelimit), /^"default";r=\d+;t=\d+$/, what);
  assert.equal(res.headers['content-type'], undefined, what);
}

describe('conditional requests', () => {
  let store: TestStore;
  let stored: TestApp;
  let unstored: TestApp;
  let w: World;

  before(async () => {
    store = await createTestStore();
    // One instance keeps answers, one keeps none: a 304 must not depend on a stored answer.
    stored = await startTestApp({ store, config: { rateLimitVip: 100_000, rateLimitProfi: 4 } });
    unstored = await startTestApp({ store, cache: new ResponseCache(0), config: { rateLimitVip: 100_000, rateLimitProfi: 4 } });
    w = await seedWorld(store.db);
  });
  after(async () => {
    await stored.close();
    await unstored.close();
    await store.close();
  });

  it('tags every data answer, and answers its tag with 304 and no body, stored or not', async () => {
    for (const app of [stored, unstored]) {
      for (const path of PATHS) {
        const first = await app.request(path, { key: w.a.key });
        assert.equal(first.status, 200, `${path}: ${first.text}`);
        assert.match(String(first.headers.etag), STRONG, path);
        assert.equal(first.headers['cache-control'], 'private, no-cache', path);
        const tag = String(first.headers.etag);
        assert.equal((await app.request(path, { key: w.a.key })).headers.etag, tag, `${path}: the same answer, the same tag`);
        assertNotModified(await app.request(path, { key: w.a.key, headers: { 'if-none-match': tag } }), tag, path);
        assertNotModified(await app.request(path, { key: w.a.key, method: 'HEAD', headers: { 'if-none-match': tag } }), tag, `HEAD ${path}`);
        // Asked for gzip: the GET's and the HEAD's tag are one, and their 304s vary as their 200s do.
        const gzip = { 'accept-encoding': 'gzip' };
        const zipped = await app.request(path, { key: w.a.key, headers: gzip });
        const zippedTag = String(zipped.headers.etag);
        assert.equal((await app.request(path, { key: w.a.key, method: 'HEAD', headers: gzip })).headers.etag, zippedTag, `HEAD ${path}`);
        for (const method of ['GET', 'HEAD']) {
          const notModified = await app.request(path, { key: w.a.key, method, headers: { ...gzip, 'if-none-match': zippedTag } });
          assertNotModified(notModified, zippedTag, `${method} ${path}, gzip`);
          assert.equal(notModified.headers.vary, 'accept-encoding, x-no-compression', `${method} ${path}, gzip`);
        }
        // A list of tags, a weak form of the same tag, and `*` match too.
        assertNotModified(await app.request(path, { key: w.a.key, headers: { 'if-none-match': `"other-identity", ${tag}` } }), tag, path);
        assertNotModified(await app.request(path, { key: w.a.key, headers: { 'if-none-match': `W/${tag}` } }), tag, path);
        assertNotModified(await app.request(path, { key: w.a.key, headers: { 'if-none-match': '*' } }), tag, path);
        // `*` is the whole field or nothing: in a list it is no valid field, and matches nothing.
        for (const header of [`*, "other-identity"`, `"other-identity", *`]) {
          assert.equal((await app.request(path, { key: w.a.key, headers: { 'if-none-match': header } })).status, 200, `${path}: ${header}`);
        }
        const other = await app.request(path, { key: w.a.key, headers: { 'if-none-match': '"other-identity"' } });
        assert.equal(other.status, 200, path);
        assert.equal(other.text, first.text, path);
      }
    }
  });

  it('gives each representation its own tag: a gzip answer\'s tag does not match a plain one', async () => {
    const path = '/api/public/v1/lessons?period_from=2026-01-01&period_to=2026-12-31';
    const plain = await stored.request(path, { key: w.a.key });
    const gzip = await stored.request(path, { key: w.a.key, headers: { 'accept-encoding': 'gzip' } });
    assert.equal(gzip.headers['content-encoding'], 'gzip', 'long enough to be compressed');
    assert.notEqual(gzip.headers.etag, plain.headers.etag);
    assert.match(String(gzip.headers.etag), /-gzip"$/);
    // A gzip client that holds the plain answer's tag holds another representation: 200.
    const crossed = await stored.request(path, { key: w.a.key, headers: { 'accept-encoding': 'gzip', 'if-none-match': String(plain.headers.etag) } });
    assert.equal(crossed.status, 200);
    assertNotModified(await stored.request(path, { key: w.a.key, headers: { 'accept-encoding': 'gzip', 'if-none-match': String(gzip.headers.etag) } }), String(gzip.headers.etag), 'gzip');
    // Another school's answer to the same target has another tag.
    const b = await stored.request(path, { key: w.b.key });
    assert.notEqual(b.headers.etag, plain.headers.etag);
  });

  it('changes the tag when an import changes the school\'s data, on every instance', async () => {
    const path = '/api/public/v1/students?limit=3';
    const before = await stored.request(path, { key: w.a.key });
    const tag = String(before.headers.etag);
    const result = await importData(store.db, w.a.id, {
      students: [{ id: 's1', full_name: 'Другое имя', phone: '+79990000001', email: 's1@example.ru', category: 'B', status: 'graduated', group_id: 'g1', branch_id: 'br1', created_at: '2026-01-10T09:00:00Z' }],
    });
    assert.ok(result.ok, JSON.stringify(result));
    for (const app of [stored, unstored]) {
      const now = await app.request(path, { key: w.a.key, headers: { 'if-none-match': tag } });
      assert.equal(now.status, 200, 'the held answer is out of date');
      assert.notEqual(now.headers.etag, tag);
      assert.match(now.text, /Другое имя/);
    }
  });

  it('keeps every other rule first: 401, 400 and 404 come before 304', async () => {
    const path = '/api/public/v1/students/s1';
    const tag = String((await stored.request(path, { key: w.lone.key })).headers.etag);
    assert.equal((await stored.request('/api/public/v1/students/nobody', { key: w.a.key, headers: { 'if-none-match': '*' } })).status, 404);
    assert.equal((await stored.request('/api/public/v1/students?limit=0', { key: w.a.key, headers: { 'if-none-match': '*' } })).status, 400);
    assert.equal((await stored.request(path, { key: w.downgradedKey, headers: { 'if-none-match': '*' } })).status, 402);
    await revokeKey(store.db, w.lone.keyId);
    const refused = await stored.request(path, { key: w.lone.key, headers: { 'if-none-match': tag } });
    assert.equal(refused.status, 401);
    assert.equal(refused.headers['cache-control'], 'no-store');
    assert.equal(refused.headers.etag, undefined, 'problems carry no tag');
  });

  it('counts a 304 on the key\'s card and against the school\'s limit', async () => {
    // School B is on Profi, limited to 4 a minute here.
    const path = '/api/public/v1/vehicles';
    const count = async () => Number((await store.db.selectFrom('api_keys').select('request_count').where('id', '=', w.b.keyId).executeTakeFirstOrThrow()).request_count);
    // The counts of earlier tests' requests reach the card within a flush (200 ms here).
    await new Promise((r) => setTimeout(r, 500));
    const before = await count();
    const first = await unstored.request(path, { key: w.b.key });
    const tag = String(first.headers.etag);
    // What is left of the window (on Redis, the other instance's requests of school B count too).
    const left = Number(/r=(\d+)/.exec(String(first.headers.ratelimit))?.[1]);
    assert.ok(left >= 1 && left <= 3, String(first.headers.ratelimit));
    const statuses: number[] = [];
    for (let i = 0; i <= left; i++) statuses.push((await unstored.request(path, { key: w.b.key, headers: { 'if-none-match': tag } })).status);
    assert.deepEqual(statuses, [...Array<number>(left).fill(304), 429]);
    for (let i = 0; i < 50 && (await count()) < before + left + 2; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(await count(), before + left + 2);
  });
});
