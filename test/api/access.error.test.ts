/**
 * Error answers and their precedence (docs/api/errors.md, "Which error wins"), and the problem+json body
 * of every error status (docs/api/errors.md, "Codes").
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { rawExchange } from '../helpers/fuzz.js';
import { PROBLEM_TYPE, ROUTES } from '../helpers/routes.js';
import { seedWorld, type World } from '../helpers/world.js';

interface Problem {
  type: string;
  title: string;
  status: number;
  code: string;
  detail: string;
  request_id: string;
  invalid_params?: { name: string; reason: string }[];
}

describe('errors and their precedence', () => {
  let t: TestApp;
  let w: World;

  before(async () => {
    t = await startTestApp();
    w = await seedWorld(t.store.db);
  });
  after(() => t.close());

  async function problem(path: string, opts: Parameters<TestApp['request']>[1], status: number, code: string): Promise<Problem> {
    const res = await t.request(path, opts);
    assert.equal(res.status, status, `${path}: ${res.text}`);
    assert.equal(res.headers['content-type'], PROBLEM_TYPE);
    const body = res.json() as Problem;
    assert.equal(body.code, code);
    assert.equal(body.status, status);
    assert.equal(body.type, `urn:school-data:problem:${code}`);
    assert.equal(typeof body.title, 'string');
    assert.equal(typeof body.detail, 'string');
    assert.equal(body.request_id, res.headers['x-request-id']);
    return body;
  }

  it('405 for any method but GET/HEAD, before the key is looked at', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      for (const path of [...ROUTES, '/api/public/v1/nothing']) {
        const res = await t.request(path, { method, key: null });
        assert.equal(res.status, 405, `${method} ${path}`);
        assert.equal(res.headers.allow, 'GET, HEAD');
      }
    }
    await problem('/api/public/v1/students', { method: 'DELETE', key: w.a.key }, 405, 'method_not_allowed');
  });

  it('405 too for a method Node\'s parser does not know (FOO, a lower-case get), and 404 outside the prefix', async () => {
    const cases: [string, number, string][] = [
      ['FOO /api/public/v1/students', 405, 'method_not_allowed'],
      ['get /api/public/v1/students?limit=1', 405, 'method_not_allowed'],
      ['FOO /api/public/v1/nothing', 405, 'method_not_allowed'],
      ['FOO /elsewhere', 404, 'not_found'],
      // In absolute form, as a known method's target is taken; a `#` in the target is refused as for any method.
      ['FOO https://localhost/api/public/v1/students', 405, 'method_not_allowed'],
      ['FOO https://localhost/elsewhere', 404, 'not_found'],
      ['FOO /api/public/v1/students?a=1#b', 400, 'invalid_parameter'],
      // A method of any length; past 16 characters (a key, or its 32 hex digits, pasted there) it is not named.
      [`${'M'.repeat(16)} /api/public/v1/students`, 405, 'method_not_allowed'],
      [`${'M'.repeat(17)} /api/public/v1/students`, 405, 'method_not_allowed'],
      [`${w.a.key.replace('service_pk_', '')} /api/public/v1/students`, 405, 'method_not_allowed'],
      [`${w.a.key} /api/public/v1/students`, 405, 'method_not_allowed'],
    ];
    // In a second of its own: the access lines of refusals are bounded per second and status.
    await new Promise((r) => setTimeout(r, 1010 - (Date.now() % 1000)));
    for (const [line, status, code] of cases) {
      const outcome = await rawExchange(t.origin, t.ca, `${line} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${w.a.key}\r\n\r\n`);
      assert.ok(outcome.kind === 'response', line);
      assert.equal(outcome.response.status, status, line);
      assert.equal(outcome.response.headers.allow, status === 405 ? 'GET, HEAD' : undefined, line);
      assert.match(String(outcome.response.headers['x-request-id']), /^[0-9a-f-]{36}$/, line);
      assert.ok(!Number.isNaN(Date.parse(String(outcome.response.headers.date))), `${line}: a Date, as on every answer`);
      const answered = JSON.parse(outcome.response.body) as Problem;
      assert.equal(answered.code, code, line);
      if (line.includes('#')) assert.match(answered.detail ?? '', /contains "#"/, line);
      const method = line.split(' ')[0]!;
      if (status === 405) assert.equal(outcome.response.body.includes(method), method.length <= 16, line);
      // Its access line names the method (when the answer may) and the target, a key in either masked.
      {
        const requestId = String(outcome.response.headers['x-request-id']);
        const logged = t.logs.join('').split('\n').find((l) => l.includes(requestId));
        assert.ok(logged, `${line}: no access line`);
        const { req } = JSON.parse(logged) as { req: { method: string; url: string } };
        assert.deepEqual([req.method, req.url], [method.length <= 16 ? method : '', line.split(' ')[1]!.replace(/service_pk_[0-9a-f]+/, '[redacted-key]')], line);
        assert.ok(!logged.includes(w.a.key.replace('service_pk_', '')), `${line}: the key in the log`);
      }
    }
  });

  it('CONNECT, which only a proxy supports: 405 under the API\'s prefix, 404 elsewhere, with its access line', async () => {
    // In a second of its own: the tests before used up that second's lines of 405s.
    await new Promise((r) => setTimeout(r, 1010 - (Date.now() % 1000)));
    const cases: [string, number, string][] = [
      ['/api/public/v1/students', 405, 'method_not_allowed'],
      ['example.com:443', 404, 'not_found'],
      ['/foo', 404, 'not_found'],
    ];
    for (const [target, status, code] of cases) {
      const outcome = await rawExchange(t.origin, t.ca, `CONNECT ${target} HTTP/1.1\r\nHost: example.com:443\r\nAuthorization: Bearer ${w.a.key}\r\n\r\n`);
      assert.ok(outcome.kind === 'response', target);
      assert.equal(outcome.response.status, status, target);
      if (status === 405) assert.equal(outcome.response.headers.allow, 'GET, HEAD');
      const body = JSON.parse(outcome.response.body) as Problem;
      assert.equal(body.code, code, target);
      assert.equal(body.request_id, outcome.response.headers['x-request-id']);
      const line = t.logs.join('').split('\n').find((l) => l.includes(body.request_id));
      assert.ok(line, `no log line holds the ${status}'s request id`);
      const logged = JSON.parse(line) as { req: { method: string; url: string }; res: { statusCode: number }; msg: string; responseTime?: number };
      assert.deepEqual([logged.req.method, logged.req.url, logged.res.statusCode, logged.msg], ['CONNECT', target, status, 'request completed']);
      assert.equal(typeof logged.responseTime, 'number');
    }
    // The HTTP layer's refusals come first, as for any other method.
    for (const request of ['CONNECT /api/public/v1/students HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', 'CONNECT /api/public/v1/students#x HTTP/1.1\r\nHost: a\r\n\r\n', 'CONNECT /api/public/v1/students HTTP/1.1\r\n\r\n']) {
      const outcome = await rawExchange(t.origin, t.ca, request);
      assert.ok(outcome.kind === 'response', request);
      assert.equal(outcome.response.status, 400, request);
      assert.equal((JSON.parse(outcome.response.body) as Problem).code, 'invalid_parameter', request);
    }
  });

  it('401 for a missing, malformed, unknown or revoked key, with WWW-Authenticate', async () => {
    const cases: Record<string, string | string[] | undefined> = {
      missing: undefined,
      empty: '',
      'no scheme': w.a.key,
      basic: `Basic ${w.a.key}`,
      'short key': 'Bearer service_pk_123',
      'upper-case hex': `Bearer ${w.a.key.toUpperCase().replace('SERVICE_PK_', 'service_pk_')}`,
      unknown: 'Bearer service_pk_00000000000000000000000000000000',
      revoked: `Bearer ${w.revokedKey}`,
      'key with trailing junk': `Bearer ${w.a.key}x`,
    };
    for (const [name, header] of Object.entries(cases)) {
      const headers: Record<string, string | string[]> = header === undefined ? {} : { authorization: header };
      const res = await t.request('/api/public/v1/students', { headers });
      assert.equal(res.status, 401, name);
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="school-data"', name);
      const body = res.json() as Problem;
      assert.equal(body.code, 'unauthorized');
    }
  });

  it('the auth scheme is case-insensitive, the key exact', async () => {
    const res = await t.request('/api/public/v1/students', { headers: { authorization: `bEaReR ${w.a.key}` } });
    assert.equal(res.status, 200);
  });

  it('401 for a request with two Authorization lines, whichever comes first, on either path', async () => {
    const bogus = 'Bearer service_pk_00000000000000000000000000000000';
    // The second path is percent-encoded: it goes past the front to the app's own hook.
    for (const path of ['/api/public/v1/students', '/api/public/v1/%73tudents']) {
      for (const lines of [[`Bearer ${w.a.key}`, bogus], [bogus, `Bearer ${w.a.key}`], [`Bearer ${w.a.key}`, `Bearer ${w.a.key}`]]) {
        const auth = lines.map((l) => `Authorization: ${l}\r\n`).join('');
        const outcome = await rawExchange(t.origin, t.ca, `GET ${path} HTTP/1.1\r\nHost: localhost\r\n${auth}Connection: close\r\n\r\n`);
        assert.ok(outcome.kind === 'response', path);
        assert.equal(outcome.response.status, 401, `${path} ${lines.join(' | ')}`);
        assert.equal(outcome.response.headers['www-authenticate'], 'Bearer realm="school-data"');
        assert.match((JSON.parse(outcome.response.body) as Problem).detail, /one Authorization header, not more/);
      }
    }
  });

  it('401 details do not depend on why the key failed', async () => {
    const details = new Set<string>();
    for (const auth of ['', 'Bearer service_pk_00000000000000000000000000000000', `Bearer ${w.revokedKey}`]) {
      const res = await t.request('/api/public/v1/students', { headers: auth ? { authorization: auth } : {} });
      details.add((res.json() as Problem).detail);
    }
    assert.equal(details.size, 1);
  });

  it('402 for a school below Profi, before rate limit, path and parameters', async () => {
    await problem('/api/public/v1/students', { key: w.downgradedKey }, 402, 'plan_required');
    await problem('/api/public/v1/students?limit=0', { key: w.downgradedKey }, 402, 'plan_required');
    await problem('/api/public/v1/no-such-thing', { key: w.downgradedKey }, 402, 'plan_required');
  });

  it('unknown paths under the prefix: 401 without a key, 404 with one', async () => {
    await problem('/api/public/v1/teachers', { key: null }, 401, 'unauthorized');
    await problem('/api/public/v1/teachers', { key: w.a.key }, 404, 'not_found');
    await problem('/api/public/v1/students/s1/extra', { key: w.a.key }, 404, 'not_found');
  });

  it('an undecodable path under the prefix is an unknown path: 405, 401, 402 come first', async () => {
    for (const path of ['/api/public/v1/%zz', '/api/public/v1/students/%zz', '/api/public/v1/students/%C0%AF', '/api/public/v1/students/%']) {
      await problem(path, { method: 'POST', key: null }, 405, 'method_not_allowed');
      await problem(path, { key: null }, 401, 'unauthorized');
      await problem(path, { key: w.downgradedKey }, 402, 'plan_required');
      await problem(path, { key: w.a.key }, 404, 'not_found');
    }
    // Outside the prefix the key is not looked at.
    await problem('/%zz', { key: null }, 404, 'not_found');
  });

  it('an absolute-form target is checked as its path is: 405, 401, 402, then 404', async () => {
    const send = async (method: string, target: string, key: string | null) => {
      const auth = key === null ? '' : `Authorization: Bearer ${key}\r\n`;
      const outcome = await rawExchange(t.origin, t.ca, `${method} ${target} HTTP/1.1\r\nHost: localhost\r\n${auth}Connection: close\r\n\r\n`);
      assert.ok(outcome.kind === 'response', target);
      return [outcome.response.status, (JSON.parse(outcome.response.body) as Problem).code];
    };
    const nowhere = 'https://localhost/api/public/v1/nope';
    assert.deepEqual(await send('POST', 'https://localhost/api/public/v1/students', null), [405, 'method_not_allowed']);
    assert.deepEqual(await send('POST', nowhere, null), [405, 'method_not_allowed']);
    assert.deepEqual(await send('GET', nowhere, null), [401, 'unauthorized']);
    assert.deepEqual(await send('GET', nowhere, w.downgradedKey), [402, 'plan_required']);
    assert.deepEqual(await send('GET', nowhere, w.a.key), [404, 'not_found']);
    assert.deepEqual(await send('GET', 'https://localhost/elsewhere', null), [404, 'not_found']);
  });

  it('a target that is neither a path nor an absolute URL is 400, whatever the key', async () => {
    const send = async (target: string, key: string | null) => {
      const auth = key === null ? '' : `Authorization: Bearer ${key}\r\n`;
      const outcome = await rawExchange(t.origin, t.ca, `GET ${target} HTTP/1.1\r\nHost: localhost\r\n${auth}Connection: close\r\n\r\n`);
      assert.ok(outcome.kind === 'response', target);
      return [outcome.response.status, (JSON.parse(outcome.response.body) as Problem).code];
    };
    // Node's parser lets a target that begins with '*' through; the router would take it for its path.
    for (const target of ['*api/public/v1/students', '*api/public/v1/students?limit=1', '*/api/public/v1/students']) {
      assert.deepEqual(await send(target, w.a.key), [400, 'invalid_parameter'], target);
      assert.deepEqual(await send(target, null), [400, 'invalid_parameter'], target);
    }
    // The asterisk alone is a target's form (for OPTIONS): nothing is there.
    assert.deepEqual(await send('*', w.a.key), [404, 'not_found']);
  });

  it('paths outside /api/public/v1/ are 404 without looking at the key', async () => {
    for (const path of ['/', '/api/public/v2/students', '/api/public/v1', '/API/public/v1/students', '/students']) {
      await problem(path, { key: null }, 404, 'not_found');
      await problem(path, { method: 'POST', key: null }, 404, 'not_found');
    }
    // Whatever body comes with it: malformed, over the size read, or of a type nothing reads.
    const bodies: [string, string][] = [
      ['application/json', '{bad}'],
      ['application/json', JSON.stringify({ pad: 'x'.repeat(3000) })],
      ['application/xml', '<a/>'],
    ];
    for (const path of ['/nope', '/api/public/v2/students', '/api/public/v1', '/docs']) {
      for (const [type, body] of bodies) {
        const head = `PUT ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
        const outcome = await rawExchange(t.origin, t.ca, `${head}${body}`);
        assert.ok(outcome.kind === 'response', `${path}, ${type}`);
        assert.equal(outcome.response.status, 404, `${path}, ${type} of ${body.length} bytes: ${outcome.response.body}`);
        assert.equal((JSON.parse(outcome.response.body) as Problem).code, 'not_found');
      }
    }
  });

  it('400 names every bad parameter', async () => {
    const cases: [string, string][] = [
      ['limit=abc', 'limit'],
      ['limit=0', 'limit'],
      ['limit=201', 'limit'],
      ['limit=1e1', 'limit'],
      ['limit=-1', 'limit'],
      ['limit=+5', 'limit'],
      ['limit=%2010', 'limit'],
      ['limit=', 'limit'],
      ['offset=1000001', 'offset'],
      ['offset=0x10', 'offset'],
      [`offset=${'9'.repeat(40)}`, 'offset'],
      [`offset=1${'0'.repeat(40)}`, 'offset'],
      ['status=learning', 'status'],
      ['status=LEARNING_PRACTICE', 'status'],
      ['category=b', 'category'],
      ['group_id=a%20b', 'group_id'],
      [`group_id=${'x'.repeat(65)}`, 'group_id'],
      ['Limit=5', 'Limit'],
      ['foo=bar', 'foo'],
      ['limit=5&limit=6', 'limit'],
      ['status=', 'status'],
      // After a thousand empty pairs, still read (Node's parser stops at 1,000 by default).
      [`${'&'.repeat(1000)}limit=0`, 'limit'],
      ['=1', ''],
      ['=', ''],
    ];
    for (const [query, name] of cases) {
      const body = await problem(`/api/public/v1/students?${query}`, { key: w.a.key }, 400, 'invalid_parameter');
      assert.deepEqual(
        body.invalid_params?.map((p) => p.name),
        [name],
        query,
      );
      assert.ok(body.detail.includes(name), body.detail);
      assert.equal(body.detail, body.detail.trim(), query);
    }
    assert.equal((await problem('/api/public/v1/students?=1', { key: w.a.key }, 400, 'invalid_parameter')).detail, 'a value was sent without a parameter name ("=" with nothing before it)');
    // An unknown name is echoed cut to 64 characters, never through the middle of one.
    const emoji = '😀'.repeat(70);
    const long = await problem(`/api/public/v1/students?x${encodeURIComponent(emoji)}=1`, { key: w.a.key }, 400, 'invalid_parameter');
    assert.equal(long.invalid_params?.[0]?.name, `x${'😀'.repeat(63)}...`);
    // Decimal digits in range are a value, leading zeros or not.
    const padded = await t.request(`/api/public/v1/students?limit=${'0'.repeat(30)}2&offset=${'0'.repeat(30)}1`, { key: w.a.key });
    assert.equal(padded.status, 200, padded.text);
    assert.deepEqual((padded.json() as { meta: { limit: number; offset: number } }).meta, { ...(padded.json() as { meta: object }).meta, limit: 2, offset: 1 });
    const two = await problem('/api/public/v1/students?limit=x&offset=y', { key: w.a.key }, 400, 'invalid_parameter');
    assert.deepEqual(two.invalid_params?.map((p) => p.name).sort(), ['limit', 'offset']);
    assert.equal(two.invalid_params?.find((p) => p.name === 'limit')?.reason, 'must be an integer from 1 to 200');
    // A date that does not exist, names the feed does not have and a text that is no cursor
    // are reported with the other bad parameters, in the same answer.
    const together: [string, [string, string][]][] = [
      ['/payments?limit=0&period_from=2026-02-30&period_to=2026-03-01T24:00:00Z', [['limit', 'must be an integer from 1 to 200'], ['period_from', 'is not a real date or date-time'], ['period_to', 'is not a real date or date-time']]],
      ['/reports/finance-summary?period_from=2026-02-30', [['period_from', 'is not a real date or date-time'], ['period_to', 'is required']]],
      ['/changes?after=zz&resources=students,bogus&limit=0', [['after', 'is not a cursor of this feed'], ['limit', 'must be an integer from 1 to 1000'], ['resources', 'must be a comma-separated list of distinct names from: students, instructors, vehicles, lessons, contracts, payments, leads']]],
    ];
    for (const [path, expected] of together) {
      const body = await problem(`/api/public/v1${path}`, { key: w.a.key }, 400, 'invalid_parameter');
      assert.deepEqual(body.invalid_params?.map((p) => [p.name, p.reason]).sort(), expected, path);
    }
  });

  it('400 for a "#" in the request target, saying what it is rather than naming a parameter', async () => {
    for (const target of ['/api/public/v1/students?limit=1#frag', '/api/public/v1/students?#', '/api/public/v1/students#x']) {
      // Sent as raw bytes: Node's client would drop the fragment itself.
      const outcome = await rawExchange(t.origin, t.ca, `GET ${target} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${w.a.key}\r\n\r\n`);
      assert.ok(outcome.kind === 'response', target);
      assert.equal(outcome.response.status, 400, target);
      const body = JSON.parse(outcome.response.body) as Problem;
      assert.equal(body.code, 'invalid_parameter');
      assert.equal(body.invalid_params, undefined, target);
      assert.match(body.detail, /fragment/);
    }
  });

  it('400 for an HTTP/1.1 request without Host, and for any request with more than one', async () => {
    const auth = `Authorization: Bearer ${w.a.key}\r\n`;
    for (const [version, hosts] of [['1.1', ''], ['1.1', 'Host: localhost\r\nhost: evil.example\r\n'], ['1.0', 'Host: a\r\nHOST: b\r\n'], ['1.1', 'Host: localhost\r\nHost: localhost\r\n']] as const) {
      for (const target of ['/api/public/v1/students?limit=1', '/api/public/v1/students/%73']) {
        const outcome = await rawExchange(t.origin, t.ca, `GET ${target} HTTP/${version}\r\n${hosts}${auth}Connection: close\r\n\r\n`);
        assert.ok(outcome.kind === 'response', hosts);
        assert.equal(outcome.response.status, 400, `${version} ${JSON.stringify(hosts)} ${target}`);
        assert.match((JSON.parse(outcome.response.body) as Problem).detail, /Host/);
      }
    }
    const one = await rawExchange(t.origin, t.ca, `GET /api/public/v1/students?limit=1 HTTP/1.0\r\n${auth}\r\n`);
    assert.ok(one.kind === 'response');
    assert.equal(one.response.status, 200, 'HTTP/1.0 needs no Host');
  });

  it('400 for a Host that names no host; a name, an address, a port or an empty Host are served', async () => {
    const auth = `Authorization: Bearer ${w.a.key}\r\n`;
    const answers: Record<string, number> = {};
    const hosts = [
      'a b', 'a/b', 'user@a', 'a%zz', 'a?b', '[::1', 'a:80x', 'b\u00fccher.example',
      'localhost', 'LOCALHOST', 'localhost:8443', 'example.com.', '127.0.0.1:8443', '[::1]:8443', '[fe80::1%25eth0]', '[fe80::1%eth0]:8443', '[v1.fe80::a+en1]', 'xn--80a.example', 'a%41', '',
    ];
    for (const host of hosts) {
      const outcome = await rawExchange(t.origin, t.ca, `GET /api/public/v1/students?limit=1 HTTP/1.1\r\nHost: ${host}\r\n${auth}Connection: close\r\n\r\n`);
      assert.ok(outcome.kind === 'response', host);
      answers[host] = outcome.response.status;
      if (outcome.response.status === 400) assert.match((JSON.parse(outcome.response.body) as Problem).detail, /Host header must be a host name or address/, host);
    }
    assert.deepEqual(answers, {
      'a b': 400, 'a/b': 400, 'user@a': 400, 'a%zz': 400, 'a?b': 400, '[::1': 400, 'a:80x': 400, 'b\u00fccher.example': 400,
      localhost: 200, LOCALHOST: 200, 'localhost:8443': 200, 'example.com.': 200, '127.0.0.1:8443': 200, '[::1]:8443': 200,
      '[fe80::1%25eth0]': 200, '[fe80::1%eth0]:8443': 200, '[v1.fe80::a+en1]': 200, 'xn--80a.example': 200, 'a%41': 200, '': 200,
    });
  });

  it('400 for a request line of another HTTP version than 1.1 or 1.0, which Node\'s parser lets through', async () => {
    for (const version of ['2.0', '0.9']) {
      for (const method of ['GET', 'CONNECT']) {
        const outcome = await rawExchange(t.origin, t.ca, `${method} /api/public/v1/students?limit=1 HTTP/${version}\r\nHost: localhost\r\nAuthorization: Bearer ${w.a.key}\r\n\r\n`);
        assert.ok(outcome.kind === 'response', version);
        assert.equal(outcome.response.status, 400, `${method} ${version}`);
        assert.match((JSON.parse(outcome.response.body) as Problem).detail, /must name HTTP\/1\.1/);
        assert.equal(outcome.response.headers.connection, 'close', version);
      }
      // The connection is closed even when the client asks to keep it: what follows is not read.
      const get = `GET /api/public/v1/students?limit=1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${w.a.key}\r\n\r\n`;
      const kept = await rawExchange(t.origin, t.ca, `GET /api/public/v1/students?limit=1 HTTP/${version}\r\nHost: localhost\r\nConnection: keep-alive\r\nAuthorization: Bearer ${w.a.key}\r\n\r\n${get}`);
      assert.ok(kept.kind === 'response');
      assert.equal(kept.response.status, 400);
      assert.equal(kept.response.headers.connection, 'close', `${version}, keep-alive asked`);
    }
  });

  it('400 before 404: bad parameters on a missing object, or on an id that cannot be one', async () => {
    for (const id of ['nobody', 'bad%20id', 'x'.repeat(65), '%D0%B6', '%00']) {
      await problem(`/api/public/v1/students/${id}?x=1`, { key: w.a.key }, 400, 'invalid_parameter');
      await problem(`/api/public/v1/students/${id}`, { key: w.a.key }, 404, 'not_found');
    }
  });

  it('success responses carry the security, request-id and rate-limit headers, and no CORS', async () => {
    const res = await t.request('/api/public/v1/students', { key: w.a.key, headers: { origin: 'https://evil.example' } });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.match(String(res.headers['strict-transport-security']), /max-age=\d+/);
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.equal(res.headers['cache-control'], 'private, no-cache');
    assert.match(String(res.headers.etag), /^"[A-Za-z0-9_-]+-identity"$/);
    assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    assert.equal(res.headers['ratelimit-policy'], '"default";q=600;w=60');
    assert.match(String(res.headers.ratelimit), /^"default";r=\d+;t=\d+$/);
    assert.equal(
      Object.keys(res.headers).filter((h) => h.startsWith('access-control-')).length,
      0,
    );
  });

  it('counts every request of an active key, whatever the answer', async () => {
    const { key, keyId } = w.b;
    const before = await t.store.db.selectFrom('api_keys').select('request_count').where('id', '=', keyId).executeTakeFirstOrThrow();
    const statuses = [];
    for (const path of ['/api/public/v1/students', '/api/public/v1/students?limit=0', '/api/public/v1/students/nobody', '/api/public/v1/nothing']) {
      statuses.push((await t.request(path, { key })).status);
    }
    assert.deepEqual(statuses, [200, 400, 404, 404]);
    const deadline = Date.now() + 5000;
    let row;
    do {
      await new Promise((r) => setTimeout(r, 100));
      row = await t.store.db.selectFrom('api_keys').select(['request_count', 'last_used_at']).where('id', '=', keyId).executeTakeFirstOrThrow();
    } while (Number(row.request_count) < Number(before.request_count) + 4 && Date.now() < deadline);
    assert.equal(Number(row.request_count), Number(before.request_count) + 4);
    assert.match(String(row.last_used_at), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });

  it('never writes a key value into the logs', () => {
    const all = t.logs.join('');
    assert.ok(!all.includes('service_pk_'), 'a key value appeared in the logs');
  });
});
