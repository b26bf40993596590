/**
 * The docs page at /docs: public, every asset served by the service itself (a closed
 * network has no CDN), pointed at the canonical document, no online validator, and a
 * Content-Security-Policy that allows nothing from elsewhere.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.js';

describe('docs page', () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp();
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

  it('is the only public thing outside the API prefix', async () => {
    for (const path of ['/', '/documentation', '/docs-old', '/api/public/v2/students']) {
      assert.equal((await t.request(path)).status, 404, path);
    }
  });
});
