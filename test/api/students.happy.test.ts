import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { seedWorld, type World } from '../helpers/world.js';

interface List {
  items: Record<string, unknown>[];
  meta: { total: number; limit: number; offset: number };
}

describe('students', () => {
  let t: TestApp;
  let w: World;
  const get = async (path: string) => {
    const res = await t.request(`/api/public/v1${path}`, { key: w.a.key });
    assert.equal(res.status, 200, res.text);
    return res.json() as List & Record<string, unknown>;
  };

  before(async () => {
    t = await startTestApp();
    w = await seedWorld(t.store.db);
  });
  after(() => t.close());

  it('lists students in created_at, id order with exactly the spec fields', async () => {
    const body = await get('/students');
    assert.deepEqual(body.meta, { total: 5, limit: 50, offset: 0 });
    assert.deepEqual(
      body.items.map((s) => s.id),
      ['s1', 's2', 's3', 's4', 's5'],
    );
    assert.deepEqual(body.items[0], {
      id: 's1',
      full_name: 'Иванов Иван A',
      phone: '+79990000001',
      email: 's1@example.ru',
      category: 'B',
      status: 'learning_practice',
      group_id: 'g1',
      branch_id: 'br1',
      created_at: '2026-01-10T09:00:00Z',
    });
    assert.equal(body.items[1]?.branch_id, null);
  });

  it('filters by status, category and group_id, alone and together', async () => {
    const ids = async (q: string) => (await get(`/students?${q}`)).items.map((s) => s.id);
    assert.deepEqual(await ids('status=learning_practice'), ['s1', 's3']);
    assert.deepEqual(await ids('category=A'), ['s3']);
    assert.deepEqual(await ids('group_id=g1'), ['s1', 's2', 's4', 's5']);
    assert.deepEqual(await ids('status=learning_practice&category=B&group_id=g1'), ['s1']);
    const none = await get('/students?group_id=nothing-here');
    assert.deepEqual(none, { items: [], meta: { total: 0, limit: 50, offset: 0 } });
  });

  it('pages with limit and offset, and meta echoes them', async () => {
    const page = await get('/students?limit=1&offset=1');
    assert.deepEqual(page.meta, { total: 5, limit: 1, offset: 1 });
    assert.deepEqual(
      page.items.map((s) => s.id),
      ['s2'],
    );
    assert.equal((await get('/students?limit=200')).items.length, 5);
    const past = await get('/students?offset=99');
    assert.deepEqual(past, { items: [], meta: { total: 5, limit: 50, offset: 99 } });
    const filteredPage = await get('/students?group_id=g1&limit=2&offset=2');
    assert.deepEqual(filteredPage.meta, { total: 4, limit: 2, offset: 2 });
    assert.deepEqual(
      filteredPage.items.map((s) => s.id),
      ['s4', 's5'],
    );
  });

  it('rejects limit 201 and limit 0', async () => {
    for (const q of ['limit=201', 'limit=0']) {
      const res = await t.request(`/api/public/v1/students?${q}`, { key: w.a.key });
      assert.equal(res.status, 400);
    }
  });

  it('returns the student card with contracts, lesson counts and balance', async () => {
    const card = await get('/students/s1');
    assert.deepEqual(card, {
      id: 's1',
      full_name: 'Иванов Иван A',
      phone: '+79990000001',
      email: 's1@example.ru',
      category: 'B',
      status: 'learning_practice',
      group_id: 'g1',
      branch_id: 'br1',
      created_at: '2026-01-10T09:00:00Z',
      birth_date: '2000-05-01',
      instructor_id: 'i1',
      transmission: 'manual',
      contracts: [
        { id: 'c1', number: 'Д-2026/001', status: 'active', price: '50000.00', paid: '18499.50', debt: '31500.50', currency: 'RUB' },
        { id: 'c3', number: 'Д-2026/003', status: 'terminated', price: '10000.00', paid: '0.00', debt: '10000.00', currency: 'RUB' },
      ],
      lessons: { driving_completed: 2, driving_minutes_completed: 150, theory_completed: 1, planned: 1 },
      balance: { price: '60000.00', paid: '19499.50', debt: '40500.50', currency: 'RUB' },
    });
  });

  it('shows nulls and zeros on a card with little data', async () => {
    const card = await get('/students/s2');
    assert.equal(card.birth_date, null);
    assert.equal(card.instructor_id, null);
    assert.equal(card.transmission, null);
    assert.deepEqual(card.lessons, { driving_completed: 0, driving_minutes_completed: 0, theory_completed: 0, planned: 0 });
    assert.deepEqual(card.balance, { price: '45000.50', paid: '45000.50', debt: '0.00', currency: 'RUB' });
  });

  it('answers 404 for a missing or malformed student id', async () => {
    for (const id of ['nobody', 'bad%20id', 'x'.repeat(65), '%D0%B6']) {
      const res = await t.request(`/api/public/v1/students/${id}`, { key: w.a.key });
      assert.equal(res.status, 404, id);
      assert.equal((res.json() as { code: string }).code, 'not_found');
    }
  });

  it('answers HEAD like GET without a body', async () => {
    const res = await t.request('/api/public/v1/students', { key: w.a.key, method: 'HEAD' });
    assert.equal(res.status, 200);
    assert.equal(res.text, '');
  });
});
