/**
 * The tenant matrix: every route, with each school's key, sees only that school's
 * rows. Both schools hold the same ids with different contents ("... A" / "... B").
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { ROUTES } from '../helpers/routes.js';
import { seedWorld, type World } from '../helpers/world.js';

describe('tenant isolation on every route', () => {
  let t: TestApp;
  let w: World;

  before(async () => {
    t = await startTestApp();
    w = await seedWorld(t.store.db);
  });
  after(() => t.close());

  for (const route of ROUTES) {
    it(`${route} shows only the key's school`, async () => {
      const a = await t.request(route, { key: w.a.key });
      const b = await t.request(route, { key: w.b.key });
      assert.equal(a.status, 200, a.text);
      assert.equal(b.status, 200, b.text);
      assert.ok(!/ B"/.test(a.text), `school A sees B's data: ${a.text.slice(0, 300)}`);
      assert.ok(!/ A"/.test(b.text), `school B sees A's data: ${b.text.slice(0, 300)}`);
      // Same ids, same shapes: the two answers differ only by the tag in names (and, in the
      // changes feed, by when each school's import committed and by its cursor's school tag).
      const same = (text: string, tag: string) =>
        text.replace(new RegExp(` ${tag}"`, 'g'), ' X"').replace(/"changed_at":"[^"]*"/g, '"changed_at":""').replace(/"next_cursor":"[^"]*"/g, '"next_cursor":""');
      assert.equal(same(a.text, 'A'), same(b.text, 'B'));
    });
  }

  it("another school's student is 404, never 403", async () => {
    const own = await t.request('/api/public/v1/students/only-here', { key: w.lone.key });
    assert.equal(own.status, 200);
    for (const key of [w.a.key, w.b.key]) {
      const other = await t.request('/api/public/v1/students/only-here', { key });
      assert.equal(other.status, 404);
      assert.equal((other.json() as { code: string }).code, 'not_found');
      assert.ok(!other.text.includes('Только'));
    }
    const lonesList = await t.request('/api/public/v1/students', { key: w.lone.key });
    assert.deepEqual((lonesList.json() as { meta: unknown }).meta, { total: 1, limit: 50, offset: 0 });
  });
});
