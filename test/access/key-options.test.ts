/**
 * The options of a key (docs/api/keys.md) through the real HTTPS server on both stores:
 * scopes (403 insufficient_scope after 405/401/402/429/404, before 400), expiry, the
 * unused-key revocation, address allowlists with and without a trusted proxy, rolling
 * with an overlap, and the sweep that records each ending once in the audit.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { sql, type Transaction } from 'kysely';
import { announceKeyChanges, openBulkConnection, openStore } from '../../src/db/index.js';
import { openMigrationConnection } from '../../src/db/postgres-migrations.js';
import type { Database } from '../../src/db/schema.js';
import { formatTimestamp } from '../../src/domain/time.js';
import { createSchool } from '../../src/management/schools.js';
import { createKey, keyEvents, listKeys, revokeKey, rollKey, setAllowlist, sweepKeys, type KeyOptions } from '../../src/management/keys.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { seedWorld, type World } from '../helpers/world.js';

const DAY = 86_400_000;

describe('key options on the request path', () => {
  let t: TestApp;
  let proxied: TestApp;
  let w: World;

  before(async () => {
    t = await startTestApp();
    // The same store behind a proxy on the loopback address, which it trusts.
    proxied = await startTestApp({ store: t.store, config: { trustedProxies: '127.0.0.1' } });
    w = await seedWorld(t.store.db);
  });
  after(async () => {
    await proxied.close();
    await t.close();
  });

  /** A VIP school of its own (no data), so each test has its 10 places. */
  async function freshSchool(): Promise<string> {
    const created = await createSchool(t.store.db, { name: 'Options', plan: 'VIP', id: `ko_${randomBytes(5).toString('hex')}` });
    assert.ok(created.ok);
    return created.value.id;
  }

  async function keyWith(options: KeyOptions, schoolId = w.a.id) {
    const created = await createKey(t.store.db, schoolId, `opt ${randomBytes(3).toString('hex')}`, options);
    assert.ok(created.ok, created.ok ? '' : created.reason);
    return created.value;
  }

  const code = (res: { json: () => unknown }) => (res.json() as { code: string }).code;

  it('scopes: 403 insufficient_scope outside them, after 405, 401 and 404 and before 400', async () => {
    const k = await keyWith({ scopes: ['students', 'lessons'] });
    assert.equal((await t.request('/api/public/v1/students', { key: k.key })).status, 200);
    assert.equal((await t.request('/api/public/v1/lessons', { key: k.key })).status, 200);
    for (const path of ['/api/public/v1/payments', '/api/public/v1/contracts', '/api/public/v1/reports/finance-summary', '/api/public/v1/students/s1', '/api/public/v1/instructors', '/api/public/v1/vehicles', '/api/public/v1/leads']) {
      const res = await t.request(path, { key: k.key });
      assert.equal(res.status, 403, path);
      assert.equal(code(res), 'insufficient_scope');
      assert.equal(res.headers['www-authenticate'], 'Bearer error="insufficient_scope"');
      assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
    }
    // Before 400: a bad query outside the scopes is still 403; inside them it is 400.
    assert.equal((await t.request('/api/public/v1/payments?limit=abc', { key: k.key })).status, 403);
    assert.equal((await t.request('/api/public/v1/students?limit=abc', { key: k.key })).status, 400);
    // After 405, 401 and the unknown path's 404.
    assert.equal((await t.request('/api/public/v1/payments', { key: k.key, method: 'DELETE' })).status, 405);
    assert.equal((await t.request('/api/public/v1/payments', { key: w.revokedKey })).status, 401);
    assert.equal((await t.request('/api/public/v1/nothing-here', { key: k.key })).status, 404);
    // A key limited to finance reads the summary.
    const f = await keyWith({ scopes: ['finance'] });
    assert.equal((await t.request('/api/public/v1/reports/finance-summary?period_from=2026-01-01&period_to=2026-12-31', { key: f.key })).status, 200);
    assert.equal((await t.request('/api/public/v1/students', { key: f.key })).status, 403);
    // The student card needs students and contracts (it carries the contracts' money).
    const card = await keyWith({ scopes: ['students', 'contracts'] });
    assert.notEqual((await t.request('/api/public/v1/students/s1', { key: card.key })).status, 403);
  });

  it('scopes: a 402 school and a used-up limit are answered first', async () => {
    const res = await t.request('/api/public/v1/payments', { key: w.downgradedKey });
    assert.equal(res.status, 402);
  });

  it('scopes: the changes feed carries only the key\'s resources, with answers and tags of its own', async () => {
    const k = await keyWith({ scopes: ['students', 'lessons'] });
    const all = await t.request('/api/public/v1/changes?limit=1000', { key: w.a.key });
    const some = await t.request('/api/public/v1/changes?limit=1000', { key: k.key });
    assert.equal(all.status, 200);
    assert.equal(some.status, 200);
    const kinds = (res: typeof all) => new Set((res.json() as { items: { resource: string }[] }).items.map((i) => i.resource));
    assert.ok(kinds(all).has('payments'));
    assert.deepEqual([...kinds(some)].sort(), ['lessons', 'students']);
    assert.notEqual(all.headers.etag, some.headers.etag);
    // Asked again (a stored answer now), each key still gets its own.
    const again = await t.request('/api/public/v1/changes?limit=1000', { key: k.key });
    assert.deepEqual([...kinds(again)].sort(), ['lessons', 'students']);
    const allAgain = await t.request('/api/public/v1/changes?limit=1000', { key: w.a.key });
    assert.ok(kinds(allAgain).has('payments'));
    // The full key's tag is not the scoped key's current one.
    assert.equal((await t.request('/api/public/v1/changes?limit=1000', { key: k.key, headers: { 'if-none-match': String(all.headers.etag) } })).status, 200);
    const outside = await t.request('/api/public/v1/changes?resources=payments', { key: k.key });
    assert.equal(outside.status, 403);
    assert.equal(code(outside), 'insufficient_scope');
    // Once the parameters are valid: a bad cursor is the 400 it is for any key.
    const badCursor = await t.request('/api/public/v1/changes?resources=payments&after=nope', { key: k.key });
    assert.equal(badCursor.status, 400, badCursor.text);
    assert.equal(code(badCursor), 'invalid_parameter');
    assert.equal((await t.request('/api/public/v1/changes?resources=students', { key: k.key })).status, 200);
    // A key with none of the feed's resources reads an empty feed.
    const f = await keyWith({ scopes: ['finance'] });
    const empty = await t.request('/api/public/v1/changes', { key: f.key });
    assert.equal(empty.status, 200);
    assert.deepEqual((empty.json() as { items: unknown[] }).items, []);
  });

  it('expiry: refused like a revoked key from expires_at on; the sweep records it once', async () => {
    const school = await freshSchool();
    const k = await keyWith({ expiresAt: formatTimestamp(Date.now() + DAY) }, school);
    assert.equal((await t.request('/api/public/v1/students', { key: k.key })).status, 200);
    // Time passes: the moment is moved back rather than waited for.
    await t.store.db.updateTable('api_keys').set({ expires_at: formatTimestamp(Date.now() - 1000) }).where('id', '=', k.id).execute();
    // As a tool writing the table would: wait until every server has heard of it (src/db/watch.ts).
    await announceKeyChanges(t.store.db);
    const res = await t.request('/api/public/v1/students', { key: k.key });
    assert.equal(res.status, 401);
    assert.equal(res.headers['www-authenticate'], 'Bearer realm="school-data"');
    const listed = (await listKeys(t.store.db, school)).find((c) => c.id === k.id)!;
    assert.equal(listed.status, 'expired');
    await sweepKeys(t.store.db, { unusedDays: 90 });
    const events = (await keyEvents(t.store.db, school, { keyId: k.id })).map((e) => e.event);
    assert.deepEqual(events, ['expired', 'created']);
  });

  it('an ended key not yet marked so: a revoke keeps its end, its allowlist cannot change', async () => {
    const school = await freshSchool();
    const expired = await keyWith({ expiresAt: formatTimestamp(Date.now() + DAY) }, school);
    const other = await keyWith({ expiresAt: formatTimestamp(Date.now() + DAY) }, school);
    // Time passes, and no sweep, key list or cabinet page has marked the keys yet.
    await t.store.db.updateTable('api_keys').set({ expires_at: formatTimestamp(Date.now() - 1000) }).where('id', 'in', [expired.id, other.id]).execute();
    const revoked = await revokeKey(t.store.db, expired.id, school, 'director@example.test', { unusedDays: 90 });
    assert.ok(revoked.ok);
    assert.equal(revoked.value.status, 'expired');
    assert.equal(revoked.value.revoke_reason, 'expired');
    const allowed = await setAllowlist(t.store.db, other.id, ['10.0.0.0/8'], 'director@example.test', { unusedDays: 90 }, school);
    assert.ok(!allowed.ok);
    assert.match(allowed.reason, /has expired; its options can no longer change/);
    const row = await t.store.db.selectFrom('api_keys').select(['allow', 'revoke_reason']).where('id', '=', other.id).executeTakeFirstOrThrow();
    assert.deepEqual(row, { allow: null, revoke_reason: 'expired' });
    for (const k of [expired, other]) {
      const events = (await keyEvents(t.store.db, school, { keyId: k.id })).map((e) => [e.event, e.actor]);
      assert.deepEqual(events, [['expired', 'operator'], ['created', 'operator']], k.id);
    }
  });

  it('unused keys: refused after SCHOOL_DATA_KEY_UNUSED_DAYS from the last use or creation; revoked once as unused', async () => {
    const school = await freshSchool();
    const never = await keyWith({}, school);
    const used = await keyWith({}, school);
    const old = formatTimestamp(Date.now() - 91 * DAY);
    await t.store.db.updateTable('api_keys').set({ created_at: old }).where('id', 'in', [never.id, used.id]).execute();
    await t.store.db.updateTable('api_keys').set({ last_used_at: formatTimestamp(Date.now() - 10 * DAY) }).where('id', '=', used.id).execute();
    // First through an instance that has checked no key with an end date yet: the rule
    // holds from its first request, not from the first request of a key that expires.
    const untouched = await startTestApp({ store: t.store });
    try {
      assert.equal((await untouched.request('/api/public/v1/students', { key: never.key })).status, 401);
    } finally {
      await untouched.close();
    }
    assert.equal((await t.request('/api/public/v1/students', { key: never.key })).status, 401);
    assert.equal((await t.request('/api/public/v1/students', { key: used.key })).status, 200);
    const card = (await listKeys(t.store.db, school, { unusedDays: 90 })).find((c) => c.id === never.id)!;
    assert.equal(card.status, 'revoked');
    assert.equal(card.revoke_reason, 'unused');
    assert.equal(await sweepKeys(t.store.db, { unusedDays: 90 }), 0, 'the list already swept it');
    const events = (await keyEvents(t.store.db, school, { keyId: never.id })).map((e) => [e.event, e.actor]);
    assert.deepEqual(events, [['revoked_unused', 'operator'], ['created', 'operator']]);
    const usedCard = (await listKeys(t.store.db, school, { unusedDays: 90 })).find((c) => c.id === used.id)!;
    assert.equal(usedCard.status, 'active');
    assert.ok(usedCard.unused_revoke_at !== null && usedCard.unused_revoke_at > formatTimestamp(Date.now() + 79 * DAY));
    // A key that expires first is never revoked as unused: no such date is shown.
    const soon = await keyWith({ expiresAt: formatTimestamp(Date.now() + 3 * DAY) }, school);
    const soonCard = (await listKeys(t.store.db, school, { unusedDays: 90 })).find((c) => c.id === soon.id)!;
    assert.deepEqual([soonCard.status, soonCard.unused_revoke_at], ['active', null]);
  });

  it('unused keys: judged so a minute after the period ends, so a use that reaches the database seconds late counts; an expiry within it ends the key first', async () => {
    const school = await freshSchool();
    const inGrace = await keyWith({}, school);
    const past = await keyWith({}, school);
    const lastUsed = (key: { id: string }, afterPeriod: number) =>
      t.store.db.updateTable('api_keys').set({ last_used_at: formatTimestamp(Date.now() - 90 * DAY - afterPeriod) }).where('id', '=', key.id).execute();
    await lastUsed(inGrace, 30_000);
    await lastUsed(past, 90_000);
    await announceKeyChanges(t.store.db);
    // The sweep (a key list runs one) marks only the key past the grace, dated at its period's end.
    const cards = await listKeys(t.store.db, school, { unusedDays: 90 });
    const card = (id: string) => cards.find((c) => c.id === id)!;
    assert.deepEqual([card(inGrace.id).status, card(past.id).status, card(past.id).revoke_reason], ['active', 'revoked', 'unused']);
    assert.ok(card(past.id).revoked_at! < formatTimestamp(Date.now() - 60_000));
    assert.equal((await t.request('/api/public/v1/students', { key: inGrace.key })).status, 200);
    assert.equal((await t.request('/api/public/v1/students', { key: past.key })).status, 401);
    // A key that expired within that minute ended by its expiry, whenever the sweep runs.
    const expiring = await keyWith({}, school);
    const periodEnd = Date.now() - 90_000;
    await t.store.db.updateTable('api_keys').set({ last_used_at: formatTimestamp(periodEnd - 90 * DAY), expires_at: formatTimestamp(periodEnd + 25_000) }).where('id', '=', expiring.id).execute();
    const swept = (await listKeys(t.store.db, school, { unusedDays: 90 })).find((c) => c.id === expiring.id)!;
    assert.deepEqual([swept.status, swept.revoke_reason, swept.revoked_at], ['expired', 'expired', formatTimestamp(periodEnd + 25_000)]);
  });

  it('allowlist: 403 address_not_allowed from elsewhere; X-Forwarded-For counts only from a trusted proxy', async () => {
    const school = await freshSchool();
    const k = await keyWith({ allow: ['203.0.113.7', '10.0.0.0/8'] }, school);
    const direct = await t.request('/api/public/v1/students', { key: k.key, headers: { 'x-forwarded-for': '203.0.113.7' } });
    assert.equal(direct.status, 403);
    assert.equal(code(direct), 'address_not_allowed');
    assert.equal(direct.headers['www-authenticate'], undefined);
    // Refused before the rate limit: it spends none of the school's quota, but says where it stands.
    assert.match(String(direct.headers['ratelimit-policy']), /^"default";q=\d+;w=60$/);
    assert.match(String(direct.headers.ratelimit), /^"default";r=\d+;t=\d+$/);
    const remaining = (res: { headers: Record<string, unknown> }) => Number(/;r=(\d+);/.exec(String(res.headers.ratelimit))![1]);
    const first = await proxied.request('/api/public/v1/students', { key: k.key, headers: { 'x-forwarded-for': '203.0.113.7' } });
    assert.equal(first.status, 200);
    const elsewhere = await proxied.request('/api/public/v1/students', { key: k.key, headers: { 'x-forwarded-for': '198.51.100.9' } });
    assert.equal(elsewhere.status, 403);
    assert.equal(remaining(elsewhere), remaining(first));
    const next = await proxied.request('/api/public/v1/students', { key: k.key, headers: { 'x-forwarded-for': '203.0.113.7' } });
    assert.equal(remaining(next), remaining(first) - 1);
    assert.equal((await proxied.request('/api/public/v1/students', { key: k.key, headers: { 'x-forwarded-for': '10.20.30.40' } })).status, 200);
    // A proxy that writes the client's port too (some load balancers do): the address is what counts.
    const withPort = await proxied.request('/api/public/v1/students', { key: k.key, headers: { 'x-forwarded-for': '203.0.113.7:51234' } });
    assert.equal(withPort.status, 200);
    assert.equal((await proxied.request('/api/public/v1/students', { key: k.key, headers: { 'x-forwarded-for': '198.51.100.1:443' } })).status, 403);
    // A trusted hop written with its port is a hop, not the client (10.0.0.2 is in the allowlist).
    const chained = await startTestApp({ store: t.store, config: { trustedProxies: '127.0.0.1,10.0.0.2' } });
    try {
      assert.equal((await chained.request('/api/public/v1/students', { key: k.key, headers: { 'x-forwarded-for': '203.0.113.7, 10.0.0.2:443' } })).status, 200);
      assert.equal((await chained.request('/api/public/v1/students', { key: k.key, headers: { 'x-forwarded-for': '198.51.100.1, 10.0.0.2:443' } })).status, 403);
    } finally {
      await chained.close();
    }
    const refused = await proxied.request('/api/public/v1/students', { key: k.key, headers: { 'x-forwarded-for': '198.51.100.1' } });
    assert.equal(refused.status, 403);
    // The access line names the client the trusted proxy reports, as the key's request log does.
    const addressLogged = (res: { headers: Record<string, unknown> }) =>
      proxied.logs.join('').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { requestId?: string; req?: { remoteAddress?: string } }).find((l) => l.requestId === res.headers['x-request-id'])?.req?.remoteAddress;
    assert.equal(addressLogged(refused), '198.51.100.1');
    assert.equal(addressLogged(withPort), '203.0.113.7');
    // What a client wrote itself, passed on by the proxy, is not an address: the proxy's is logged
    // (never that text: here a key, which the app's close checks no log line holds).
    const written = await proxied.request('/api/public/v1/students', { key: w.a.key, headers: { 'x-forwarded-for': w.a.key } });
    assert.equal(written.status, 200);
    assert.equal(addressLogged(written), '127.0.0.1');
    assert.equal((await proxied.request('/api/public/v1/students', { key: k.key, headers: { 'x-forwarded-for': 'not-an-address' } })).status, 403);
    // A bad key is 401 whatever the address; the allowlist comes after the key.
    assert.equal((await t.request('/api/public/v1/students', { key: w.revokedKey })).status, 401);
    // A change takes effect on the next request.
    assert.ok((await setAllowlist(t.store.db, k.id, ['127.0.0.1', '::1'], 'director@example.ru')).ok);
    assert.equal((await t.request('/api/public/v1/students', { key: k.key })).status, 200);
    assert.ok((await setAllowlist(t.store.db, k.id, ['2001:db8::/32'])).ok);
    assert.equal((await t.request('/api/public/v1/students', { key: k.key })).status, 403);
    assert.ok((await setAllowlist(t.store.db, k.id, null)).ok);
    assert.equal((await t.request('/api/public/v1/students', { key: k.key })).status, 200);
    const events = (await keyEvents(t.store.db, school, { keyId: k.id })).map((e) => [e.event, e.actor]);
    assert.deepEqual(events, [['options_changed', 'operator'], ['options_changed', 'operator'], ['options_changed', 'director@example.ru'], ['created', 'operator']]);
  });

  it('rolling: both keys work during the overlap, the old one is refused after it; "now" ends it at once', async () => {
    const school = await freshSchool();
    const k = await keyWith({ scopes: ['students'], allow: ['127.0.0.1', '::1'] }, school);
    const rolled = await rollKey(t.store.db, k.id, '1h');
    assert.ok(rolled.ok, rolled.ok ? '' : rolled.reason);
    const fresh = rolled.value.created;
    assert.deepEqual(fresh.scopes, ['students']);
    assert.deepEqual(fresh.allow, ['127.0.0.1', '::1']);
    assert.equal(fresh.rolled_from, k.id);
    assert.equal((await t.request('/api/public/v1/students', { key: k.key })).status, 200);
    assert.equal((await t.request('/api/public/v1/students', { key: fresh.key })).status, 200);
    assert.equal((await t.request('/api/public/v1/payments', { key: fresh.key })).status, 403);
    assert.equal((await rollKey(t.store.db, k.id, '1h')).ok, false, 'rolled twice');
    await t.store.db.updateTable('api_keys').set({ retires_at: formatTimestamp(Date.now() - 1000) }).where('id', '=', k.id).execute();
    await announceKeyChanges(t.store.db);
    assert.equal((await t.request('/api/public/v1/students', { key: k.key })).status, 401);
    assert.equal((await t.request('/api/public/v1/students', { key: fresh.key })).status, 200);
    await sweepKeys(t.store.db, { unusedDays: 90 });
    await sweepKeys(t.store.db, { unusedDays: 90 });
    assert.deepEqual((await keyEvents(t.store.db, school, { keyId: k.id })).map((e) => e.event), ['revoked', 'rolled', 'created']);

    const again = await rollKey(t.store.db, fresh.id, 'now');
    assert.ok(again.ok);
    assert.equal((await t.request('/api/public/v1/students', { key: fresh.key })).status, 401);
    assert.equal((await t.request('/api/public/v1/students', { key: again.value.created.key })).status, 200);
    assert.equal(again.value.old.revoke_reason, 'rolled');
  });

  it('rolling needs a free place among the 10 active keys', async () => {
    const school = await freshSchool();
    const active = (await listKeys(t.store.db, school)).filter((c) => c.status === 'active').length;
    let last = '';
    for (let i = active; i < 10; i++) last = (await keyWith({}, school)).id;
    const refused = await rollKey(t.store.db, last, 'now');
    assert.equal(refused.ok, false);
    assert.match(refused.ok ? '' : refused.reason, /10 active keys/);
  });

  it('a roll waits for a revoke or an allowlist change of its key under way, and rolls what they leave', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only: SQLite runs one writer at a time' }, async () => {
    const school = await freshSchool();
    /** Runs `change` on the key's row in a transaction of another connection, left open 300 ms while the roll starts. */
    const whileChanging = async <T>(keyId: string, change: string, roll: () => Promise<T>): Promise<T> => {
      const other = new pg.Client({ connectionString: t.store.url! });
      await other.connect();
      try {
        await other.query('begin');
        await other.query(`update api_keys set ${change} where id = $1`, [keyId]);
        const rolled = roll();
        await new Promise((r) => setTimeout(r, 300));
        await other.query('commit');
        return await rolled;
      } finally {
        await other.end();
      }
    };
    const revoked = await keyWith({}, school);
    const refused = await whileChanging(revoked.id, "revoked_at = '2026-01-01T00:00:00Z', revoke_reason = 'revoked'", () => rollKey(t.store.db, revoked.id, 'now'));
    assert.deepEqual(refused, { ok: false, reason: `key "${revoked.id}" is revoked; only an active key can be rolled` });
    const row = await t.store.db.selectFrom('api_keys').select(['revoke_reason', 'retires_at']).where('id', '=', revoked.id).executeTakeFirstOrThrow();
    assert.deepEqual(row, { revoke_reason: 'revoked', retires_at: null }, 'the revoke stands');
    const narrowed = await keyWith({ allow: ['10.0.0.0/8'] }, school);
    const rolled = await whileChanging(narrowed.id, "allow = '10.0.0.7'", () => rollKey(t.store.db, narrowed.id, '1h'));
    assert.ok(rolled.ok, rolled.ok ? '' : rolled.reason);
    assert.deepEqual(rolled.value.created.allow, ['10.0.0.7'], 'the new key has the allowlist the change left');
  });

  it('keeps the 10 active keys on a database whose transactions default to repeatable read', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' }, async () => {
    const school = await freshSchool();
    for (let i = 0; i < 9; i++) await keyWith({}, school);
    const url = new URL(t.store.url!);
    url.searchParams.set('options', `${url.searchParams.get('options')} -c default_transaction_isolation=repeatable\\ read`);
    const store = openStore({ databaseUrl: url.toString(), dataDir: t.store.dataDir, dbTimeoutMs: 3000, dbPoolSize: 4 });
    try {
      // Both transactions read before either takes the school's lock: a snapshot of repeatable
      // read taken then would not see the other's key once it waited for the lock.
      const readFirst = async (trx: Transaction<Database>) => {
        await sql`select 1`.execute(trx);
        await new Promise((r) => setTimeout(r, 200));
      };
      const made = await Promise.all([1, 2].map((n) => createKey(store.db, school, `tenth ${n}`, {}, 'operator', { unusedDays: 0 }, readFirst)));
      assert.deepEqual(made.map((m) => m.ok).sort(), [false, true]);
      const active = await t.store.db.selectFrom('api_keys').select((eb) => eb.fn.countAll<number>().as('n')).where('school_id', '=', school).where('revoked_at', 'is', null).executeTakeFirstOrThrow();
      assert.equal(Number(active.n), 10);
      // The import's own connection and the migrations' too.
      const bulk = await openBulkConnection(store.db);
      try {
        assert.deepEqual((await bulk.run(sql`show transaction_isolation`.compile(store.db))).rows, [{ transaction_isolation: 'read committed' }]);
      } finally {
        await bulk.close();
      }
      const migration = openMigrationConnection(pg, { connectionString: url.toString() });
      try {
        assert.deepEqual((await sql<{ transaction_isolation: string }>`show transaction_isolation`.execute(migration)).rows, [{ transaction_isolation: 'read committed' }]);
      } finally {
        await migration.destroy();
      }
    } finally {
      await store.close();
    }
  });
});
