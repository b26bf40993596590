/**
 * Fuzzing every route through Node's HTTPS client: adversarial query strings, bent
 * paths, every method, odd Authorization headers and other hostile headers. For every
 * case: an answer within the deadline, never a 500, every error problem+json with the
 * right status, a 200 only for a valid key; and afterwards the process still serves.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { API_PREFIX } from '../../src/edge/paths.js';
import { OPENAPI_PATH } from '../../src/openapi/index.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import {
  assertErrorAnswer,
  authArb,
  checkProperty,
  extraHeadersArb,
  fuzzClient,
  headerBytes,
  methodArb,
  pathArb,
  queryArb,
  type FuzzRequest,
  type Keys,
} from '../helpers/fuzz.js';
import { seedWorld, type World } from '../helpers/world.js';

/** What a request carries as its key: the first Authorization value (Node keeps the first), spaces around it trimmed. */
function presentedKey(auth: string | string[] | undefined): string | null {
  const first = Array.isArray(auth) ? auth[0] : auth;
  const match = /^bearer +(\S+)$/i.exec((first ?? '').replace(/^[ \t]+|[ \t]+$/g, ''));
  return match?.[1] ?? null;
}

describe('fuzzing the routes through an HTTPS client', () => {
  let t: TestApp;
  let w: World;
  let keys: Keys;
  let client: ReturnType<typeof fuzzClient>;

  before(async () => {
    // No rate limit in the way: the limiter is tested on its own.
    t = await startTestApp({ config: { rateLimitProfi: 10_000_000, rateLimitVip: 10_000_000 } });
    w = await seedWorld(t.store.db);
    keys = { valid: [w.a.key, w.b.key, w.lone.key], refused: [w.revokedKey, w.downgradedKey] };
    client = fuzzClient(t.origin, t.ca);
  });
  after(async () => {
    client.close();
    await t.close();
  });

  it('answers every request, never with a 500, every error as problem+json', async (ctx) => {
    const request = fc.record({ method: methodArb, path: pathArb, query: queryArb, auth: authArb(keys), extra: extraHeadersArb });
    await checkProperty(
      ctx,
      'https requests',
      1500,
      fc.asyncProperty(request, async ({ method, path, query, auth, extra }) => {
        const req: FuzzRequest = { method, path: path + query, headers: { ...extra, ...(auth === undefined ? {} : { authorization: auth }) } };
        const context = `${method} ${req.path.slice(0, 300)} auth=${JSON.stringify(auth)?.slice(0, 80)}`;
        let res;
        try {
          res = await client.send(req);
        } catch (err) {
          // Over the header limit the server answers 431 and closes, possibly before the
          // client finished writing; to a HEAD whose request line it could not see, the 431
          // carries a body the client then refuses (docs/operations.md).
          const code = (err as { code?: string }).code ?? '';
          const overLimit = headerBytes(req) > t.config.maxHeaderBytes;
          if (overLimit && (code === 'ECONNRESET' || code === 'EPIPE' || (method === 'HEAD' && code.startsWith('HPE_')))) return;
          throw err;
        }
        assertErrorAnswer(res, context, method);
        const publicDocument = req.path.split('?')[0] === OPENAPI_PATH;
        if (res.status === 200 && req.path.startsWith(API_PREFIX) && !publicDocument) {
          const key = presentedKey(auth);
          assert.ok(key !== null && keys.valid.includes(key), `200 without a valid key: ${context}`);
          assert.ok(method === 'GET' || method === 'HEAD', `200 for ${context}`);
        }
      }),
    );
    // The process is still up and serving normally.
    const normal = await client.send({ method: 'GET', path: '/api/public/v1/students?limit=1', headers: { authorization: `Bearer ${w.a.key}` } });
    assert.equal(normal.status, 200, normal.body);
  });
});
