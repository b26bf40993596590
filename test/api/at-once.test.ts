/**
 * Many requests at once, with stored answers off: every one is a query, and on PostgreSQL
 * the reads of a turn that run the same statement go out as one (src/db/reader.ts). Each
 * request must still get exactly the answer it gets alone, whichever requests share its turn.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { seedWorld, type World } from '../helpers/world.js';

/** A path of every endpoint, and of the same endpoints with other values. */
const PATHS = [
  '/students', '/students?limit=1', '/students?limit=2&offset=1', '/students?offset=100', '/students?status=learning_practice', '/students?category=B&limit=3',
  '/students/s1', '/students/s2', '/students/nobody',
  '/instructors', '/instructors?is_active=true', '/instructors?is_active=false',
  '/vehicles', '/vehicles?limit=1&offset=1',
  '/lessons', '/lessons?period_from=2026-03-01&period_to=2026-03-31', '/lessons?instructor_id=i1', '/lessons?student_id=s2', '/lessons?period_from=2026-03-02T00:00:00Z',
  '/contracts', '/contracts?student_id=s1', '/payments', '/payments?period_from=2026-02-01&period_to=2026-02-28',
  '/leads', '/leads?status=new', '/leads?period_to=2026-01-31',
  '/reports/finance-summary?period_from=2026-01-01&period_to=2026-12-31', '/reports/finance-summary?period_from=2026-03-01&period_to=2026-03-01',
  '/changes', '/changes?limit=2', '/changes?resources=students,payments',
];

describe('requests at once', () => {
  let t: TestApp;
  let w: World;
  const get = async (key: string, path: string) => {
    const res = await t.request(`/api/public/v1${path}`, { key });
    // A problem names its own request: the rest of it must be the same.
    return `${res.status} ${res.text.replace(/"request_id":"[^"]*"/, '')}`;
  };

  before(async () => {
    t = await startTestApp({ config: { responseCacheMb: 0, rateLimitProfi: 100_000, rateLimitVip: 100_000 } });
    w = await seedWorld(t.store.db);
  });
  after(() => t.close());

  it('each get the answer they get alone, for every endpoint and both schools', async () => {
    const asked = [w.a.key, w.b.key].flatMap((key) => PATHS.map((path) => ({ key, path })));
    const alone: string[] = [];
    for (const { key, path } of asked) alone.push(await get(key, path));
    assert.ok(alone.some((a) => a.startsWith('404 ')) && alone.filter((a) => a.startsWith('200 ')).length > 50, 'the paths answer as expected');
    for (let round = 0; round < 3; round++) {
      // Every request twice, in an order that differs each round: the same statement with many values in one turn.
      const order = [...asked, ...asked].map((a, i) => ({ ...a, i: i % asked.length })).sort((x, y) => ((x.i * 7 + round) % 11) - ((y.i * 7 + round) % 11));
      const together = await Promise.all(order.map(({ key, path }) => get(key, path)));
      order.forEach(({ path, i }, n) => assert.equal(together[n], alone[i], `${path} (round ${round})`));
    }
  });
});
