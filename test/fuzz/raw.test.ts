/**
 * Fuzzing below Node's HTTP client: raw HTTP/1.1 written on TLS sockets, with request
 * lines, header names and values, line endings and framing that a client library would
 * refuse to produce (NUL bytes, raw UTF-8, bare LF, obs-fold, duplicate or conflicting
 * Content-Length and Transfer-Encoding, unknown methods and versions). Every case must
 * get a complete answer, never a 500 and never silence, every error problem+json.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { assertErrorAnswer, checkProperty, pathArb, queryArb, rawExchange } from '../helpers/fuzz.js';
import { seedWorld, type World } from '../helpers/world.js';

describe('fuzzing raw HTTP/1.1 over TLS', () => {
  let t: TestApp;
  let w: World;

  before(async () => {
    t = await startTestApp({ config: { rateLimitProfi: 10_000_000, rateLimitVip: 10_000_000 } });
    w = await seedWorld(t.store.db);
  });
  after(() => t.close());

  it('answers every raw request completely, never with a 500, every error as problem+json', async (ctx) => {
    const method = fc.oneof(
      { weight: 6, arbitrary: fc.constant('GET') },
      { weight: 1, arbitrary: fc.constant('HEAD') },
      { weight: 2, arbitrary: fc.constantFrom('get', 'POST', 'DELETE', 'OPTIONS', 'CONNECT', 'PRI', 'FOO', 'G\u00c9T', '', 'GET GET', 'M-SEARCH') },
    );
    const target = fc.oneof(
      { weight: 5, arbitrary: fc.tuple(pathArb, queryArb).map(([p, q]) => p + q) },
      {
        weight: 3,
        arbitrary: fc.constantFrom(
          '/api/public/v1/students/\u00e9', '/api/public/v1/students/\u0000', '/api/public/v1/students?status=\u00ff', '/api/public/v1/stu dents', '/api/public/v1/students\t',
          '*', 'https://evil.example/api/public/v1/students', 'http://127.0.0.1/api/public/v1/students', '//evil.example/api/public/v1/students', 'students', '',
          '/api/public/v1/students?limit=1#frag', '/api/public/v1/students/s1%00', '/api/public/v1/students/\u{1F697}', '/api/public/v1/\u0430\u043f\u0438',
        ),
      },
      { weight: 1, arbitrary: fc.nat({ max: 20_000 }).map((n) => `/api/public/v1/students?q=${'z'.repeat(n)}`) },
    );
    const version = fc.oneof(
      { weight: 8, arbitrary: fc.constant('HTTP/1.1') },
      { weight: 2, arbitrary: fc.constantFrom('HTTP/1.0', 'HTTP/2.0', 'HTTP/1.2', 'HTTP/0.9', 'http/1.1', 'HTTP/1', 'HTTP/1.1 extra', '') },
    );
    const auth = fc.constantFrom(
      `Bearer ${w.a.key}`, `bearer ${w.b.key}`, `BEARER  ${w.a.key}`, `Bearer\t${w.a.key}`, `Bearer ${w.revokedKey}`, `Bearer ${w.downgradedKey}`, 'Bearer', '', 'Bearer \u00e9\u00e9', `Bearer ${w.a.key}\u0000`,
    );
    const header = fc.oneof(
      { weight: 4, arbitrary: auth.map((v) => `Authorization: ${v}`) },
      {
        weight: 3,
        arbitrary: fc.constantFrom(
          'X-A: a\u0000b', 'X-A: \u00e9\u00ff', 'X-A: \u{1F697}', 'Bad Name: x', ' Host: x', 'X\u00e9: y', ': empty', 'NoColon', 'X-A:', 'X-A:   ', 'Host: other', 'Host:',
          'Expect: 100-continue', 'Expect: teapot', 'Upgrade: websocket', 'Connection: Upgrade', 'Connection: keep-alive', 'Accept-Encoding: gzip', 'X-A: a\r\n b', 'X-A: a\rb',
          'authorization: Bearer x', 'AUTHORIZATION: Bearer y', 'Cookie: a=b', 'X-Forwarded-Proto: http', 'Content-Type: application/json',
        ),
      },
      { weight: 1, arbitrary: fc.nat({ max: 20_000 }).map((n) => `X-Long: ${'l'.repeat(n)}`) },
    );
    // Complete framings only (an unfinished body would rightly be waited for), and the
    // conflicting ones a smuggling attempt uses.
    const framing = fc.constantFrom(
      { headers: [], body: '' },
      { headers: ['Content-Length: 5'], body: 'hello' },
      { headers: ['Content-Length: 0'], body: '' },
      { headers: ['Transfer-Encoding: chunked'], body: '5\r\nhello\r\n0\r\n\r\n' },
      { headers: ['Content-Length: 2000'], body: 'x'.repeat(2000) },
      { headers: ['Content-Length: 5', 'Transfer-Encoding: chunked'], body: '0\r\n\r\n' },
      { headers: ['Content-Length: 3', 'Content-Length: 4'], body: 'abcd' },
      { headers: ['Content-Length: -1'], body: '' },
      { headers: ['Content-Length: 1e3'], body: '' },
      { headers: ['Transfer-Encoding: xchunked'], body: '' },
      { headers: ['Transfer-Encoding: chunked, identity'], body: '0\r\n\r\n' },
      { headers: ['Transfer-Encoding: chunked'], body: 'zz\r\nhello\r\n0\r\n\r\n' },
    );
    const request = fc.record({
      method,
      target,
      version,
      host: fc.boolean(),
      headers: fc.array(header, { maxLength: 5 }),
      framing,
      eol: fc.constantFrom('\r\n', '\r\n', '\r\n', '\n'),
      encoding: fc.constantFrom<BufferEncoding>('utf8', 'latin1'),
    });

    await checkProperty(
      ctx,
      'raw requests',
      500,
      fc.asyncProperty(request, async (r) => {
        const lines = [
          [r.method, r.target, r.version].filter((part, i) => i < 2 || part !== '').join(' '),
          ...(r.host ? ['Host: 127.0.0.1'] : []),
          ...r.headers,
          ...r.framing.headers,
          'Connection: close',
        ];
        const bytes = Buffer.from(`${lines.join(r.eol)}${r.eol}${r.eol}${r.framing.body}`, r.encoding);
        const context = JSON.stringify(bytes.toString('latin1').slice(0, 400));
        const outcome = await rawExchange(t.origin, t.ca, bytes, { headOnly: r.method === 'HEAD', timeoutMs: 8000 });
        assert.equal(outcome.kind, 'response', `no answer (${outcome.kind}) to ${context}`);
        if (outcome.kind !== 'response') return;
        assertErrorAnswer(outcome.response, context, r.method === 'HEAD' ? 'HEAD' : 'GET');
      }),
    );

    const normal = await t.request('/api/public/v1/students?limit=1', { key: w.a.key });
    assert.equal(normal.status, 200, normal.text);
  });
});
