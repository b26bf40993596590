/**
 * Refusals (src/access/hook.ts) are the same whether a path is written plainly or reaches
 * its route through the router's percent-decoding: same status, headers and body (but for
 * the request id), the same access line and the same metrics. And under concurrency every
 * request gets its own key's answer (the PostgreSQL lookups of one turn go out together).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiMetrics } from '../../src/ops/metrics.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { stableHeaders, type TestResponse } from '../helpers/http.js';
import { seedWorld, type World } from '../helpers/world.js';

function comparable(res: TestResponse) {
  const headers = stableHeaders(res);
  const body = res.text === '' ? null : (JSON.parse(res.text) as Record<string, unknown>);
  if (body) {
    assert.equal(body.request_id, res.headers['x-request-id'], 'the body\'s request id is the header\'s');
    delete body.request_id;
  }
  return { status: res.status, headers, body };
}

describe('refusals are the same however the path is written', () => {
  let t: TestApp;
  let w: World;
  let limited: string;
  const metrics = new ApiMetrics();

  before(async () => {
    t = await startTestApp({ metrics, config: { rateLimitProfi: 2 } });
    w = await seedWorld(t.store.db);
    limited = w.b.key;
    // School B (Profi, limit 2 here) past its limit for the rest of the window.
    for (let i = 0; i < 3; i++) await t.request('/api/public/v1/vehicles', { key: limited });
  });
  after(() => t.close());

  // The second path reaches the same route as the first through the router's percent-decoding.
  const pairs = [
    ['/api/public/v1/students?limit=5', '/api/public/v1/%73tudents?limit=5'],
    ['/api/public/v1/students/s1', '/api/public/v1/students/%731'],
    // The card's route with an empty id, as Fastify's router takes a trailing slash.
    ['/api/public/v1/students/', '/api/public/v1/%73tudents/'],
    ['/api/public/v1/nothing', '/api/public/v1/n%6fthing'],
  ] as const;

  const cases: [string, () => { method?: string; key?: string | null; headers?: Record<string, string> }][] = [
    ['no key (401)', () => ({ key: null })],
    ['a malformed key (401)', () => ({ headers: { authorization: 'Bearer nope' } })],
    ['an unknown key (401)', () => ({ key: `service_pk_${'0'.repeat(32)}` })],
    ['a revoked key (401)', () => ({ key: w.revokedKey })],
    ['a school below Profi (402)', () => ({ key: w.downgradedKey })],
    ['a school past its limit (429)', () => ({ key: limited })],
    ['a method other than GET and HEAD (405)', () => ({ method: 'DELETE', key: w.a.key })],
    ['HEAD with an unknown key (401, no body)', () => ({ method: 'HEAD', key: `service_pk_${'1'.repeat(32)}` })],
  ];

  for (const [name, opts] of cases) {
    it(name, async () => {
      for (const [plain, routed] of pairs) {
        const a = await t.request(plain, opts());
        const b = await t.request(routed, opts());
        assert.ok(a.status >= 400, `${plain}: ${a.status}`);
        assert.deepEqual(comparable(a), comparable(b), `${plain} vs ${routed}`);
      }
    });
  }

  it('logs refusals, key and school included once the key is known', async () => {
    const res = await t.request('/api/public/v1/leads', { key: limited });
    assert.equal(res.status, 429);
    const id = res.headers['x-request-id'];
    const line = t.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.requestId === id);
    assert.ok(line, 'an access line with the answer\'s request id');
    assert.equal(line.msg, 'request completed');
    assert.equal(line.keyId, w.b.keyId);
    assert.equal(line.schoolId, w.b.id);
    assert.deepEqual((line.req as { url: string }).url, '/api/public/v1/leads');
    assert.deepEqual(line.res, { statusCode: 429 });
  });

  it('counts refusals under the route pattern the path matches', async () => {
    await t.request('/api/public/v1/students/s2', { key: null });
    await t.request('/api/public/v1/reports/finance-summary', { key: null });
    await t.request('/api/public/v1/nothing/here', { key: null });
    const text = await metrics.exposition();
    const count = (route: string, status: number) => Number(new RegExp(`^school_data_http_requests_total\\{route="${route.replaceAll('/', '\\/')}",status="${status}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
    assert.ok(count('/api/public/v1/students/:id', 401) >= 1);
    assert.ok(count('/api/public/v1/reports/finance-summary', 401) >= 1);
    assert.ok(count('unmatched', 401) >= 1);
    assert.match(text, /^school_data_http_request_duration_seconds_count\{route="\/api\/public\/v1\/students\/:id"\} \d+$/m);
  });
});

describe('concurrent requests each get their own key\'s answer', () => {
  let t: TestApp;
  let w: World;

  before(async () => {
    t = await startTestApp({ config: { rateLimitVip: 100_000, rateLimitProfi: 100_000 } });
    w = await seedWorld(t.store.db);
  });
  after(() => t.close());

  it('keys of several schools, unknown, revoked and repeated keys, all at once', async () => {
    const unknown = (n: number) => `service_pk_${n.toString(16).padStart(32, 'a')}`;
    const asks = Array.from({ length: 300 }, (_, n) => {
      const kind = n % 6;
      if (kind === 0) return { key: w.a.key, expect: 200, school: w.a.id };
      if (kind === 1) return { key: w.b.key, expect: 200, school: w.b.id };
      if (kind === 2) return { key: w.lone.key, expect: 200, school: w.lone.id };
      if (kind === 3) return { key: unknown(n), expect: 401, school: null };
      if (kind === 4) return { key: w.revokedKey, expect: 401, school: null };
      return { key: w.downgradedKey, expect: 402, school: null };
    });
    const answers = await Promise.all(asks.map((ask) => t.request('/api/public/v1/students/only-here', { key: ask.key })));
    answers.forEach((res, n) => {
      const ask = asks[n]!;
      if (ask.expect === 200) {
        // Only the lone school has this student: the others answer 404, which is their own answer too.
        assert.equal(res.status, ask.school === w.lone.id ? 200 : 404, `request ${n}: ${res.text}`);
      } else {
        assert.equal(res.status, ask.expect, `request ${n}: ${res.text}`);
      }
    });
  });
});
