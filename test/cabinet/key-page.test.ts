/**
 * A key's own page and the key options in the cabinet: creating a key with scopes, an
 * expiry day and an allowlist; the key's page (options, chart, events); changing the
 * allowlist (seen by the API's next request); rolling with an overlap (the new key shown
 * once); requests made with the key through the API, in its last requests and its chart;
 * the warnings for keys that end within 7 days; another school's key is 404.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { formatTimestamp } from '../../src/domain/time.js';
import { changeOwnPassword, SESSION_ENDED, setDirectorPassword, verifyDirector, WRONG_CURRENT_PASSWORD } from '../../src/management/directors.js';
import { createKey, keyEvents } from '../../src/management/keys.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { formFields, seedDirector, startTestCabinet, TEST_SCRYPT, unescapeHtml, type CabinetBrowser, type TestCabinet } from '../helpers/cabinet.js';
import { createTestStore, refuseInserts, type TestStore } from '../helpers/store.js';

const KEY = /service_pk_[0-9a-f]{32}/g;
const STUDENTS = '/api/public/v1/students';

describe('a key\'s page and options in the cabinet', () => {
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

  async function signedIn(): Promise<{ b: CabinetBrowser; schoolId: string; email: string }> {
    const d = await seedDirector(store.db, 'VIP');
    const b = t.browser();
    assert.equal((await b.login(d.email, d.password)).status, 303);
    return { b, schoolId: d.schoolId, email: d.email.toLowerCase() };
  }

  /** Sends the create form with `fields` and exactly the scope checkboxes named, in order (repeats kept). */
  function createWithScopes(b: CabinetBrowser, fields: Record<string, string>, scopes: string[]) {
    const body = new URLSearchParams(fields);
    for (const name of Object.keys(fields)) if (name.startsWith('scope_')) body.delete(name);
    for (const scope of scopes) body.append(`scope_${scope}`, '1');
    return b.post('/settings/api/keys', {}, { body: body.toString() });
  }

  it('creates a key with scopes, an expiry day and an allowlist, and refuses bad options keeping what was typed', async () => {
    const { b, schoolId, email } = await signedIn();
    const form = formFields((await b.get('/settings/api')).text, '/settings/api/keys');
    const bad = await b.post('/settings/api/keys', { ...form, name: 'Site', allow: '10.0.0.0/40' });
    assert.equal(bad.status, 400);
    assert.match(bad.text, /id="options-error"/);
    assert.match(bad.text, /value="10.0.0.0\/40"/);
    const created = await createWithScopes(b, { ...form, name: 'Site', expires: '2099-01-31', allow: '127.0.0.1, ::1' }, ['students', 'lessons']);
    assert.equal(created.status, 200, created.text);
    const key = created.text.match(KEY)![0];
    const row = await store.db.selectFrom('api_keys').selectAll().where('school_id', '=', schoolId).executeTakeFirstOrThrow();
    assert.equal(row.scopes, 'students,lessons');
    assert.equal(row.allow, '127.0.0.1,::1');
    assert.equal(row.expires_at, '2099-01-31T21:00:00Z', 'the end of 31 January in Moscow');
    // Shown as the end of the day chosen, not as the first minute of the next.
    assert.match((await b.get('/settings/api')).text, /until 2099-01-31 24:00/);
    assert.equal((await api.request(STUDENTS, { key })).status, 200);
    assert.equal((await api.request('/api/public/v1/payments', { key })).status, 403);
    const events = await keyEvents(store.db, schoolId);
    assert.equal(events[0]!.actor, email);
  });

  it('takes the last day the stored form has as an expiry where it ends within it, and says a later one is too far ahead', async () => {
    const { b, schoolId } = await signedIn();
    const form = formFields((await b.get('/settings/api')).text, '/settings/api/keys');
    // Moscow is ahead of UTC: the end of 9999-12-31 there is still in the year 9999.
    const east = await b.post('/settings/api/keys', { ...form, name: 'Far east', expires: '9999-12-31' });
    assert.equal(east.status, 200, east.text);
    const row = await store.db.selectFrom('api_keys').select('expires_at').where('school_id', '=', schoolId).executeTakeFirstOrThrow();
    assert.equal(row.expires_at, '9999-12-31T21:00:00Z');
    // West of UTC it is in the year 10000: not "not a date", but too far ahead.
    await store.db.updateTable('schools').set({ timezone: 'America/New_York' }).where('id', '=', schoolId).execute();
    const again = formFields((await b.get('/settings/api')).text, '/settings/api/keys');
    const west = await b.post('/settings/api/keys', { ...again, name: 'Far west', expires: '9999-12-31' });
    assert.equal(west.status, 400);
    assert.match(unescapeHtml(west.text), /The expiry date is too far ahead/);
    assert.match(west.text, /value="9999-12-31"/);
  });

  it('refuses a name that holds a key, keeping what was typed, and makes none', async () => {
    const { b, schoolId } = await signedIn();
    const form = formFields((await b.get('/settings/api')).text, '/settings/api/keys');
    const refused = await b.post('/settings/api/keys', { ...form, name: `prod service_pk_${'0f'.repeat(16)}` });
    assert.equal(refused.status, 400);
    assert.match(unescapeHtml(refused.text), /The name cannot hold a key \(service_pk_\.\.\.\)/);
    assert.equal((await store.db.selectFrom('api_keys').select('id').where('school_id', '=', schoolId).execute()).length, 0);
  });

  it('counts a scope checkbox sent twice as ticked, never as no choice (all resources)', async () => {
    const { b, schoolId } = await signedIn();
    const form = formFields((await b.get('/settings/api')).text, '/settings/api/keys');
    const created = await createWithScopes(b, { ...form, name: 'Twice' }, ['students', 'students']);
    assert.equal(created.status, 200, created.text);
    const key = created.text.match(KEY)![0];
    const row = await store.db.selectFrom('api_keys').select('scopes').where('school_id', '=', schoolId).executeTakeFirstOrThrow();
    assert.equal(row.scopes, 'students');
    assert.equal((await api.request('/api/public/v1/payments', { key })).status, 403);
  });

  it('shows the key\'s page, changes its allowlist (the API sees it at once) and rolls it', async () => {
    const { b, schoolId, email } = await signedIn();
    const made = await createKey(store.db, schoolId, 'Accounting', { allow: ['127.0.0.1', '::1'] });
    assert.ok(made.ok);
    const path = `/settings/api/keys/${made.value.id}`;
    const page = await b.get(path);
    assert.equal(page.status, 200);
    assert.match(page.text, /id="key-scopes">all resources</);
    assert.match(page.text, /<svg [^>]*role="img"/);
    assert.ok(!/<(script|img|link)[^>]+(src|href)="https?:/i.test(page.text), 'no external assets');
    assert.match(page.text, /id="key-events"/);

    const refused = await b.submit(path, `${path}/allow`, { allow: 'not an address' });
    assert.equal(refused.status, 400);
    assert.match(refused.text, /id="allow-error"/);
    const pastPrefix = await b.submit(path, `${path}/allow`, { allow: '127.0.0.1, 10.0.0.1/8' });
    assert.equal(pastPrefix.status, 400);
    assert.match(unescapeHtml(pastPrefix.text), /“10\.0\.0\.1\/8” has address bits past its prefix: write 10\.0\.0\.0\/8 for the whole range, or 10\.0\.0\.1 for the one address\./);
    const saved = await b.submit(path, `${path}/allow`, { allow: '203.0.113.0/24' });
    assert.equal(saved.status, 303);
    assert.equal((await api.request(STUDENTS, { key: made.value.key })).status, 403);
    assert.equal((await b.submit(path, `${path}/allow`, { allow: '' })).status, 303);
    assert.equal((await api.request(STUDENTS, { key: made.value.key })).status, 200);

    const rolled = await b.submit(path, `${path}/roll`, { overlap: '1h' });
    assert.equal(rolled.status, 200);
    const shown = rolled.text.match(KEY) ?? [];
    assert.equal(shown.length, 1);
    assert.notEqual(shown[0], made.value.key);
    assert.equal((await api.request(STUDENTS, { key: made.value.key })).status, 200, 'the old key works during the overlap');
    assert.equal((await api.request(STUDENTS, { key: shown[0] })).status, 200);
    const after = await b.get(path);
    assert.match(after.text, /id="key-warning"/, 'the old key ends within 7 days');
    assert.ok(!after.text.includes('id="roll-key"'), 'rolled once');
    const events = (await keyEvents(store.db, schoolId, { keyId: made.value.id })).map((e) => [e.event, e.actor]);
    assert.deepEqual(events, [['rolled', email], ['options_changed', email], ['options_changed', email], ['created', 'operator']]);
  });

  /** The key's page once the usage flush has written `n` requests to its log and its day (polled, bounded). */
  async function pageWithRequests(b: CabinetBrowser, path: string, n: number): Promise<string> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const page = await b.get(path);
      assert.equal(page.status, 200);
      const rows = [...page.text.matchAll(/<tr><td class="nowrap">[^<]*<\/td><td><code>GET /g)].length;
      const today = /data-day="(\d{4}-\d\d-\d\d)" data-requests="(\d+)"><title>[^<]*<\/title><\/rect><\/g>/.exec(page.text);
      if ((rows >= n && Number(today?.[2]) >= n) || Date.now() > deadline) return page.text;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  it('shows the requests made with the key in its last requests and in the day\'s bar of its chart', async () => {
    const { b, schoolId } = await signedIn();
    const made = await createKey(store.db, schoolId, 'Integration');
    assert.ok(made.ok);
    const path = `/settings/api/keys/${made.value.id}`;
    const targets = [`${STUDENTS}?limit=2`, `${STUDENTS}?limit=0`, `${STUDENTS}/nobody`];
    const ids: string[] = [];
    for (const target of targets) ids.push(String((await api.request(target, { key: made.value.key })).headers['x-request-id']));

    const text = await pageWithRequests(b, path, 3);
    const rows = [...text.matchAll(/<tr><td class="nowrap">([^<]*)<\/td><td><code>GET ([^<]*)<\/code><\/td><td class="num">(\d+)<\/td><td class="num">[^<]*<\/td><td><code>([^<]*)<\/code><\/td><td><code class="small">([^<]*)<\/code>/g)];
    assert.deepEqual(rows.map((r) => unescapeHtml(r[2]!)), [...targets].reverse(), 'newest first');
    assert.deepEqual(rows.map((r) => r[3]), ['404', '400', '200']);
    assert.deepEqual(rows.map((r) => r[5]), [...ids].reverse());
    for (const r of rows) {
      assert.match(r[1]!, /^\d{4}-\d\d-\d\d \d\d:\d\d$/);
      assert.match(r[4]!, /^(127\.0\.0\.1|::ffff:127\.0\.0\.1)$/);
    }
    const bars = [...text.matchAll(/<rect [^>]*data-day="([^"]+)" data-requests="(\d+)"><title>([^<]*)<\/title>/g)];
    assert.equal(bars.length, 90);
    const today = new Date().toISOString().slice(0, 10);
    assert.deepEqual([bars.at(-1)![1], bars.at(-1)![2], bars.at(-1)![3]], [today, '3', `${today}: 3 requests`]);
    assert.ok(bars.slice(0, -1).every((bar) => bar[2] === '0'));
    assert.match(text, /aria-label="Requests per day: 3 in 90 days"/);
    assert.match(text, /3 requests in the last 90 days \(UTC days\)\./);
    assert.match(text, /<dd id="key-count">3<\/dd>/);

    // The same page in Russian: the bar's title, the caption, the dates.
    const ru = (await b.get(`${path}?lang=ru`)).text;
    const [y, m, d] = today.split('-');
    assert.match(ru, new RegExp(`<title>${d}\\.${m}\\.${y}: 3 запроса</title>`));
    assert.match(ru, /3 запроса за последние 90 дней \(дни по UTC\)\./);
    assert.match(ru, /<tr><td class="nowrap">\d\d\.\d\d\.\d{4}, \d\d:\d\d<\/td><td><code>GET /);
  });

  it('warns about keys that expire or will be revoked as unused within 7 days', async () => {
    const { b, schoolId } = await signedIn();
    const soon = await createKey(store.db, schoolId, 'Contractor', { expiresAt: formatTimestamp(Date.now() + 3 * 86_400_000) });
    const idle = await createKey(store.db, schoolId, 'Idle');
    assert.ok(soon.ok && idle.ok);
    await store.db.updateTable('api_keys').set({ created_at: formatTimestamp(Date.now() - 86 * 86_400_000) }).where('id', '=', idle.value.id).execute();
    const list = await b.get('/settings/api');
    assert.match(list.text, /id="key-warnings"/);
    assert.match(list.text, /Contractor”<\/a> expires/);
    assert.match(list.text, /Idle”<\/a> will be revoked as unused/);
  });

  it('warns of the soonest end when a key has several within 7 days', async () => {
    const { b, schoolId } = await signedIn();
    const day = 86_400_000;
    // Expires in 6 days, but unused for 85 of the 90 days: revoked as unused in 5 days.
    const idle = await createKey(store.db, schoolId, 'Idle expiring', { expiresAt: formatTimestamp(Date.now() + 6 * day) });
    assert.ok(idle.ok);
    await store.db.updateTable('api_keys').set({ created_at: formatTimestamp(Date.now() - 85 * day) }).where('id', '=', idle.value.id).execute();
    // Rolled with 7 days of overlap, but it expires in 2 days.
    const rolled = await createKey(store.db, schoolId, 'Rolled expiring', { expiresAt: formatTimestamp(Date.now() + 2 * day) });
    assert.ok(rolled.ok);
    await store.db.updateTable('api_keys').set({ retires_at: formatTimestamp(Date.now() + 7 * day) }).where('id', '=', rolled.value.id).execute();
    const list = await b.get('/settings/api');
    assert.match(list.text, /Idle expiring”<\/a> will be revoked as unused/);
    assert.match(list.text, /Rolled expiring”<\/a> expires/);
    assert.match((await b.get(`/settings/api/keys/${idle.value.id}`)).text, /id="key-warning"><p><strong>This key will be revoked as unused/);
    assert.match((await b.get(`/settings/api/keys/${rolled.value.id}`)).text, /id="key-warning"><p><strong>This key expires/);
  });

  it('says why a roll has no place for the new key: the 10 active keys, or the plan', async () => {
    const { b, schoolId } = await signedIn();
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const made = await createKey(store.db, schoolId, `Key ${i}`);
      assert.ok(made.ok);
      ids.push(made.value.id);
    }
    const path = `/settings/api/keys/${ids[0]}`;
    const full = await b.submit(path, `${path}/roll`, { overlap: 'now' });
    assert.equal(full.status, 409);
    assert.match(full.text, /10 active keys/);
    assert.match(full.text, /Revoke a key that is no longer used/);
    assert.doesNotMatch(full.text, /in the meantime/);

    await store.db.updateTable('schools').set({ plan: 'Standart' }).where('id', '=', schoolId).execute();
    const plan = await b.submit(path, `${path}/roll`, { overlap: '1h' });
    assert.equal(plan.status, 409);
    assert.match(plan.text, /plan, Standart, does not include API access/);
    assert.doesNotMatch(plan.text, /in the meantime/);

    const ru = await b.submit(`${path}?lang=ru`, `${path}/roll`, { overlap: '1h' });
    assert.equal(ru.status, 409);
    assert.match(ru.text, /Standart/);
    assert.doesNotMatch(ru.text, /тем временем/);
    assert.equal((await b.get('/settings/api?lang=en')).status, 200);
  });

  it('saves no addresses for a key that ended while its page was open (expired, overlap over)', async () => {
    const { b, schoolId } = await signedIn();
    for (const ended of [{ expires_at: formatTimestamp(Date.now() - 1000) }, { retires_at: formatTimestamp(Date.now() - 1000) }]) {
      const made = await createKey(store.db, schoolId, 'Ending');
      assert.ok(made.ok);
      const path = `/settings/api/keys/${made.value.id}`;
      const form = formFields((await b.get(path)).text, `${path}/allow`);
      // It ends with the page open; no sweep has marked it yet.
      await store.db.updateTable('api_keys').set(ended).where('id', '=', made.value.id).execute();
      const res = await b.post(`${path}/allow`, { ...form, allow: '10.0.0.1' });
      assert.equal(res.status, 409, JSON.stringify(ended));
      assert.match(res.text, /addresses were not saved/);
      const row = await store.db.selectFrom('api_keys').select('allow').where('id', '=', made.value.id).executeTakeFirstOrThrow();
      assert.equal(row.allow, null);
      const events = await keyEvents(store.db, schoolId, { keyId: made.value.id });
      assert.ok(!events.some((e) => e.event === 'options_changed'), 'no options_changed event on an ended key');
    }
  });

  it('leads a form\'s address opened as a page (the address bar after its answer) to the form\'s page', async () => {
    const { b, schoolId } = await signedIn();
    const made = await createKey(store.db, schoolId, 'Website');
    assert.ok(made.ok);
    const path = `/settings/api/keys/${made.value.id}`;
    for (const [address, to] of [['/settings/api/keys', '/settings/api'], [`${path}/allow`, path], [`${path}/roll`, path]] as const) {
      const res = await b.get(address);
      assert.equal(res.status, 303, address);
      assert.equal(res.location, to, address);
    }
    const other = await signedIn();
    const theirs = await createKey(store.db, other.schoolId, 'Theirs');
    assert.ok(theirs.ok);
    assert.equal((await b.get(`/settings/api/keys/${theirs.value.id}/roll`)).status, 404, 'another school\'s key: as for its page');
    assert.equal((await b.get('/settings/api/keys/nonsense/allow')).status, 404);
  });

  it('answers 404 for another school\'s key page and forms', async () => {
    const { b } = await signedIn();
    const other = await signedIn();
    const theirs = await createKey(store.db, other.schoolId, 'Theirs');
    assert.ok(theirs.ok);
    assert.equal((await b.get(`/settings/api/keys/${theirs.value.id}`)).status, 404);
    const csrf = formFields((await b.get('/settings/api')).text, '/settings/api/keys').csrf!;
    assert.equal((await b.post(`/settings/api/keys/${theirs.value.id}/allow`, { csrf, allow: '' })).status, 404);
  });

  it('leaves a create or roll form unused when the store fails to write its change: sent again, it works', async () => {
    const { b, schoolId } = await signedIn();
    const createForm = formFields((await b.get('/settings/api')).text, '/settings/api/keys');
    const made = await createKey(store.db, schoolId, 'To roll');
    assert.ok(made.ok);
    const path = `/settings/api/keys/${made.value.id}`;
    const rollForm = formFields((await b.get(path)).text, `${path}/roll`);
    const allow = await refuseInserts(store, 'api_keys');
    try {
      assert.equal((await b.post('/settings/api/keys', { ...createForm, name: 'Accounting' })).status, 500);
      assert.equal((await b.post(`${path}/roll`, { ...rollForm, overlap: '1h' })).status, 500);
    } finally {
      await allow();
    }
    const created = await b.post('/settings/api/keys', { ...createForm, name: 'Accounting' });
    assert.equal(created.status, 200, 'the create form was not used up');
    assert.equal(created.text.match(KEY)?.length, 1);
    const rolled = await b.post(`${path}/roll`, { ...rollForm, overlap: '1h' });
    assert.equal(rolled.status, 200, 'the roll form was not used up');
    assert.equal((await b.post('/settings/api/keys', { ...createForm, name: 'Accounting' })).status, 409, 'now it is');
  });

  it('shows a key\'s latest 200 events, and says so when it has more', async () => {
    const { b, schoolId } = await signedIn();
    const made = await createKey(store.db, schoolId, 'Busy');
    assert.ok(made.ok);
    const path = `/settings/api/keys/${made.value.id}`;
    const rows = (text: string) => text.slice(text.indexOf('id="key-events"')).split('</table>')[0]!.split('<tr>').length - 2;
    const few = await b.get(path);
    assert.equal(rows(few.text), 1);
    assert.ok(!few.text.includes('id="events-cut"'));
    const at = formatTimestamp(Date.now());
    const changes = Array.from({ length: 249 }, () => ({ school_id: schoolId, key_id: made.value.id, event: 'options_changed', actor: 'operator', at, detail: JSON.stringify({ allow: { from: null, to: null } }) }));
    await store.db.insertInto('key_events').values(changes.slice(0, 125)).execute();
    await store.db.insertInto('key_events').values(changes.slice(125)).execute();
    const many = await b.get(path);
    assert.equal(rows(many.text), 200);
    assert.match(many.text, /id="events-cut">The latest 200 events are shown; your platform&#39;s operator can list them all\./);
  });

  it(
    'changes nothing for a session that ended after its page was checked: a revoke, an allowlist, a new key and a roll all send it to sign in again',
    { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only: SQLite\'s transactions take the write lock first, so the window cannot be held open' },
    async () => {
      const waitingForSession = async () => {
        const waiting = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query ilike '%cabinet_sessions%for share%'`.execute(store.db);
        return waiting.rows[0]!.n > 0;
      };
      const forms: Record<string, (path: string) => { page: string; action: string; fields: Record<string, string> }> = {
        revoke: (path) => ({ page: `${path}/revoke`, action: `${path}/revoke`, fields: {} }),
        allow: (path) => ({ page: path, action: `${path}/allow`, fields: { allow: '203.0.113.0/24' } }),
        roll: (path) => ({ page: path, action: `${path}/roll`, fields: { overlap: 'now' } }),
        create: () => ({ page: '/settings/api', action: '/settings/api/keys', fields: { name: 'Late' } }),
      };
      for (const [name, formOf] of Object.entries(forms)) {
        const { b, schoolId } = await signedIn();
        const made = await createKey(store.db, schoolId, 'Accounting');
        assert.ok(made.ok);
        const form = formOf(`/settings/api/keys/${made.value.id}`);
        const fields = { ...formFields((await b.get(form.page)).text, form.action), ...form.fields };
        const session = await store.db.selectFrom('cabinet_sessions as s').innerJoin('directors as d', 'd.id', 's.director_id').select('s.id').where('d.school_id', '=', schoolId).executeTakeFirstOrThrow();
        // The session passes the page's check, then ends (a sign-out elsewhere) while the change waits for it.
        let sent: ReturnType<CabinetBrowser['post']> | undefined;
        await store.db.transaction().execute(async (trx) => {
          await trx.selectFrom('cabinet_sessions').select('id').where('id', '=', session.id).forUpdate().execute();
          sent = b.post(form.action, fields);
          for (let i = 0; i < 200 && !(await waitingForSession()); i++) await new Promise((resolve) => setTimeout(resolve, 10));
          assert.ok(await waitingForSession(), `${name}: the change waits for the session`);
          await trx.deleteFrom('cabinet_sessions').where('id', '=', session.id).execute();
        });
        const answer = await sent!;
        assert.equal(answer.status, 303, `${name}: ${answer.text}`);
        assert.equal(answer.location, '/login?expired=1', name);
        assert.match(String(answer.headers['set-cookie']), /__Host-sd_session=;/, `${name}: the cookie is cleared`);
        const keys = await store.db.selectFrom('api_keys').select(['id', 'revoked_at', 'retires_at', 'allow']).where('school_id', '=', schoolId).execute();
        assert.deepEqual(keys, [{ id: made.value.id, revoked_at: null, retires_at: null, allow: null }], `${name}: the keys are as they were`);
        assert.equal((await keyEvents(store.db, schoolId)).length, 1, `${name}: only the key's creation is recorded`);
        assert.equal((await api.request(STUDENTS, { key: made.value.key })).status, 200, `${name}: the key works as before`);
      }
    },
  );
});

describe('the director changes their own password', () => {
  let store: TestStore;
  let t: TestCabinet;

  before(async () => {
    store = await createTestStore();
    t = await startTestCabinet({ store });
  });
  after(async () => {
    await t.close();
    await store.close();
  });

  it('needs the current password, and ends every other session of theirs', async () => {
    const d = await seedDirector(store.db, 'VIP');
    const here = t.browser();
    const elsewhere = t.browser();
    assert.equal((await here.login(d.email, d.password)).status, 303);
    assert.equal((await elsewhere.login(d.email, d.password)).status, 303);
    const wrong = await here.submit('/settings/password', '/settings/password', { current: 'not the password', next: 'a brand new password 1' });
    assert.equal(wrong.status, 400);
    assert.match(wrong.text, /current password is not right/);
    const short = await here.submit('/settings/password', '/settings/password', { current: d.password, next: 'short' });
    assert.equal(short.status, 400);
    // Characters, not UTF-16 units: six emoji are six characters, too few.
    const emoji = await here.submit('/settings/password', '/settings/password', { current: d.password, next: '🔑🔐🗝🔒🔓🛡' });
    assert.equal(emoji.status, 400);
    assert.match(emoji.text, /at least 12 characters/);
    const before = here.cookies.get('__Host-sd_session');
    const changed = await here.submit('/settings/password', '/settings/password', { current: d.password, next: 'a brand new password 1' });
    assert.equal(changed.status, 200);
    assert.match(changed.text, /is changed/);
    const renewed = here.cookies.get('__Host-sd_session');
    assert.ok(before !== undefined && renewed !== undefined && renewed !== before, 'this browser is given a new session');
    const copy = t.browser();
    copy.cookies.set('__Host-sd_session', before);
    assert.notEqual((await copy.get('/settings/api')).status, 200, 'a copy of the old cookie no longer signs in');
    assert.equal((await here.get('/settings/api')).status, 200, 'this browser stays signed in');
    assert.notEqual((await elsewhere.get('/settings/api')).status, 200, 'the other session ended');
    assert.notEqual((await t.browser().login(d.email, d.password)).status, 303, 'the old password no longer signs in');
    // That was the account's fifth password attempt of the minute (sign-ins and changes count
    // alike): the new password is checked without a sixth.
    assert.ok(await verifyDirector(store.db, d.email, 'a brand new password 1'));
    // The page that said so carries the new session's form token.
    assert.equal((await here.post('/logout', formFields(changed.text, '/logout'))).status, 303);
    assert.notEqual((await here.get('/settings/api')).status, 200, 'signed out');
  });

  it("clears other directors' ended sessions at a sign-in, not within a password change's transaction", async () => {
    const other = await seedDirector(store.db, 'VIP');
    assert.equal((await t.browser().login(other.email, other.password)).status, 303);
    const otherSessions = store.db.selectFrom('cabinet_sessions').select('id').where('director_id', 'in', store.db.selectFrom('directors').select('id').where('school_id', '=', other.schoolId));
    const d = await seedDirector(store.db, 'VIP');
    const b = t.browser();
    assert.equal((await b.login(d.email, d.password)).status, 303);
    await store.db.updateTable('cabinet_sessions').set({ expires_at: formatTimestamp(Date.now() - 1000) }).where('id', 'in', otherSessions).execute();
    assert.equal((await b.submit('/settings/password', '/settings/password', { current: d.password, next: 'a brand new password 3' })).status, 200);
    assert.equal((await otherSessions.execute()).length, 1, 'left to the next sign-in');
    assert.equal((await t.browser().login(d.email, 'a brand new password 3')).status, 303);
    assert.equal((await otherSessions.execute()).length, 0);
  });

  it('loses to an operator\'s reset, or to a sign-out, made while the new password is hashed', async () => {
    // The production hash for the new password: it takes a while, and the others land meanwhile.
    const slow = { N: 2 ** 15, r: 8, p: 3 };
    const signedIn = async () => {
      const d = await seedDirector(store.db, 'VIP');
      assert.equal((await t.browser().login(d.email, d.password)).status, 303);
      const director = await store.db.selectFrom('directors').select('id').where('email', '=', d.email.toLowerCase()).executeTakeFirstOrThrow();
      const session = await store.db.selectFrom('cabinet_sessions').select('id').where('director_id', '=', director.id).executeTakeFirstOrThrow();
      return { d, directorId: director.id, sessionId: session.id };
    };
    const started: string[] = [];
    const newSession = () => {
      started.push('new');
      return Promise.resolve('new session');
    };
    const reset = await signedIn();
    const changing = changeOwnPassword(store.db, { email: reset.d.email, current: reset.d.password, next: 'a brand new password 5', sessionId: reset.sessionId }, newSession, slow);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok((await setDirectorPassword(store.db, reset.d.email, 'the operator\'s password 1', TEST_SCRYPT)).ok);
    // The reset ended the director's sessions, the asking one too.
    assert.deepEqual(await changing, { ok: false, reason: SESSION_ENDED });
    assert.ok(await verifyDirector(store.db, reset.d.email, 'the operator\'s password 1'), 'the reset stands');
    const out = await signedIn();
    const changingOut = changeOwnPassword(store.db, { email: out.d.email, current: out.d.password, next: 'a brand new password 6', sessionId: out.sessionId }, newSession, slow);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await store.db.deleteFrom('cabinet_sessions').where('id', '=', out.sessionId).execute();
    assert.deepEqual(await changingOut, { ok: false, reason: SESSION_ENDED });
    assert.ok(await verifyDirector(store.db, out.d.email, out.d.password), 'the password stayed');
    // The password changed meanwhile while the asking session lived on (nothing in the service does
    // that alone, but the check holds): refused as a wrong current password, and nothing written.
    const moved = await signedIn();
    const changingMoved = changeOwnPassword(store.db, { email: moved.d.email, current: moved.d.password, next: 'a brand new password 7', sessionId: moved.sessionId }, newSession, slow);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const elsewhere = await store.db.selectFrom('directors').select('password_hash').where('id', '!=', moved.directorId).executeTakeFirstOrThrow();
    await store.db.updateTable('directors').set({ password_hash: elsewhere.password_hash }).where('id', '=', moved.directorId).execute();
    assert.deepEqual(await changingMoved, { ok: false, reason: WRONG_CURRENT_PASSWORD });
    assert.equal((await store.db.selectFrom('cabinet_sessions').select('id').where('id', '=', moved.sessionId).execute()).length, 1, 'its session was not ended');
    assert.deepEqual(started, [], 'no new session was started');
  });

  it('changes the password and the sessions together, or neither when the store fails halfway', async () => {
    const d = await seedDirector(store.db, 'VIP');
    const b = t.browser();
    assert.equal((await b.login(d.email, d.password)).status, 303);
    const form = formFields((await b.get('/settings/password')).text, '/settings/password');
    const change = { ...form, current: d.password, next: 'a brand new password 2' };
    const allow = await refuseInserts(store, 'cabinet_sessions');
    try {
      assert.equal((await b.post('/settings/password', change)).status, 500);
    } finally {
      await allow();
    }
    assert.ok(await verifyDirector(store.db, d.email, d.password), 'the password stayed');
    assert.equal((await b.get('/settings/api')).status, 200, 'and the session with it');
    assert.equal((await b.post('/settings/password', change)).status, 200);
    assert.ok(await verifyDirector(store.db, d.email, 'a brand new password 2'));
  });
});
