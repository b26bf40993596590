/**
 * Signing in to the cabinet: one answer for a wrong email and a wrong password,
 * throttling per account and per client address (on the configured limiter: memory,
 * or Redis shared by every instance), session cookies and their expiry, sign-out,
 * and the sign-in form's own CSRF protection.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import tls from 'node:tls';
import { after, before, beforeEach, describe, it } from 'node:test';
import { LOGIN_ATTEMPTS_PER_ACCOUNT, LOGIN_ATTEMPTS_PER_ADDRESS } from '../../src/cabinet/throttle.js';
import { formFields, seedDirector, startTestCabinet, type CabinetBrowser, type Page, type SeededDirector, type TestCabinet } from '../helpers/cabinet.js';

const SESSION = '__Host-sd_session';
const LOGIN = '__Host-sd_login';

/** The error notice of a page (the text a director reads), or null. */
function errorNotice(page: Page): string | null {
  return /<div class="notice error"[^>]*><p>([\s\S]*?)<\/p>/.exec(page.text)?.[1] ?? null;
}

describe('cabinet sign-in', () => {
  let t: TestCabinet;
  // Every attempt counts against the account's limit, so each test signs in as a director of its own.
  let d: SeededDirector;

  before(async () => {
    t = await startTestCabinet();
  });
  beforeEach(async () => {
    d = await seedDirector(t.store.db, 'VIP');
  });
  after(() => t.close());

  const sessionRow = (b: CabinetBrowser) =>
    t.store.db
      .selectFrom('cabinet_sessions')
      .selectAll()
      .where('id', '=', createHash('sha256').update(b.cookies.get(SESSION) ?? '').digest('hex'))
      .executeTakeFirst();

  it('signs in with the right password (email in any case) and lands on Settings -> API', async () => {
    const b = t.browser();
    const res = await b.login(d.email.toUpperCase(), d.password);
    assert.equal(res.status, 303);
    assert.equal(res.location, '/settings/api');
    assert.ok(!b.cookies.has(LOGIN), 'the sign-in form cookie is cleared');
    const page = await b.get('/settings/api');
    assert.equal(page.status, 200);
    assert.match(page.text, /Settings › API/);
    assert.match(page.text, new RegExp(d.email.toLowerCase().replace(/\./g, '\\.')));
    // Already signed in: the sign-in page sends the director on.
    const again = await b.get('/login');
    assert.equal(again.status, 303);
    assert.equal(again.location, '/settings/api');
  });

  it('sets the session cookie as __Host-, Secure, HttpOnly, SameSite=Strict, Path=/ and stores only its hash', async () => {
    const b = t.browser();
    await b.get('/login');
    const res = await b.post('/login', { ...formFields((await b.get('/login')).text, '/login'), email: d.email, password: d.password });
    const cookies = ([] as string[]).concat(res.headers['set-cookie'] ?? []);
    const session = cookies.find((c) => c.startsWith(`${SESSION}=`));
    assert.ok(session, `no session cookie in ${JSON.stringify(cookies)}`);
    const attributes = session.split(';').map((a) => a.trim().toLowerCase());
    for (const a of ['secure', 'httponly', 'samesite=strict', 'path=/']) assert.ok(attributes.includes(a), `${a} missing: ${session}`);
    assert.ok(!attributes.some((a) => a.startsWith('domain=')), '__Host- cookies have no Domain');
    const token = b.cookies.get(SESSION)!;
    assert.match(token, /^[A-Za-z0-9_-]{43}$/, '32 random bytes');
    const rows = await t.store.db.selectFrom('cabinet_sessions').select('id').where('director_id', '=', d.directorId).execute();
    assert.ok(rows.every((r) => r.id !== token), 'the token itself is stored');
    assert.ok(rows.some((r) => r.id === createHash('sha256').update(token).digest('hex')));
  });

  it('takes a form body the client stops sending for a dropped connection, not for a store outage', async () => {
    const url = new URL(t.origin);
    const errorsBefore = t.logs.filter((l) => l.includes('"level":50')).length;
    const seen = t.logs.length;
    await new Promise<void>((resolve, reject) => {
      const socket = tls.connect({ host: url.hostname, port: Number(url.port), ca: t.ca, servername: 'localhost' }, () => {
        socket.write(`POST /login HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 50\r\n\r\ncsrf=x`);
        setTimeout(() => socket.destroy(), 300);
      });
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    // The server notices the closed connection, and logs it once, at info.
    for (let i = 0; i < 50 && !t.logs.slice(seen).some((l) => l.includes('before the request body arrived')); i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(t.logs.slice(seen).some((l) => l.includes('"level":30') && l.includes('connection closed before the request body arrived')), t.logs.slice(seen).join(''));
    assert.equal(t.logs.filter((l) => l.includes('"level":50')).length, errorsBefore, t.logs.slice(seen).join(''));
  });

  it('gives a wrong password and an unknown email the same answer, and logs no password', async () => {
    const wrongPassword = await t.browser().login(d.email, 'not the password at all');
    const unknownEmail = await t.browser().login(`nobody.${randomBytes(4).toString('hex')}@example.com`, d.password);
    assert.equal(wrongPassword.status, 400);
    assert.equal(unknownEmail.status, 400);
    assert.equal(errorNotice(wrongPassword), 'Wrong email or password.');
    assert.equal(errorNotice(unknownEmail), errorNotice(wrongPassword));
    assert.ok(!wrongPassword.headers['set-cookie']?.toString().includes(SESSION));
    const logs = t.logs.join('');
    assert.ok(!logs.includes(d.password), 'a password reached the log');
    assert.ok(!logs.includes('not the password at all'), 'a password reached the log');
    assert.ok(!logs.includes(d.email.toLowerCase()), 'the email is logged in clear');
    const failed = t.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.event === 'cabinet_login' && l.outcome === 'failed');
    assert.ok(failed.length >= 2);
    assert.ok(failed.every((l) => typeof l.account === 'string' && typeof l.address === 'string'));
  });

  it('asks for both fields, and never answers 500 to odd input', async () => {
    const b = t.browser();
    for (const fields of [{ email: '', password: '' }, { email: d.email, password: '' }, { email: '', password: 'x' }]) {
      const res = await b.submit('/login', '/login', fields);
      assert.equal(res.status, 400);
      assert.equal(errorNotice(res), 'Enter your email and your password.');
    }
    for (const email of ['a\u0000b@example.com', 'x'.repeat(5000), '<script>@example.com']) {
      const res = await b.submit('/login', '/login', { email, password: 'whatever it is' });
      assert.equal(res.status, 400, email.slice(0, 20));
      assert.ok(!res.text.includes('<script>@'), 'input echoed unescaped');
    }
  });

  it(`throttles an account after ${LOGIN_ATTEMPTS_PER_ACCOUNT} attempts a minute, from any address, even with the right password`, async () => {
    const target = await seedDirector(t.store.db, 'Profi');
    for (let i = 0; i < LOGIN_ATTEMPTS_PER_ACCOUNT; i++) {
      // A new browser each time: a new source address, so only the account bucket fills.
      assert.equal((await t.browser().login(target.email, `wrong password ${i}`)).status, 400);
    }
    const blocked = await t.browser().login(target.email, target.password);
    assert.equal(blocked.status, 429);
    assert.match(String(blocked.headers['retry-after']), /^[1-9][0-9]*$/);
    assert.equal(errorNotice(blocked), 'Too many sign-in attempts. Wait a minute, then try again.');
    // Throttled is not signed in, and other accounts are not affected.
    assert.ok(!String(blocked.headers['set-cookie'] ?? '').includes(SESSION));
    const other = await seedDirector(t.store.db, 'VIP');
    assert.equal((await t.browser().login(other.email, other.password)).status, 303);
    const throttled = t.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.event === 'cabinet_login' && l.outcome === 'throttled');
    assert.equal(throttled.length, 1);
  });

  it('counts a password change\'s current password per session: a signed-in session cannot guess it without limit, and others\' sign-ins do not lock it out', async () => {
    const b = t.browser();
    assert.equal((await b.login(d.email, d.password)).status, 303);
    const hash = async () => (await t.store.db.selectFrom('directors').select('password_hash').where('email', '=', d.email.toLowerCase()).executeTakeFirstOrThrow()).password_hash;
    const before = await hash();
    for (let i = 0; i < LOGIN_ATTEMPTS_PER_ACCOUNT; i++) {
      const wrong = await b.submit('/settings/password', '/settings/password', { current: `wrong password ${i}`, next: 'a brand new password 1' });
      assert.equal(wrong.status, 400, `attempt ${i + 1}`);
    }
    const blocked = await b.submit('/settings/password', '/settings/password', { current: d.password, next: 'a brand new password 1' });
    assert.equal(blocked.status, 429);
    assert.match(String(blocked.headers['retry-after']), /^[1-9][0-9]*$/);
    assert.equal(errorNotice(blocked), 'Too many attempts with a wrong password. Wait a minute, then try again.');
    assert.equal(await hash(), before, 'password changed while throttled');
    const logged = t.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.event === 'cabinet_password_change');
    assert.deepEqual(logged.map((l) => l.outcome), [...Array.from({ length: LOGIN_ATTEMPTS_PER_ACCOUNT }, () => 'failed'), 'throttled']);
    // Those were this session's: the account's sign-in is not throttled by them ...
    const other = t.browser();
    assert.equal((await other.login(d.email, d.password)).status, 303);
    // ... and someone filling the account's sign-in bucket does not keep another session from changing the password.
    // (The two sign-ins above were the account's first attempts of the minute.)
    for (let i = 2; i < LOGIN_ATTEMPTS_PER_ACCOUNT; i++) assert.equal((await t.browser().login(d.email, `someone else ${i}`)).status, 400);
    assert.equal((await t.browser().login(d.email, d.password)).status, 429, 'the account\'s sign-ins are throttled');
    const changed = await other.submit('/settings/password', '/settings/password', { current: d.password, next: 'a brand new password 1' });
    assert.equal(changed.status, 200, changed.text);
  });

  it(`throttles a client address after ${LOGIN_ATTEMPTS_PER_ADDRESS} attempts a minute, whatever the accounts`, async () => {
    const accounts = await Promise.all(Array.from({ length: Math.ceil(LOGIN_ATTEMPTS_PER_ADDRESS / (LOGIN_ATTEMPTS_PER_ACCOUNT - 1)) + 1 }, () => seedDirector(t.store.db, 'VIP')));
    const b = t.browser();
    let sent = 0;
    for (const a of accounts) {
      for (let i = 0; i < LOGIN_ATTEMPTS_PER_ACCOUNT - 1 && sent < LOGIN_ATTEMPTS_PER_ADDRESS; i++, sent++) {
        assert.equal((await b.login(a.email, 'wrong password!')).status, 400, `attempt ${sent + 1}`);
      }
    }
    const fresh = accounts.at(-1)!;
    const blocked = await b.login(fresh.email, fresh.password);
    assert.equal(blocked.status, 429);
    // The same account from another address is fine.
    assert.equal((await t.browser().login(fresh.email, fresh.password)).status, 303);
  });

  it('refuses a sign-in form without its token, with a wrong one, or from another origin (403), saying which and what to do', async () => {
    const b = t.browser();
    const fields = { ...formFields((await b.get('/login')).text, '/login'), email: d.email, password: d.password };
    const refused = (res: Page, why: string, says: RegExp) => {
      assert.equal(res.status, 403, why);
      assert.match(res.text, /Form not accepted/);
      assert.match(errorNotice(res) ?? '', says, why);
      assert.match(errorNotice(res) ?? '', /Nothing was changed\. Open the (cabinet|sign-in page|page)/, `${why}: what to do`);
      assert.ok(!b.cookies.has(SESSION), `${why}: signed in`);
    };
    const otherOrigin = /sent from another site or address/;
    refused(await b.post('/login', { email: d.email, password: d.password }), 'no token', /arrived without its security token/);
    refused(await b.post('/login', { ...fields, csrf: '' }), 'empty token', /arrived without its security token/);
    refused(await b.post('/login', { ...fields, csrf: '<script>' }), 'malformed token', /not one this cabinet gave out/);
    refused(await b.post('/login', { ...fields, csrf: randomBytes(32).toString('base64url') }), 'wrong token', /sign-in page is out of date/);
    refused(await b.post('/login', fields, { origin: 'https://evil.example' }), 'cross-origin Origin', otherOrigin);
    refused(await b.post('/login', fields, { headers: { 'sec-fetch-site': 'cross-site' } }), 'cross-site fetch metadata', otherOrigin);
    refused(await b.post('/login', fields, { origin: null, headers: { referer: 'https://evil.example/page' } }), 'cross-origin Referer', otherOrigin);
    // The origin is checked first: a forged form learns nothing about its token.
    refused(await b.post('/login', { ...fields, csrf: '' }, { origin: 'https://evil.example' }), 'cross-origin, no token', otherOrigin);
    const token = b.cookies.get(LOGIN);
    b.cookies.delete(LOGIN);
    refused(await b.post('/login', fields), 'no form cookie (the page was open over an hour)', /sign-in page is out of date.*allow cookies/);
    b.cookies.set(LOGIN, token!);
    assert.equal((await b.post('/login', fields)).status, 303, 'the untouched form still works');
    const reasons = t.logs.filter((l) => l.includes('"event":"cabinet_form_refused"')).map((l) => (JSON.parse(l) as { reason: string }).reason);
    for (const reason of ['other_origin', 'missing_token', 'wrong_token', 'expired_page']) assert.ok(reasons.includes(reason), `${reason} not logged`);
  });

  it('tells a visitor without an account how a director account is made', async () => {
    const page = await t.browser().get('/login');
    assert.equal(page.status, 200);
    assert.match(page.text, /No account yet\?/);
    assert.match(page.text, /<code>npx school-data director add --school SCHOOL_ID --email EMAIL<\/code>/);
    assert.match(page.text, /<code>npx school-data demo<\/code>/);
  });

  it('ends a session after its idle time or its absolute lifetime: back to sign-in, row gone', async () => {
    for (const column of ['idle_expires_at', 'expires_at'] as const) {
      const d = await seedDirector(t.store.db, 'VIP');
      const b = t.browser();
      assert.equal((await b.login(d.email, d.password)).status, 303);
      const row = await sessionRow(b);
      assert.ok(row);
      await t.store.db.updateTable('cabinet_sessions').set({ [column]: '2000-01-01T00:00:00Z' }).where('id', '=', row.id).execute();
      const res = await b.get('/settings/api');
      assert.equal(res.status, 303, column);
      assert.equal(res.location, '/login?expired=1');
      assert.ok(!b.cookies.has(SESSION), 'cookie cleared');
      assert.equal(await t.store.db.selectFrom('cabinet_sessions').select('id').where('id', '=', row.id).executeTakeFirst(), undefined);
      const login = await b.get('/login?expired=1');
      assert.match(login.text, /Your session has ended/);
      // A form posted with the ended session changes nothing and also goes to sign-in.
      assert.equal((await b.post('/settings/api/keys', { name: 'late' })).location, '/login');
    }
  });

  it('moves the idle expiry forward on use, never past the absolute one', async () => {
    const b = t.browser();
    await b.login(d.email, d.password);
    const row = (await sessionRow(b))!;
    const soon = new Date(Date.now() + 120_000).toISOString().slice(0, 19) + 'Z';
    await t.store.db.updateTable('cabinet_sessions').set({ idle_expires_at: soon }).where('id', '=', row.id).execute();
    assert.equal((await b.get('/settings/api')).status, 200);
    const moved = (await sessionRow(b))!;
    assert.ok(moved.idle_expires_at > soon, `${moved.idle_expires_at} not after ${soon}`);
    assert.ok(moved.idle_expires_at <= moved.expires_at);
    assert.equal(Date.parse(row.expires_at) - Date.parse(row.created_at), t.config.cabinetSessionMaxHours * 3_600_000);
  });

  it('signs out: the session row is deleted and the old cookie no longer works', async () => {
    const b = t.browser();
    await b.login(d.email, d.password);
    const token = b.cookies.get(SESSION)!;
    const row = (await sessionRow(b))!;
    const page = await b.get('/settings/api');
    const out = await b.post('/logout', formFields(page.text, '/logout'));
    assert.equal(out.status, 303);
    assert.equal(out.location, '/login?signed-out');
    assert.ok(!b.cookies.has(SESSION));
    assert.equal(await t.store.db.selectFrom('cabinet_sessions').select('id').where('id', '=', row.id).executeTakeFirst(), undefined);
    assert.match((await b.get('/login?signed-out')).text, /You have signed out/);
    b.cookies.set(SESSION, token);
    const replay = await b.get('/settings/api');
    assert.equal(replay.status, 303);
    assert.equal(replay.location, '/login');
  });
});
