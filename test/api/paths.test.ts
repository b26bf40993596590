/**
 * Every endpoint answers the same whether its path is written plainly (answered by the
 * front, src/access/front.ts) or reaches its route through the router's percent-decoding
 * (answered through Fastify): the same status, headers and body, 200s and problems alike, the
 * entity tag aside (it names the request target byte for byte). Both with stored answers and without.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { stableHeaders, type TestResponse } from '../helpers/http.js';
import { seedWorld, type World } from '../helpers/world.js';

/** A plain target, and the same with its endpoint's first letter percent-encoded. */
const TARGETS = [
  '/students?limit=2&offset=1', '/students?status=learning_practice', '/students?limit=0', '/students?bogus=1',
  '/students/s1', '/students/nobody', '/students/a..b',
  '/instructors?is_active=false', '/vehicles', '/lessons?period_from=2026-03-01&period_to=2026-03-31', '/lessons?period_from=2026-02-30',
  '/contracts?student_id=s1', '/payments', '/leads?status=new', '/reports/finance-summary?period_from=2026-01-01&period_to=2026-12-31',
  '/reports/finance-summary', '/changes?limit=2', '/changes?after=nonsense',
];

const encoded = (target: string) => target.replace(/^\/(.)/, (_, c: string) => `/%${c.charCodeAt(0).toString(16)}`);

function comparable(res: TestResponse) {
  const headers = stableHeaders(res);
  delete headers.etag;
  const body = res.text === '' ? null : (JSON.parse(res.text) as Record<string, unknown>);
  if (body && res.status >= 400) delete body.request_id;
  return { status: res.status, headers, body };
}

for (const responseCacheMb of [32, 0]) {
  describe(`answers are the same however the path is written (stored answers ${responseCacheMb} MiB)`, () => {
    let t: TestApp;
    let w: World;

    before(async () => {
      t = await startTestApp({ config: { responseCacheMb } });
      w = await seedWorld(t.store.db);
    });
    after(() => t.close());

    it('for every endpoint, its 200s and its problems', async () => {
      const statuses = new Set<number>();
      for (const target of TARGETS) {
        // Twice each: the second may be a stored answer.
        for (let round = 0; round < 2; round++) {
          const plain = await t.request(`/api/public/v1${target}`, { key: w.a.key });
          const routed = await t.request(`/api/public/v1${encoded(target)}`, { key: w.a.key });
          statuses.add(plain.status);
          assert.deepEqual(comparable(routed), comparable(plain), `${target} vs ${encoded(target)}`);
        }
      }
      assert.deepEqual([...statuses].sort(), [200, 400, 404]);
    });
  });
}
