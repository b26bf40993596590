/**
 * The cabinet under attack: forged forms (CSRF) are refused with 403 and change
 * nothing; another school's key is 404 and stays active; every response carries the
 * security headers; odd input never makes a 500; markup in data is escaped; and none
 * of the cabinet is reachable on the API's listener.
 */
import assert from 'node:assert/strict';
import { isIP } from 'node:net';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { createKey, type CreatedKey } from '../../src/management/keys.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { formFields, seedDirector, startTestCabinet, type CabinetBrowser, type Page, type TestCabinet } from '../helpers/cabinet.js';
import { pipelinedStatuses, rawExchange } from '../helpers/fuzz.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

const STUDENTS = '/api/public/v1/students';

describe('cabinet security', () => {
  let store: TestStore;
  let t: TestCabinet;
  let api: TestApp;
  /** Director of school A, signed in; A's key; school B's key. */
  let a: CabinetBrowser;
  let schoolA: string;
  let keyA: CreatedKey;
  let keyB: CreatedKey;

  before(async () => {
    store = await createTestStore();
    t = await startTestCabinet({ store });
    api = await startTestApp({ store });
    const da = await seedDirector(store.db, 'VIP');
    const db = await seedDirector(store.db, 'Profi');
    schoolA = da.schoolId;
    const ka = await createKey(store.db, da.schoolId, 'A key');
    const kb = await createKey(store.db, db.schoolId, 'B key');
    assert.ok(ka.ok && kb.ok);
    keyA = ka.value;
    keyB = kb.value;
    a = t.browser();
    assert.equal((await a.login(da.email, da.password)).status, 303);
  });
  after(async () => {
    await t.close();
    await api.close();
    await store.close();
  });

  const revokedAt = async (id: string) => (await store.db.selectFrom('api_keys').select('revoked_at').where('id', '=', id).executeTakeFirstOrThrow()).revoked_at;
  const keyCount = async () => (await store.db.selectFrom('api_keys').select('id').where('school_id', '=', schoolA).execute()).length;

  /** Which failed check each refusal names (see src/cabinet/errors.ts). */
  const REASONS = {
    other_origin: /sent from another site or address, not from a page of this cabinet/,
    missing_token: /arrived without its security token/,
    wrong_token: /not one this cabinet gave out/,
    expired_page: /This page is out of date: it was opened before your latest sign-in/,
  };

  function refused(res: Page, why: string, reason?: keyof typeof REASONS): void {
    assert.equal(res.status, 403, `${why}: ${res.status}`);
    assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
    assert.match(res.text, /<h1>Form not accepted<\/h1>/, why);
    assert.match(res.text, /Nothing was changed\. Open the (cabinet|page)/);
    if (reason !== undefined) assert.match(res.text, REASONS[reason], why);
  }

  it('refuses a create-key form without the right token (403) and creates nothing', async () => {
    const before = await keyCount();
    const page = await a.get('/settings/api');
    const form = formFields(page.text, '/settings/api/keys');
    const other = t.browser();
    const d = await seedDirector(store.db, 'VIP');
    await other.login(d.email, d.password);
    const otherToken = formFields((await other.get('/settings/api')).text, '/settings/api/keys').csrf!;
    const forms: [string, Record<string, string>, keyof typeof REASONS][] = [
      ['no token', { nonce: form.nonce!, name: 'forged' }, 'missing_token'],
      ['empty token', { ...form, csrf: '', name: 'forged' }, 'missing_token'],
      ['malformed token', { ...form, csrf: `${form.csrf!.slice(0, -1)}!`, name: 'forged' }, 'wrong_token'],
      ['wrong token', { ...form, csrf: randomBytes(32).toString('base64url'), name: 'forged' }, 'expired_page'],
      ["another session's token", { ...form, csrf: otherToken, name: 'forged' }, 'expired_page'],
    ];
    for (const [why, fields, reason] of forms) refused(await a.post('/settings/api/keys', fields), why, reason);
    refused(await a.post('/settings/api/keys', {}, { body: `csrf=${form.csrf}&csrf=${form.csrf}&nonce=${form.nonce}&name=twice` }), 'token sent twice', 'missing_token');
    assert.equal(await keyCount(), before);
    assert.ok(t.logs.some((l) => l.includes('"event":"cabinet_form_refused"')));
  });

  it('refuses a form with the right token from another origin (403)', async () => {
    const before = await keyCount();
    const attempts: [string, Parameters<CabinetBrowser['post']>[2]][] = [
      ['Origin of another site', { origin: 'https://evil.example' }],
      ['Origin of another port', { origin: 'https://127.0.0.1:1' }],
      ['plain-HTTP Origin', { origin: t.origin.replace('https:', 'http:') }],
      ['cross-site fetch metadata', { headers: { 'sec-fetch-site': 'cross-site' } }],
      ['same-site fetch metadata', { headers: { 'sec-fetch-site': 'same-site' } }],
      ['Referer of another site', { origin: null, headers: { referer: 'https://evil.example/x' } }],
    ];
    for (const [why, options] of attempts) {
      const form = formFields((await a.get('/settings/api')).text, '/settings/api/keys');
      refused(await a.post('/settings/api/keys', { ...form, name: 'forged' }, options), why, 'other_origin');
    }
    assert.equal(await keyCount(), before);
    // Origin "null" is what browsers send under Referrer-Policy: no-referrer; the token decides.
    const form = formFields((await a.get('/settings/api')).text, '/settings/api/keys');
    assert.equal((await a.post('/settings/api/keys', { ...form, name: 'ok' }, { origin: 'null' })).status, 200);
    assert.equal(await keyCount(), before + 1);
  });

  it('refuses forged revoke and sign-out forms (403): the key stays active, the session stays', async () => {
    const path = `/settings/api/keys/${keyA.id}/revoke`;
    const confirm = await a.get(path);
    const fields = formFields(confirm.text, path);
    refused(await a.post(path, {}), 'revoke without token', 'missing_token');
    refused(await a.post(path, { csrf: 'x'.repeat(43) }), 'revoke with a wrong token', 'expired_page');
    refused(await a.post(path, fields, { origin: 'https://evil.example' }), 'revoke from another origin', 'other_origin');
    assert.equal(await revokedAt(keyA.id), null);
    assert.equal((await api.request(STUDENTS, { key: keyA.key })).status, 200);
    refused(await a.post('/logout', {}), 'sign-out without token', 'missing_token');
    assert.equal((await a.get('/settings/api')).status, 200, 'still signed in');
  });

  it('refuses a form of a page opened before the latest sign-in as out of date (403), and the page opened again works', async () => {
    const d = await seedDirector(store.db, 'VIP');
    const b = t.browser();
    await b.login(d.email, d.password);
    const old = formFields((await b.get('/settings/api')).text, '/settings/api/keys');
    // Signed out and in again (another tab, say): the old page's form belongs to the ended session.
    await b.submit('/settings/api', '/logout');
    await b.login(d.email, d.password);
    const before = (await store.db.selectFrom('api_keys').select('id').where('school_id', '=', d.schoolId).execute()).length;
    refused(await b.post('/settings/api/keys', { ...old, name: 'from the old tab' }), 'old page', 'expired_page');
    assert.equal((await store.db.selectFrom('api_keys').select('id').where('school_id', '=', d.schoolId).execute()).length, before);
    assert.equal((await b.submit('/settings/api', '/settings/api/keys', { name: 'page opened again' })).status, 200);
  });

  it("answers 404 for another school's key, exactly as for a key that does not exist, and changes nothing", async () => {
    const token = formFields((await a.get('/settings/api')).text, '/logout').csrf!;
    const missing = await a.get('/settings/api/keys/key_0000000000000000/revoke');
    assert.equal(missing.status, 404);
    const body = (p: Page) => p.text.replace(/<code>[0-9a-f-]{36}<\/code>/, '');
    for (const path of [`/settings/api/keys/${keyB.id}/revoke`]) {
      const confirm = await a.get(path);
      assert.equal(confirm.status, 404);
      assert.equal(body(confirm), body(missing));
      assert.ok(!confirm.text.includes('B key'), "another school's key name shown");
      const post = await a.post(path, { csrf: token });
      assert.equal(post.status, 404);
      assert.equal(body(post), body(missing));
    }
    assert.equal(await revokedAt(keyB.id), null);
    assert.equal((await api.request(STUDENTS, { key: keyB.key })).status, 200);
    assert.ok(!(await a.get('/settings/api')).text.includes(keyB.id), "another school's key listed");
    for (const id of ['%00', 'a%2Fb', 'x'.repeat(90), 'x'.repeat(101), 'x'.repeat(2000), '%F0%9F%98%80', '..']) {
      assert.equal((await a.get(`/settings/api/keys/${id}/revoke`)).status, 404, id);
      assert.equal((await a.post(`/settings/api/keys/${id}/revoke`, { csrf: token })).status, 404, id);
    }
  });

  it('sends signed-out visitors to sign-in, and changes nothing for them', async () => {
    const stranger = t.browser();
    for (const path of ['/', '/settings', '/settings/api', `/settings/api/keys/${keyA.id}/revoke`, `/settings/api/keys/${'x'.repeat(2000)}`]) {
      const res = await stranger.get(path);
      assert.equal(res.status, 303, path);
      assert.match(res.location ?? '', /^\/login|^\/settings\/api$/);
    }
    const before = await keyCount();
    assert.equal((await stranger.post('/settings/api/keys', { name: 'x' })).location, '/login');
    assert.equal((await stranger.post(`/settings/api/keys/${keyA.id}/revoke`, {})).location, '/login');
    assert.equal(await keyCount(), before);
    assert.equal(await revokedAt(keyA.id), null);
  });

  it('puts the security headers on every response: pages, assets, redirects and errors', async () => {
    const stranger = t.browser();
    const responses: [string, Page][] = [
      ['login', await stranger.get('/login')],
      ['keys page', await a.get('/settings/api')],
      ['stylesheet', await stranger.get('/assets/cabinet.css')],
      ['script', await stranger.get('/assets/copy.js')],
      ['redirect', await stranger.get('/settings/api')],
      ['404', await stranger.get('/no/such/page')],
      ['403', await a.post('/settings/api/keys', {})],
      ['415', await a.post('/settings/api/keys', {}, { contentType: 'application/json', body: '{}' })],
    ];
    // What the router refuses before any hook runs: an undecodable path, a target that is no path.
    type Answered = { status: number; headers: Record<string, string | string[] | undefined>; body: string };
    const refusedByRouter: [string, Answered][] = [];
    for (const target of ['/%zz', '*login', '*settings/api']) {
      const outcome = await rawExchange(t.origin, t.ca, `GET ${target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
      assert.ok(outcome.kind === 'response', target);
      refusedByRouter.push([target, outcome.response]);
    }
    // An HTTP/1.1 request without Host, with two or with one that names no host (RFC 9112): the same page.
    for (const [what, hosts] of [['no Host', ''], ['two Host lines', 'Host: localhost\r\nHost: evil.example\r\n'], ['a Host naming no host', 'Host: a b\r\n']] as const) {
      const outcome = await rawExchange(t.origin, t.ca, `GET /login HTTP/1.1\r\n${hosts}Connection: close\r\n\r\n`);
      assert.ok(outcome.kind === 'response', what);
      refusedByRouter.push([what, outcome.response]);
    }
    // Another HTTP version than 1.x, which Node's parser lets through: the same page.
    const version = await rawExchange(t.origin, t.ca, 'GET /login HTTP/2.0\r\nHost: localhost\r\n\r\n');
    assert.ok(version.kind === 'response');
    refusedByRouter.push(['HTTP/2.0', version.response]);
    // An unknown expectation is ignored, as on the API (Node would answer a bare 417).
    const expectation = await rawExchange(t.origin, t.ca, 'GET /login HTTP/1.1\r\nHost: localhost\r\nExpect: teapot\r\nConnection: close\r\n\r\n');
    assert.ok(expectation.kind === 'response');
    assert.equal(expectation.response.status, 200, 'an unknown Expect');
    // CONNECT, which Node hands to no handler (it would close the connection): 404, or 400
    // without Host, answered on the socket with the same headers.
    const answeredRaw: [string, Answered][] = [['an unknown Expect', expectation.response]];
    for (const [what, bytes, status] of [['CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 404], ['CONNECT without Host', 'CONNECT example.com:443 HTTP/1.1\r\n\r\n', 400]] as const) {
      const outcome = await rawExchange(t.origin, t.ca, bytes);
      assert.ok(outcome.kind === 'response', what);
      assert.equal(outcome.response.status, status, what);
      assert.match(String(outcome.response.headers['x-request-id']), /^[0-9a-f-]{36}$/, what);
      answeredRaw.push([what, outcome.response]);
    }
    // What Node's parser refuses is answered on the socket, with the same headers.
    const refusedByParser: [string, string][] = [
      ['a control byte in the target', 'GET /lo\x01gin HTTP/1.1\r\nHost: localhost\r\n\r\n'],
      ['not HTTP', 'HELLO\r\n\r\n'],
      // Not the API's 405: this listener serves no API.
      ['an unknown method', 'FOO /api/public/v1/students HTTP/1.1\r\nHost: localhost\r\n\r\n'],
      ['headers over the limit', `GET /login HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`],
    ];
    const parserAnswers: [string, Answered][] = [];
    for (const [what, bytes] of refusedByParser) {
      const outcome = await rawExchange(t.origin, t.ca, bytes);
      assert.ok(outcome.kind === 'response', what);
      assert.ok(outcome.response.status === 400 || outcome.response.status === 431, `${what}: ${outcome.response.status}`);
      assert.match(String(outcome.response.headers['x-request-id']), /^[0-9a-f-]{36}$/, what);
      assert.equal(outcome.response.headers.allow, undefined, what);
      parserAnswers.push([what, outcome.response]);
    }
    for (const [what, res] of refusedByRouter) {
      assert.equal(res.status, 400, what);
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8', what);
      assert.match(res.body, /<!doctype html>/, what);
      assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/, what);
    }
    for (const [what, res] of [...responses, ...refusedByRouter, ...parserAnswers, ...answeredRaw]) {
      const h = res.headers;
      assert.equal(h['content-security-policy'], "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'", what);
      assert.equal(h['x-frame-options'], 'DENY', what);
      assert.match(String(h['strict-transport-security']), /^max-age=\d+/, what);
      assert.equal(h['x-content-type-options'], 'nosniff', what);
      assert.equal(h['referrer-policy'], 'no-referrer', what);
      assert.equal(h['cache-control'], 'no-store', what);
      assert.equal(h['access-control-allow-origin'], undefined, what);
    }
    const css = responses[2]![1];
    assert.equal(css.headers['content-type'], 'text/css; charset=utf-8');
    const js = responses[3]![1];
    assert.equal(js.headers['content-type'], 'text/javascript; charset=utf-8');
    // The only script is the local file: no inline script, no other origin anywhere.
    for (const [what, res] of responses.filter(([w]) => w === 'login' || w === 'keys page')) {
      assert.ok(!/<script(?![^>]*\ssrc="\/assets\/)/.test(res.text), `${what}: inline script`);
      assert.ok(!/(src|href)="(https?:)?\/\//.test(res.text), `${what}: another origin`);
      assert.ok(!/\sstyle=/.test(res.text), `${what}: inline style`);
    }
  });

  it('answers pipelined requests in order, a CONNECT or bytes that are not HTTP after the pages before them; another HTTP version or an Upgrade closes the connection', async () => {
    const statusesOf = (bytes: string) => pipelinedStatuses(t.origin, t.ca, bytes);
    const login = 'GET /login HTTP/1.1\r\nHost: localhost\r\n\r\n';
    assert.deepEqual(await statusesOf(`${login}${login}CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n`), [200, 200, 404]);
    // Bytes the parser refuses after a page: the page's answer first.
    assert.deepEqual(await statusesOf(`${login}${login}\u0001not http\r\n\r\n`), [200, 200, 400]);
    // Another version, refused by the router or by the hook: no request after it is read.
    for (const target of ['/login', '/%zz']) {
      assert.deepEqual(await statusesOf(`GET ${target} HTTP/2.0\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n${login}`), [400], target);
    }
    // A request asking for another protocol: answered, then the connection closes (Node reads no more on it).
    const upgrade = 'GET /login HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n';
    const first = await rawExchange(t.origin, t.ca, `${upgrade}${login}`);
    assert.ok(first.kind === 'response' && first.response.status === 200, JSON.stringify(first));
    assert.equal(first.response.headers.connection, 'close');
    assert.deepEqual(await statusesOf(`${upgrade}${login}`), [200]);
  });

  it('answers a page whose request body is still arriving at once, closing the connection: a malformed rest is no second answer', async () => {
    const url = new URL(t.origin);
    const socket = tls.connect({ host: url.hostname, port: Number(url.port), ca: t.ca, servername: 'localhost' });
    let received = '';
    socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
    socket.on('error', () => undefined);
    await once(socket, 'secureConnect');
    socket.write('GET /login HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel');
    const drip = setInterval(() => socket.writable && socket.write('lo\r\nzz\r\n\r\n'), 200);
    await once(socket, 'close');
    clearInterval(drip);
    assert.deepEqual([...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]), ['200']);
    assert.match(received, /\r\nConnection: close\r\n/i);
    // A body the parser refuses (in the packet of its head), after a request still being answered: its 400 alone.
    const login = 'GET /login HTTP/1.1\r\nHost: localhost\r\n\r\n';
    assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, `${login}GET /login HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`), [200, 400]);
  });

  it('keeps the connection of a request whose declared body is empty, however its length is written', async () => {
    // A page not found is answered in its request's turn, before Node marks the request complete.
    for (const length of ['0', '00']) {
      const request = `GET /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${length}\r\n\r\n`;
      assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, `${request}${request}`, { halfClose: true }), [404, 404], length);
    }
  });

  it('answers a client that closed its side after its request, a page read from the store too', async () => {
    const cookie = [...a.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const page = `GET /settings/api HTTP/1.1\r\nHost: localhost\r\nCookie: ${cookie}\r\n\r\n`;
    assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, page, { halfClose: true }), [200]);
    assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, `${page}${page}`, { halfClose: true }), [200, 200]);
    // Bytes that are not HTTP after it: their 400 after the page, before the connection ends.
    assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, `${page}\u0001not http\r\n\r\n`, { halfClose: true }), [200, 400]);
  });

  it('never answers 500 to odd requests', async () => {
    const form = formFields((await a.get('/settings/api')).text, '/settings/api/keys');
    const body = new URLSearchParams({ ...form, name: 'x' }).toString();
    const keysBefore = await keyCount();
    const cases: [string, Promise<Page>, number][] = [
      ['JSON body', a.post('/settings/api/keys', {}, { contentType: 'application/json', body: JSON.stringify({ ...form, name: 'x' }) }), 415],
      ['text body', a.post('/settings/api/keys', {}, { contentType: 'text/plain', body }), 415],
      ['huge form', a.post('/settings/api/keys', { ...form, name: 'x'.repeat(20_000) }), 413],
      // A body no browser sends is refused whole, not read as some other name.
      ['broken escape', a.post('/settings/api/keys', {}, { body: body.replace('name=x', 'name=%E0%A4%A') }), 400],
      ['escapes not UTF-8', a.post('/settings/api/keys', {}, { body: body.replace('name=x', 'name=%FF%FE') }), 400],
      ['bare percent sign', a.post('/settings/api/keys', {}, { body: body.replace('name=x', 'name=100%') }), 400],
      ['bytes not UTF-8', a.post('/settings/api/keys', {}, { body: Buffer.concat([Buffer.from(body.replace('name=x', 'name=')), Buffer.from([0xff, 0xfe])]) }), 400],
      ['name twice', a.post('/settings/api/keys', {}, { body: `${body}&name=y` }), 400],
      ['no nonce', a.post('/settings/api/keys', { csrf: form.csrf!, name: 'x' }), 400],
      ['bad nonce', a.post('/settings/api/keys', { csrf: form.csrf!, nonce: '<script>', name: 'x' }), 400],
      ['unknown path', a.get('/settings/api/nothing'), 404],
      ['unknown method', a.post('/settings/api', { csrf: form.csrf! }), 404],
      ['bad query', a.get('/settings/api?revoked=%00&revoked=x'), 200],
      ['long url', a.get(`/settings/api?${'q'.repeat(10_000)}`), 200],
    ];
    for (const [what, pending, status] of cases) {
      const res = await pending;
      assert.ok(res.status < 500, `${what}: ${res.status}`);
      assert.equal(res.status, status, `${what}: ${res.status}`);
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8', what);
      if (/escape|percent|UTF-8/.test(what)) assert.match(res.text, /<h1>Bad request<\/h1>/, what);
    }
    assert.equal(await keyCount(), keysBefore, 'a refused form created a key');
  });

  it('masks a key pasted into a URL in its log lines, written plainly or percent-encoded', async () => {
    const hex = keyA.key.slice('service_pk_'.length);
    for (const pasted of [keyA.key, `%73ervice%5Fpk_${hex}`, `%2573ervice_pk_${hex}`]) {
      assert.ok((await a.get(`/settings/api?k=${pasted}`)).status < 500);
      assert.ok((await t.browser().get(`/login?k=${pasted}`)).status < 500);
    }
    const logs = t.logs.join('');
    assert.ok(logs.includes('?k=[redacted-key]'), 'the requests were logged, the key masked');
    assert.ok(!logs.includes(hex), 'a key value is in the cabinet\'s logs');
  });

  it('writes one `request completed` line a request, with its method, URL, address, status and time, as the API does', async () => {
    const page = await t.browser().get('/login?from=the-log');
    const id = String(page.headers['x-request-id']);
    type Line = { msg: string; listener?: string; requestId?: string; req?: { method: string; url: string; remoteAddress?: string }; res?: { statusCode: number }; responseTime?: number };
    const linesOf = () => t.logs.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Line).filter((l) => l.requestId === id);
    // Written once the answer is sent, which the client may see first.
    for (let i = 0; i < 100 && linesOf().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    const lines = linesOf();
    assert.equal(lines.length, 1, JSON.stringify(lines));
    const [line] = lines;
    assert.equal(line!.msg, 'request completed');
    assert.equal(line!.listener, 'cabinet');
    assert.deepEqual([line!.req?.method, line!.req?.url, line!.res?.statusCode], ['GET', '/login?from=the-log', page.status]);
    assert.notEqual(isIP(String(line!.req?.remoteAddress)), 0, 'the client\'s address');
    assert.equal(typeof line!.responseTime, 'number');
    // A target the router cannot read, and an answer that closes the connection before the
    // body (with the address read before it closed): each its one line too. Refusals get their
    // lines within a budget a second, which the tests before may have spent.
    await new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000)));
    const b = t.browser();
    for (const [what, answer, status] of [
      ['a target not percent-decodable', await b.get('/settings/api/keys/%E0%A4%A'), 400],
      ['a JSON body', await b.post('/login', {}, { body: '{}', contentType: 'application/json' }), 415],
    ] as const) {
      assert.equal(answer.status, status, what);
      const requestId = String(answer.headers['x-request-id']);
      const of = () => t.logs.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Line).filter((l) => l.requestId === requestId);
      for (let i = 0; i < 100 && of().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      const found = of();
      assert.equal(found.length, 1, `${what}: ${JSON.stringify(found)}`);
      assert.equal(found[0]!.res?.statusCode, status, what);
      assert.notEqual(isIP(String(found[0]!.req?.remoteAddress)), 0, `${what}: the client's address`);
    }
  });

  it('logs and counts what it answers on the socket (bytes that are not HTTP, headers over the limit, CONNECT), as the API does', async () => {
    // Refusals get their lines within a budget a second, which the tests before may have spent.
    await new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000)));
    const answered: [string, number][] = [];
    for (const bytes of ['HELLO\r\n\r\n', `GET /login HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n']) {
      const outcome = await rawExchange(t.origin, t.ca, bytes);
      assert.ok(outcome.kind === 'response', bytes.slice(0, 20));
      answered.push([String(outcome.response.headers['x-request-id']), outcome.response.status]);
    }
    assert.deepEqual(answered.map(([, status]) => status), [400, 431, 404]);
    // Each its access line, tagged with the listener as the cabinet's other lines are.
    const lines = t.logs.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { requestId?: string; listener?: string; msg?: string; res?: { statusCode: number }; req?: { method: string } });
    for (const [requestId, status] of answered) {
      const line = lines.find((l) => l.requestId === requestId && l.msg === 'request completed');
      assert.ok(line, `no line for the ${status}`);
      assert.equal(line.listener, 'cabinet');
      assert.equal(line.res?.statusCode, status);
    }
    assert.equal(lines.find((l) => l.requestId === answered[2]![0])?.req?.method, 'CONNECT');
    const metrics = await rawExchange(t.origin, t.ca, 'GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    assert.ok(metrics.kind === 'response');
    for (const kind of ['malformed', 'header_overflow']) {
      assert.match(metrics.response.body, new RegExp(`^school_data_http_client_errors_total\\{kind="${kind}",listener="cabinet"\\} [1-9]\\d*$`, 'm'), kind);
    }
  });

  it('escapes markup in every value it shows', async () => {
    const d = await seedDirector(store.db, 'VIP', '<script>alert(1)</script> & "школа"');
    const k = await createKey(store.db, d.schoolId, '"><img src=x onerror=alert(1)>');
    assert.ok(k.ok);
    const b = t.browser();
    await b.login(d.email, d.password);
    for (const page of [await b.get('/settings/api'), await b.get(`/settings/api/keys/${k.value.id}/revoke`)]) {
      assert.ok(!page.text.includes('<script>alert'), 'school name unescaped');
      assert.ok(!page.text.includes('<img src=x'), 'key name unescaped');
    }
    const list = await b.get('/settings/api');
    assert.match(list.text, /&lt;script&gt;alert\(1\)&lt;\/script&gt; &amp; &quot;школа&quot;/);
    assert.match(list.text, /&quot;&gt;&lt;img src=x onerror=alert\(1\)&gt;/);
  });

  it('is not reachable on the API listener, and the API is not reachable on the cabinet listener', async () => {
    for (const path of ['/login', '/settings/api', '/assets/cabinet.css', '/assets/copy.js', '/']) {
      const res = await api.request(path);
      assert.equal(res.status, 404, path);
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/, path);
      assert.equal((await api.request(path, { method: 'POST' })).status, 404, `POST ${path}`);
    }
    const onCabinet = await a.get(STUDENTS, { authorization: `Bearer ${keyA.key}` });
    assert.equal(onCabinet.status, 404);
    assert.match(onCabinet.text, /There is no such page/);
  });
});
