/**
 * The OpenAPI document: valid OpenAPI 3.1 by an independent validator, complete
 * (every route, parameter rule, problem status, header and the security scheme), the
 * same whether served, built offline or printed by the CLI, and free of internal routes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { commonErrorStatuses } from '../../src/problems/index.js';
import { buildOpenApiDocument } from '../../src/openapi/document.js';
import type { OpenApiDocument, Operation, ParameterObject } from '../../src/openapi/types.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { ContractViolation, DocumentContract } from '../helpers/openapi.js';
import { runCli } from '../helpers/processes.js';
import { ROUTES } from '../helpers/routes.js';

const PREFIX = '/api/public/v1';

function operations(doc: OpenApiDocument): [string, string, Operation][] {
  return Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => [path, method, op] as [string, string, Operation]));
}

function param(doc: OpenApiDocument, path: string, name: string): ParameterObject {
  const found = doc.paths[path]?.get?.parameters?.find((p) => p.name === name);
  assert.ok(found, `${path} has no parameter ${name}`);
  return found;
}

describe('OpenAPI document', () => {
  let t: TestApp;
  let doc: OpenApiDocument;

  before(async () => {
    t = await startTestApp();
    doc = await buildOpenApiDocument();
  });
  after(() => t.close());

  it('is valid OpenAPI 3.1 for an independent validator', async () => {
    const result = await new Validator().validate(doc as unknown as Record<string, unknown>);
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
    assert.equal(doc.openapi, '3.1.0');
  });

  it('is served without a key, and is the same document the offline builder makes', async () => {
    const res = await t.request(`${PREFIX}/openapi.json`);
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.deepEqual(res.json(), doc);
    assert.equal((await t.request(`${PREFIX}/openapi.json`, { method: 'HEAD' })).status, 200);
  });

  it('is read-only like the rest of the API, and exists only at its one path', async () => {
    const post = await t.request(`${PREFIX}/openapi.json`, { method: 'POST' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET, HEAD');
    for (const path of ['/openapi.json', '/api/public/v2/openapi.json', `${PREFIX}/openapi.yaml`]) {
      const res = await t.request(path);
      assert.ok([401, 404].includes(res.status), `${path}: ${res.status}`);
    }
  });

  it('has info, servers and the HTTP bearer security scheme required by every operation', () => {
    assert.equal(doc.info.title, 'school-data');
    assert.match(doc.info.version, /^\d+\.\d+\.\d+/);
    assert.match(doc.info.description ?? '', /Authorization: Bearer/);
    assert.match(doc.info.description ?? '', /RateLimit-Policy/);
    assert.ok((doc.servers ?? []).length > 0);
    assert.deepEqual(doc.components?.securitySchemes?.apiKey, {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'service_pk_<32 hex>',
      description: 'The school\'s API key: Authorization: Bearer service_pk_...',
    });
    assert.deepEqual(doc.security, [{ apiKey: [] }]);
  });

  it('documents every public route, and nothing else', () => {
    const ops = operations(doc);
    assert.equal(ops.length, ROUTES.length);
    const contract = new DocumentContract(doc);
    for (const route of ROUTES) {
      // A response with a status the document cannot know proves that the route was found.
      assert.throws(() => contract.check('GET', route, { status: 299, headers: {}, text: '' }), /lists no response with status 299/, route);
    }
    for (const [path, method, op] of ops) {
      assert.equal(method, 'get');
      assert.ok(path.startsWith(`${PREFIX}/`), path);
      assert.ok(!path.includes('openapi') && !path.includes('docs'), path);
      assert.ok(op.operationId && op.summary && op.description && op.tags?.length, `${path} lacks documentation`);
    }
  });

  it('carries each parameter rule: pattern, bounds, enumeration, default, required', () => {
    const limit = param(doc, `${PREFIX}/students`, 'limit');
    assert.deepEqual(limit.schema, { type: 'integer', minimum: 1, maximum: 200, default: 50 });
    assert.equal(limit.required, false);
    assert.deepEqual(param(doc, `${PREFIX}/lessons`, 'offset').schema, { type: 'integer', minimum: 0, maximum: 1_000_000, default: 0 });
    assert.ok((param(doc, `${PREFIX}/students`, 'status').schema.enum as string[]).includes('learning_practice'));
    assert.equal((param(doc, `${PREFIX}/students`, 'category').schema.enum as string[]).length, 16);
    assert.equal(param(doc, `${PREFIX}/students`, 'group_id').schema.pattern, '^[A-Za-z0-9_-]{1,64}$');
    assert.equal(param(doc, `${PREFIX}/instructors`, 'is_active').schema.type, 'boolean');
    const from = param(doc, `${PREFIX}/reports/finance-summary`, 'period_from');
    assert.equal(from.required, true);
    assert.match(String(from.schema.pattern), /\\d\{4\}-\\d\{2\}-\\d\{2\}/);
    assert.equal(param(doc, `${PREFIX}/payments`, 'period_to').required, false);
    const id = doc.paths[`${PREFIX}/students/{id}`]?.get?.parameters?.find((p) => p.in === 'path');
    assert.equal(id?.required, true);
    assert.equal(id?.schema.pattern, '^[A-Za-z0-9_-]{1,64}$');
  });

  it('describes every response: the body, problem+json for each error status, and the headers', () => {
    for (const [path, , op] of operations(doc)) {
      // The changes feed alone can say 410 (an expired cursor).
      const own = path.endsWith('/changes') ? ['410'] : [];
      assert.deepEqual(Object.keys(op.responses).sort(), ['200', '304', '408', '414', '431', ...own, ...commonErrorStatuses.map(String)].sort(), path);
      assert.equal(op.responses['304']?.content, undefined, `${path}: a 304 has no body`);
      assert.equal(op.responses['304']?.headers?.ETag?.required, true);
      assert.ok(op.parameters?.some((p) => p.in === 'header' && p.name === 'If-None-Match'), `${path}: If-None-Match`);
      assert.deepEqual(Object.keys(op.responses['200']?.content ?? {}), ['application/json']);
      for (const status of commonErrorStatuses) {
        const res = op.responses[String(status)]!;
        assert.deepEqual(res.content, { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } }, `${path} ${status}`);
        assert.ok(res.description.length > 10);
        assert.equal(res.headers?.['X-Request-Id']?.required, true);
        assert.equal(res.headers?.['Cache-Control']?.schema.const, 'no-store', `${path} ${status}`);
        assert.equal(res.headers?.['Strict-Transport-Security']?.required, true);
      }
      const ok = op.responses['200']!.headers ?? {};
      assert.equal(ok.RateLimit?.required, true);
      assert.equal(ok['RateLimit-Policy']?.required, true);
      assert.equal(ok.ETag?.required, true);
      assert.equal(ok['Cache-Control']?.required, true);
      assert.equal(ok.Vary?.required, true);
      assert.equal(ok['X-Content-Type-Options']?.required, true);
      assert.equal(op.responses['401']?.headers?.['WWW-Authenticate']?.required, true);
      assert.equal(op.responses['429']?.headers?.['Retry-After']?.required, true);
      assert.equal(op.responses['503']?.headers?.['Retry-After']?.required, true);
    }
    const schemas = doc.components?.schemas ?? {};
    for (const name of ['Problem', 'Student', 'StudentCard', 'StudentList', 'ListMeta', 'FinanceSummary']) assert.ok(schemas[name], name);
    assert.ok((schemas.Problem?.required as string[]).includes('request_id'));
  });

  it('is what `school-data openapi` prints', async () => {
    const printed = await runCli(['openapi'], { ...process.env, PORT: 'not-a-port' });
    assert.equal(printed.code, 0, printed.stderr);
    assert.deepEqual(JSON.parse(printed.stdout), doc);
    const json = await runCli(['openapi', '--json'], process.env);
    assert.deepEqual(JSON.parse(json.stdout), doc);
  });
});

describe('the contract check of test responses', () => {
  let contract: DocumentContract;
  const always = { 'x-request-id': 'r1', 'strict-transport-security': 'max-age=31536000', 'x-content-type-options': 'nosniff' };
  const ok = {
    ...always, 'content-type': 'application/json; charset=utf-8', ratelimit: '"default";r=1;t=5', 'ratelimit-policy': '"default";q=60;w=60',
    etag: '"abc-identity"', 'cache-control': 'private, no-cache', vary: 'accept-encoding, x-no-compression',
  };
  const page = { items: [], meta: { total: 0, limit: 50, offset: 0 } };

  before(async () => {
    contract = new DocumentContract(await buildOpenApiDocument());
  });

  it('passes a response that matches, and skips what the document does not describe', () => {
    contract.check('GET', `${PREFIX}/students?limit=5`, { status: 200, headers: ok, text: JSON.stringify(page) });
    contract.check('HEAD', `${PREFIX}/students`, { status: 200, headers: ok, text: '' });
    contract.check('GET', '/elsewhere', { status: 418, headers: {}, text: 'nope' });
    contract.check('POST', `${PREFIX}/students`, { status: 405, headers: {}, text: '' });
  });

  it('fails on an undocumented field, a wrong type, a missing header, a wrong content type or status', () => {
    const cases: [number, Record<string, string>, unknown, RegExp][] = [
      [200, ok, { ...page, extra: 1 }, /must NOT have additional properties/],
      [200, ok, { ...page, meta: { ...page.meta, total: '0' } }, /must be integer/],
      [200, { ...ok, ratelimit: 'r=1' }, page, /header RateLimit/],
      [200, { ...always, 'content-type': 'application/json' }, page, /required header RateLimit/],
      [200, { ...ok, 'strict-transport-security': 'max-age=0' }, page, /header Strict-Transport-Security/],
      [400, { ...always, 'cache-control': 'no-store', 'content-type': 'application/json' }, {}, /content type application\/json is not one of application\/problem\+json/],
      [401, { ...always, 'content-type': 'application/problem+json', 'cache-control': 'no-store' }, {}, /WWW-Authenticate/],
      [404, { ...always, 'content-type': 'application/problem+json', 'cache-control': 'private, no-cache' }, {}, /header Cache-Control/],
      [418, ok, page, /no response with status 418/],
    ];
    for (const [status, headers, body, expected] of cases) {
      assert.throws(() => contract.check('GET', `${PREFIX}/students`, { status, headers, text: JSON.stringify(body) }), (err: unknown) => err instanceof ContractViolation && expected.test(err.message));
    }
    const card = { id: 's1', created_at: 'yesterday' };
    assert.throws(() => contract.check('GET', `${PREFIX}/students/s1`, { status: 200, headers: ok, text: JSON.stringify(card) }), ContractViolation);
  });
});
