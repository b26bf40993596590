/**
 * Settings -> API as a director uses it: the school's plan and limit, creating a key
 * that is shown exactly once and then works on the public API (sharing the store),
 * the request counter moving, revoking through a confirmation step, and the clear
 * messages where no key can be created (Free/Standart plans, 10 active keys).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { hashKey } from '../../src/access/keys.js';
import { sqlitePath } from '../../src/db/index.js';
import { formatTimestamp } from '../../src/domain/time.js';
import { createKey, MAX_ACTIVE_KEYS, revokeKey } from '../../src/management/keys.js';
import { setPlan } from '../../src/management/schools.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { formFields, keyRows, seedDirector, startTestCabinet, type CabinetBrowser, type TestCabinet, unescapeHtml } from '../helpers/cabinet.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

const KEY = /service_pk_[0-9a-f]{32}/;
const STUDENTS = '/api/public/v1/students';

describe('Settings -> API', () => {
  let store: TestStore;
  let t: TestCabinet;
  let api: TestApp;

  before(async () => {
    store = await createTestStore();
    t = await startTestCabinet({ store });
    api = await startTestApp({ store });
  });
  after(async () => {
    await t.close();
    await api.close();
    await store.close();
  });

  async function signedIn(plan = 'VIP', schoolName?: string): Promise<{ b: CabinetBrowser; schoolId: string }> {
    const d = await seedDirector(store.db, plan, schoolName);
    const b = t.browser();
    assert.equal((await b.login(d.email, d.password)).status, 303);
    return { b, schoolId: d.schoolId };
  }

  const activeKeys = async (schoolId: string) =>
    (await store.db.selectFrom('api_keys').select('id').where('school_id', '=', schoolId).where('revoked_at', 'is', null).execute()).length;

  it("shows the school's name, plan and request limit per minute, and an empty key list", async () => {
    const { b } = await signedIn('VIP', 'Автошкола «Старт» <Центр>');
    const page = await b.get('/settings/api');
    assert.equal(page.status, 200);
    assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
    assert.match(page.text, /Автошкола «Старт» &lt;Центр&gt;/);
    assert.match(page.text, /<dd id="plan">VIP<\/dd>/);
    assert.match(page.text, /600 requests per minute/);
    assert.match(page.text, /No keys yet/);
    assert.ok(formFields(page.text, '/settings/api/keys').csrf, 'create form with its token');
    const profi = await (await signedIn('Profi')).b.get('/settings/api');
    assert.match(profi.text, /<dd id="plan">Profi<\/dd>/);
    assert.match(profi.text, /60 requests per minute/);
  });

  it('creates a key shown exactly once; it works on the API and its counter moves', async () => {
    const { b, schoolId } = await signedIn('VIP');
    const keysPage = await b.get('/settings/api');
    const form = formFields(keysPage.text, '/settings/api/keys');
    const created = await b.post('/settings/api/keys', { ...form, name: '  Бухгалтерия <1С>  ' });
    assert.equal(created.status, 200);
    assert.equal(created.headers['cache-control'], 'no-store');
    const key = KEY.exec(created.text)?.[0];
    assert.ok(key, 'the key is on the page');
    assert.match(created.text, /it will not be shown again/);
    assert.match(created.text, /data-copy="new-key"/);
    assert.match(created.text, /Бухгалтерия &lt;1С&gt;/);

    // Nowhere else: not on the list, not in the database, not in a log, not in a cookie.
    const list = await b.get('/settings/api');
    assert.ok(!list.text.includes(key), 'key value on the list page');
    const rows = keyRows(list.text);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.cells[0], 'Бухгалтерия <1С>');
    assert.equal(rows[0]!.cells[1], `service_pk_${key.slice(11, 15)}...${key.slice(-4)}`);
    assert.equal(rows[0]!.cells[3], 'never');
    assert.equal(rows[0]!.requests, 0);
    assert.equal(rows[0]!.status, 'Active');
    const stored = await store.db.selectFrom('api_keys').selectAll().where('school_id', '=', schoolId).executeTakeFirstOrThrow();
    assert.equal(stored.key_hash, hashKey(key));
    assert.ok(!JSON.stringify(stored).includes(key.slice(11)));
    assert.ok(!t.logs.join('').includes(key.slice(11)), 'key value logged');
    assert.ok(![...b.cookies.values()].some((v) => v.includes(key.slice(11))));
    assert.ok(!created.location);

    // Sending the same form again (reload, back + resubmit) shows no key and creates none.
    const again = await b.post('/settings/api/keys', { ...form, name: 'Бухгалтерия <1С>' });
    assert.equal(again.status, 409);
    assert.ok(!KEY.test(again.text));
    assert.match(again.text, /already sent/);
    assert.equal(await activeKeys(schoolId), 1);
    // Nor does an older form sent again after a newer one (two tabs, or back twice).
    const second = formFields((await b.get('/settings/api')).text, '/settings/api/keys');
    assert.equal((await b.post('/settings/api/keys', { ...second, name: 'second tab' })).status, 200);
    assert.equal((await b.post('/settings/api/keys', { ...form, name: 'first tab again' })).status, 409);
    assert.equal(await activeKeys(schoolId), 2);
    const secondKey = await store.db.selectFrom('api_keys').select('id').where('school_id', '=', schoolId).where('name', '=', 'second tab').executeTakeFirstOrThrow();
    assert.ok((await revokeKey(store.db, secondKey.id)).ok);

    // The key works on the public API, and the card counts its use once usage is flushed.
    assert.equal((await api.request(STUDENTS, { key })).status, 200);
    assert.equal((await api.request(`${STUDENTS}?limit=0`, { key })).status, 400);
    let row = keyRows((await b.get('/settings/api')).text)[0]!;
    for (let i = 0; i < 100 && row.requests < 2; i++) {
      await new Promise((r) => setTimeout(r, 100));
      row = keyRows((await b.get('/settings/api')).text)[0]!;
    }
    assert.equal(row.requests, 2);
    assert.match(row.cells[3]!, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$/, 'last used shown');
  });

  it('revokes a key through a confirmation step; the API answers 401 at once; the key stays listed', async () => {
    const { b, schoolId } = await signedIn('Profi');
    const old = await createKey(store.db, schoolId, 'Сайт');
    assert.ok(old.ok);
    const page = await b.get('/settings/api');
    const href = new RegExp(`href="(/settings/api/keys/${old.value.id}/revoke)"`).exec(page.text)?.[1];
    assert.ok(href, 'a revoke link on the card');

    const confirm = await b.get(href);
    assert.equal(confirm.status, 200);
    assert.match(confirm.text, /Revoke the key “Сайт”\?/);
    assert.match(confirm.text, /cannot be undone/);
    // Opening the confirmation changes nothing.
    assert.equal((await api.request(STUDENTS, { key: old.value.key })).status, 200);

    const done = await b.post(href, formFields(confirm.text, href));
    assert.equal(done.status, 303);
    assert.equal(done.location, `/settings/api?revoked=${old.value.id}`);
    assert.equal((await api.request(STUDENTS, { key: old.value.key })).status, 401);

    const newer = await createKey(store.db, schoolId, 'Новый');
    assert.ok(newer.ok);
    const after = await b.get(done.location);
    assert.match(after.text, /The key “Сайт” is revoked/);
    const rows = keyRows(after.text);
    assert.deepEqual(
      rows.map((r) => [r.id, r.status]),
      [
        [newer.value.id, 'Active'],
        [old.value.id, 'Revoked'],
      ],
      'active keys first, the revoked one still listed',
    );
    assert.ok(!new RegExp(`/settings/api/keys/${old.value.id}/revoke`).test(after.text), 'no revoke button on a revoked key');
    const second = await b.get(href);
    assert.match(second.text, /already revoked/);
    assert.ok(!second.text.includes(`action="${href}"`));
  });

  it(
    'opens its pages while an import holds the SQLite file, answers a revoke then with a page saying so (503, nothing changed); the same form then works',
    { skip: process.env.DATABASE_URL ? 'SQLite only: PostgreSQL has no file lock' : false },
    async () => {
      const { b, schoolId } = await signedIn('Profi');
      const key = await createKey(store.db, schoolId, 'Leaked');
      assert.ok(key.ok);
      const href = `/settings/api/keys/${key.value.id}/revoke`;
      const fields = formFields((await b.get(href)).text, href);
      // The session's idle period is due to be extended: the next page view writes it when it can.
      const director = store.db.selectFrom('directors').select('id').where('school_id', '=', schoolId);
      const idleEnd = () => store.db.selectFrom('cabinet_sessions').select('idle_expires_at').where('director_id', 'in', director).executeTakeFirstOrThrow();
      const due = formatTimestamp(Date.now() + 120_000);
      await store.db.updateTable('cabinet_sessions').set({ idle_expires_at: due }).where('director_id', 'in', director).execute();
      // As an import's merge does, from another connection: the file's write lock, held.
      const importer = new SQLite(sqlitePath({ dataDir: store.dataDir }));
      importer.exec('begin immediate');
      try {
        // Reading needs no lock: the key list and the key's page open at once, the session's
        // upkeep left for later (waited for, each view would take the store's 3 s timeout;
        // each is timed on its own, so a slow machine's two views do not add up to it).
        for (const page of ['/settings/api', `/settings/api/keys/${key.value.id}`]) {
          const started = performance.now();
          assert.equal((await b.get(page)).status, 200);
          assert.ok(performance.now() - started < 2500, `${page} waited for the lock`);
        }
        assert.equal((await idleEnd()).idle_expires_at, due);
        const busy = await b.post(href, fields);
        assert.equal(busy.status, 503);
        assert.equal(busy.headers['retry-after'], '60');
        assert.match(busy.text, /<h1>Busy with an import<\/h1>/);
        assert.match(busy.text, /Nothing was changed; try again in a minute/);
        const warned = t.logs.join('').split('\n').filter((line) => line.includes('"level":40') && line.includes('data store busy with another writer'));
        assert.ok(warned.length > 0, 'the warn line');
        // Its cause, no stack trace: the store's failure, not the code's.
        for (const line of warned) assert.ok(!line.includes('"stack"') && line.includes('"cause"'), line);
      } finally {
        importer.exec('commit');
        importer.close();
      }
      assert.equal((await api.request(STUDENTS, { key: key.value.key })).status, 200, 'the key stayed active');
      assert.equal((await b.get('/settings/api')).status, 200);
      assert.ok((await idleEnd()).idle_expires_at > due, 'the idle period is extended once the lock is free');
      const done = await b.post(href, fields);
      assert.equal(done.status, 303);
      assert.equal((await api.request(STUDENTS, { key: key.value.key })).status, 401);
    },
  );

  it('requires a key name of 1-100 characters, shows the error at the field, creates nothing', async () => {
    const { b, schoolId } = await signedIn('VIP');
    const cases: [string, RegExp][] = [
      ['', /Enter a name for the key/],
      ['    ', /Enter a name for the key/],
      ['x'.repeat(101), /at most 100 characters long \(it has 101\)/],
      ['tab\there', /control characters/],
      ['nul\u0000', /control characters/],
      ['C1\u0085', /control characters/],
      ['line\u2028separator', /control characters/],
      ['\u202eright to left', /direction of the text/],
    ];
    for (const [name, message] of cases) {
      const res = await b.submit('/settings/api', '/settings/api/keys', { name });
      assert.equal(res.status, 400, JSON.stringify(name));
      assert.match(res.text, /<p class="field-error" id="key-name-error">/);
      assert.match(res.text, message);
      assert.match(res.text, /aria-invalid="true"/);
      assert.ok(!KEY.test(res.text));
    }
    assert.equal(await activeKeys(schoolId), 0);
    const longest = await b.submit('/settings/api', '/settings/api/keys', { name: 'я'.repeat(100) });
    assert.equal(longest.status, 200);
    assert.equal(await activeKeys(schoolId), 1);
  });

  for (const plan of ['Free', 'Standart']) {
    it(`tells a ${plan} school why it has no keys, and shows no create button`, async () => {
      const { b, schoolId } = await signedIn(plan);
      const page = await b.get('/settings/api');
      assert.equal(page.status, 200);
      assert.match(unescapeHtml(page.text), new RegExp(`Your school's plan, ${plan}, does not include API access`));
      assert.match(page.text, /Profi and VIP plans/);
      assert.ok(!page.text.includes('action="/settings/api/keys"'), 'create form shown');
      assert.ok(!page.text.includes('Create key'));
      // A hand-made form (there is no button to press) is refused too.
      const csrf = formFields(page.text, '/logout').csrf!;
      const forced = await b.post('/settings/api/keys', { csrf, nonce: randomBytes(32).toString('base64url'), name: 'x' });
      assert.equal(forced.status, 409);
      assert.match(forced.text, /The key was not created/);
      assert.match(forced.text, /id="no-api-plan"/);
      assert.equal(await activeKeys(schoolId), 0);
    });
  }

  it('shows the keys of a school moved down to Standart, and that they are refused until it moves back', async () => {
    const { b, schoolId } = await signedIn('Profi');
    assert.ok((await createKey(store.db, schoolId, 'старый')).ok);
    await setPlan(store.db, schoolId, 'Standart');
    const page = await b.get('/settings/api');
    assert.match(page.text, /refused \(402\)/);
    assert.equal(keyRows(page.text).length, 1);
  });

  it(`says so, and offers no create button, when ${MAX_ACTIVE_KEYS} keys are active`, async () => {
    const { b, schoolId } = await signedIn('VIP');
    const ids: string[] = [];
    for (let i = 0; i < MAX_ACTIVE_KEYS; i++) {
      const k = await createKey(store.db, schoolId, `k${i}`);
      assert.ok(k.ok);
      ids.push(k.value.id);
    }
    const full = await b.get('/settings/api');
    assert.match(full.text, /Your school has 10 active keys, the most it can have/);
    assert.match(full.text, /Revoke a key that is no longer used/);
    assert.ok(!full.text.includes('action="/settings/api/keys"'));
    const csrf = formFields(full.text, '/logout').csrf!;
    const forced = await b.post('/settings/api/keys', { csrf, nonce: randomBytes(32).toString('base64url'), name: 'eleventh' });
    assert.equal(forced.status, 409);
    assert.match(forced.text, /The key was not created/);
    assert.match(forced.text, /id="key-limit"/);
    assert.equal(await activeKeys(schoolId), MAX_ACTIVE_KEYS);

    const href = `/settings/api/keys/${ids[0]}/revoke`;
    assert.equal((await b.post(href, formFields((await b.get(href)).text, href))).status, 303);
    const again = await b.get('/settings/api');
    assert.ok(again.text.includes('action="/settings/api/keys"'), 'create form back after a revoke');
    assert.match(again.text, /9 of 10 active keys in use/);
  });
});
