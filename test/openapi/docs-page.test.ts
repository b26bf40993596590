/**
 * The docs page at /docs: public, every asset served by the service itself (a closed
 * network has no CDN), pointed at the canonical document, no online validator, and a
 * Content-Security-Policy that allows nothing from elsewhere.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiMetrics } from '../../src/ops/metrics.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

describe('docs page', () => {
  let t: TestApp;
  const metrics = new ApiMetrics();

  before(async () => {
    t = await startTestApp({ metrics });
  });
  after(() => t.close());

  it('is served without a key, with a CSP that keeps the page to its own origin', async () => {
    for (const path of ['/docs', '/docs/']) {
      const res = await t.request(path);
      assert.equal(res.status, 200, path);
      assert.match(String(res.headers['content-type']), /^text\/html/);
      const csp = String(res.headers['content-security-policy']);
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /script-src 'self'(;|$)/);
      assert.match(csp, /connect-src 'self'(;|$)/);
      assert.doesNotMatch(csp, /https?:/);
    }
  });

  it('loads every script, style and image from this service', async () => {
    const html = (await t.request('/docs')).text;
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.ok(assets.length >= 5, html);
    for (const asset of assets) {
      assert.ok(asset.startsWith('/docs/static/'), `not served locally: ${asset}`);
      const res = await t.request(asset);
      assert.equal(res.status, 200, asset);
      assert.ok(res.text.length > 0, asset);
    }
    const bundle = await t.request('/docs/static/swagger-ui-bundle.js');
    assert.match(String(bundle.headers['content-type']), /javascript/);
  });

  it('renders the canonical document and never asks the online validator', async () => {
    const init = (await t.request('/docs/static/swagger-initializer.js')).text;
    assert.match(init, /"urls":\[\{"url":"\/api\/public\/v1\/openapi.json"/);
    assert.match(init, /"validatorUrl":null/);
    const code = init.split('\n').filter((line) => !line.trim().startsWith('//'));
    assert.doesNotMatch(code.join('\n'), /https?:\/\//);
    // Swagger UI's own copies of the document are not exposed: there is one document.
    for (const alias of ['/docs/json', '/docs/yaml']) assert.equal((await t.request(alias)).status, 404, alias);
  });

  it('carries a request id, the security headers and a Cache-Control on the page and every file of it, and answers 304', async () => {
    for (const path of ['/docs', '/docs/static/swagger-ui-bundle.js', '/docs/static/swagger-initializer.js', '/docs/static/swagger-ui.css']) {
      const res = await t.request(path);
      assert.equal(res.status, 200, path);
      assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/, path);
      assert.equal(res.headers['strict-transport-security'], 'max-age=31536000', path);
      assert.equal(res.headers['x-content-type-options'], 'nosniff', path);
      assert.equal(res.headers['cache-control'], 'no-cache', path);
    }
    const css = await t.request('/docs/static/swagger-ui.css');
    const again = await t.request('/docs/static/swagger-ui.css', { headers: { 'if-none-match': String(css.headers.etag) } });
    assert.equal(again.status, 304);
    assert.match(String(again.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  });

  it('gets one access line and its count in the metrics for the page and each of its files, as every other answer', async () => {
    const asked = { '/docs/': 200, '/docs/static/swagger-ui.css': 200, '/docs/static/index.html': 302, '/docs/json': 404 } as const;
    const counted = async (route: string, status: number) => {
      const line = new RegExp(`school_data_http_requests_total\\{route="${route.replace(/[/*]/g, '\\$&')}",status="${status}"\\} (\\d+)\n`).exec(await metrics.exposition());
      return Number(line?.[1] ?? 0);
    };
    const before = [await counted('/docs/static/*', 200), await counted('/docs/json', 404)];
    const ids = new Map<string, string>();
    for (const [path, status] of Object.entries(asked)) {
      const res = await t.request(path);
      assert.equal(res.status, status, path);
      ids.set(path, String(res.headers['x-request-id']));
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    const lines = t.logs.join('').split('\n').filter((line) => line.includes('"msg":"request completed"'));
    for (const [path, id] of ids) {
      const own = lines.filter((line) => line.includes(id)).map((line) => JSON.parse(line) as { req: { url: string }; res: { statusCode: number } });
      assert.equal(own.length, 1, `${path}: ${own.length} lines`);
      assert.deepEqual([own[0]!.req.url, own[0]!.res.statusCode], [path, asked[path as keyof typeof asked]]);
    }
    assert.deepEqual([await counted('/docs/static/*', 200), await counted('/docs/json', 404)], [before[0]! + 1, before[1]! + 1]);
  });

  it('answers 404 to a step out of the page\'s folder, however it is spelled', async () => {
    for (const path of ['/docs/static/%2e%2e/index.html', '/docs/static/%2E%2E/%2E%2E/package.json', '/docs/static/.%2e/index.html']) {
      const res = await t.request(path);
      assert.equal(res.status, 404, path);
      assert.equal((res.json() as { code: string }).code, 'not_found', path);
    }
  });

  it('is the only public thing outside the API prefix', async () => {
    for (const path of ['/', '/documentation', '/docs-old', '/api/public/v2/students']) {
      assert.equal((await t.request(path)).status, 404, path);
    }
  });
});
