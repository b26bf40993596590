/**
 * Every list endpoint besides students, and the finance summary: fields, filters,
 * order, paging, and period edges in the school's time zone (Europe/Moscow, UTC+3).
 * Expected values are worked out by hand from test/helpers/fixtures.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { seedWorld, type World } from '../helpers/world.js';

interface List {
  items: Record<string, unknown>[];
  meta: { total: number; limit: number; offset: number };
}

describe('lists and the finance summary', () => {
  let t: TestApp;
  let w: World;
  const get = async <T = List>(path: string): Promise<T> => {
    const res = await t.request(`/api/public/v1${path}`, { key: w.a.key });
    assert.equal(res.status, 200, `${path}: ${res.text}`);
    return res.json() as T;
  };
  const ids = async (path: string) => (await get(path)).items.map((i) => i.id);
  const invalid = async (path: string): Promise<string[]> => {
    const res = await t.request(`/api/public/v1${path}`, { key: w.a.key });
    assert.equal(res.status, 400, `${path}: ${res.text}`);
    return ((res.json() as { invalid_params: { name: string }[] }).invalid_params ?? []).map((p) => p.name);
  };

  before(async () => {
    t = await startTestApp();
    w = await seedWorld(t.store.db);
  });
  after(() => t.close());

  describe('instructors', () => {
    it('lists with every field, booleans and arrays in their JSON types', async () => {
      const body = await get('/instructors');
      assert.deepEqual(body.meta, { total: 2, limit: 50, offset: 0 });
      assert.deepEqual(body.items[0], {
        id: 'i1',
        full_name: 'Орлов Сергей A',
        phone: '+79991110001',
        email: 'orlov@example.ru',
        categories: ['B', 'C'],
        is_active: true,
        branch_id: 'br1',
        vehicle_id: 'v1',
        hired_on: '2020-02-03',
        created_at: '2025-12-01T08:00:00Z',
      });
      assert.equal(body.items[1]?.email, null);
      assert.equal(body.items[1]?.hired_on, null);
    });

    it('filters by is_active, and refuses anything but true/false', async () => {
      assert.deepEqual(await ids('/instructors?is_active=true'), ['i1']);
      assert.deepEqual(await ids('/instructors?is_active=false'), ['i2']);
      for (const v of ['1', 'yes', 'TRUE', '']) assert.deepEqual(await invalid(`/instructors?is_active=${v}`), ['is_active']);
    });
  });

  describe('vehicles', () => {
    it('lists with insurance and inspection dates, nulls where unknown', async () => {
      const body = await get('/vehicles');
      assert.deepEqual(body.items[0], {
        id: 'v1',
        plate_number: 'А123ВС77',
        brand: 'Lada',
        model: 'Vesta',
        year: 2022,
        category: 'B',
        transmission: 'manual',
        status: 'active',
        instructor_id: 'i1',
        branch_id: 'br1',
        insurance_policy_number: 'XXX0123456789',
        insurance_valid_from: '2026-01-01',
        insurance_valid_until: '2026-12-31',
        inspection_valid_until: '2027-01-15',
        created_at: '2025-11-01T08:00:00Z',
      });
      const v2 = body.items[1]!;
      for (const f of ['instructor_id', 'branch_id', 'insurance_policy_number', 'insurance_valid_from', 'insurance_valid_until', 'inspection_valid_until']) {
        assert.equal(v2[f], null, f);
      }
    });

    it('pages and refuses filters it does not have', async () => {
      assert.deepEqual(await get('/vehicles?limit=1&offset=1').then((b) => [b.items.map((i) => i.id), b.meta]), [['v2'], { total: 2, limit: 1, offset: 1 }]);
      assert.deepEqual(await invalid('/vehicles?status=active'), ['status']);
    });
  });

  describe('lessons', () => {
    it('orders by starts_at then id, with duration in whole minutes', async () => {
      const body = await get('/lessons');
      assert.deepEqual(
        body.items.map((l) => l.id),
        ['l1', 'l2', 'l3', 'l4', 'l7', 'l5', 'l6'],
      );
      assert.deepEqual(body.items[0], {
        id: 'l1',
        type: 'driving',
        status: 'completed',
        starts_at: '2026-03-01T06:00:00Z',
        ends_at: '2026-03-01T07:30:00Z',
        duration_minutes: 90,
        instructor_id: 'i1',
        student_id: 's1',
        group_id: null,
        vehicle_id: 'v1',
        branch_id: 'br1',
        created_at: '2026-02-20T10:00:00Z',
      });
      assert.equal(body.items[1]?.duration_minutes, 60);
    });

    it('takes a period of local dates, both bounds inclusive', async () => {
      // 23:59 local on 31 March is in March; 00:00 local on 1 April is not.
      assert.deepEqual(await ids('/lessons?period_from=2026-03-01&period_to=2026-03-31'), ['l1', 'l2', 'l3', 'l4', 'l7', 'l5']);
      assert.deepEqual(await ids('/lessons?period_from=2026-04-01'), ['l6']);
      assert.deepEqual(await ids('/lessons?period_to=2026-03-01'), ['l1']);
    });

    it('takes date-times with offsets, inclusive to the second', async () => {
      assert.deepEqual(await ids('/lessons?period_from=2026-03-31T20:59:00Z&period_to=2026-03-31T20:59:00Z'), ['l5']);
      assert.deepEqual(await ids('/lessons?period_from=2026-03-31T23:59:00%2B03:00&period_to=2026-04-01T00:00:00%2B03:00'), ['l5', 'l6']);
      assert.deepEqual(await ids('/lessons?period_from=2026-03-31T20:59:01Z&period_to=2026-03-31T20:59:59Z'), []);
    });

    it('filters by instructor and student', async () => {
      assert.deepEqual(await ids('/lessons?instructor_id=i2'), ['l3', 'l4']);
      assert.deepEqual(await ids('/lessons?student_id=s1&period_from=2026-03-31'), ['l5', 'l6']);
      assert.deepEqual(await ids('/lessons?student_id=s3'), ['l7']);
      assert.deepEqual(await ids('/lessons?student_id=nobody'), []);
    });

    it('refuses malformed, impossible and reversed periods', async () => {
      assert.deepEqual(await invalid('/lessons?period_from=2026-02-30'), ['period_from']);
      assert.deepEqual(await invalid('/lessons?period_to=2026-13-01'), ['period_to']);
      assert.deepEqual(await invalid('/lessons?period_from=01.03.2026'), ['period_from']);
      assert.deepEqual(await invalid('/lessons?period_from=2026-03-01T10:00:00'), ['period_from']);
      assert.deepEqual(await invalid('/lessons?period_from=2026-03-02&period_to=2026-03-01'), ['period_from']);
      assert.deepEqual(await invalid('/lessons?period_from=2026-03-01T10:00:00.99999Z&period_to=2026-03-01T10:00:00.9999Z'), ['period_from']);
      assert.deepEqual(await invalid('/lessons?instructor_id=a%2Fb'), ['instructor_id']);
    });

    it('takes a fraction of a second of any length, rounding a bound inward', async () => {
      // l5 starts at 20:59:00: a bound a tenth of a nanosecond later starts at 20:59:01.
      assert.deepEqual(await ids('/lessons?student_id=s1&period_from=2026-03-31T20:59:00Z'), ['l5', 'l6']);
      assert.deepEqual(await ids('/lessons?student_id=s1&period_from=2026-03-31T20:59:00.0000000001Z'), ['l6']);
    });
  });

  describe('contracts', () => {
    it('lists with price, paid and debt as money strings', async () => {
      const body = await get('/contracts');
      assert.deepEqual(
        body.items.map((c) => [c.id, c.price, c.paid, c.debt, c.currency]),
        [
          ['c1', '50000.00', '18499.50', '31500.50', 'RUB'],
          ['c2', '45000.50', '45000.50', '0.00', 'RUB'],
          ['c3', '10000.00', '0.00', '10000.00', 'RUB'],
        ],
      );
      assert.deepEqual(Object.keys(body.items[0]!).sort(), ['category', 'created_at', 'currency', 'debt', 'id', 'number', 'paid', 'price', 'signed_on', 'status', 'student_id']);
      assert.equal(body.items[0]?.signed_on, '2026-01-10');
    });

    it('filters by student', async () => {
      assert.deepEqual(await ids('/contracts?student_id=s1'), ['c1', 'c3']);
      assert.deepEqual(await ids('/contracts?student_id=s5'), []);
    });
  });

  describe('payments', () => {
    it('orders by paid_at, refunds positive with kind refund', async () => {
      const body = await get('/payments');
      assert.deepEqual(
        body.items.map((p) => p.id),
        ['p5', 'p1', 'p2', 'p3', 'p4'],
      );
      assert.deepEqual(body.items[2], {
        id: 'p2',
        student_id: 's1',
        contract_id: 'c1',
        kind: 'refund',
        method: 'card',
        amount: '1500.50',
        currency: 'RUB',
        paid_at: '2026-03-15T12:00:00Z',
        created_at: '2026-03-15T12:00:05Z',
      });
      assert.equal(body.items[3]?.contract_id, null);
    });

    it('includes a payment at 23:59 local on period_to, and excludes 23:59:59 the day before period_from', async () => {
      assert.deepEqual(await ids('/payments?period_from=2026-03-01&period_to=2026-03-31'), ['p1', 'p2', 'p3']);
      assert.deepEqual(await ids('/payments?period_to=2026-02-28'), ['p5']);
    });
  });

  describe('leads', () => {
    it('lists, filters by status and by created_at period', async () => {
      const body = await get('/leads');
      assert.deepEqual(body.items[1], {
        id: 'ld2',
        full_name: 'Морозова Ольга A',
        phone: '+79992220002',
        email: 'olga@example.ru',
        category: null,
        source: 'referral',
        status: 'converted',
        student_id: 's2',
        created_at: '2026-03-31T20:59:59Z',
      });
      assert.deepEqual(await ids('/leads?status=new'), ['ld1']);
      assert.deepEqual(await ids('/leads?period_to=2026-03-31'), ['ld1', 'ld2']);
      assert.deepEqual(await ids('/leads?status=rejected&period_from=2026-04-01'), ['ld3']);
      assert.deepEqual(await invalid('/leads?status=open'), ['status']);
    });
  });

  describe('finance summary', () => {
    it('sums a month in the school time zone, by method and by category', async () => {
      const body = await get<Record<string, unknown>>('/reports/finance-summary?period_from=2026-03-01&period_to=2026-03-31');
      assert.deepEqual(body, {
        period_from: '2026-03-01',
        period_to: '2026-03-31',
        currency: 'RUB',
        income: '19499.50',
        expense: '32500.25',
        profit: '-13000.75',
        income_by_method: { cash: '1000.00', card: '18499.50', bank_transfer: '0.00', online: '0.00' },
        expense_by_category: {
          salary: '30000.00',
          fuel: '2500.25',
          repair: '0.00',
          rent: '0.00',
          insurance: '0.00',
          marketing: '0.00',
          utilities: '0.00',
          taxes: '0.00',
          other: '0.00',
        },
      });
    });

    it('sums a year, and echoes date-time bounds as sent', async () => {
      const year = await get<Record<string, string>>('/reports/finance-summary?period_from=2026-01-01&period_to=2026-12-31');
      assert.deepEqual([year.income, year.expense, year.profit], ['64800.00', '47500.25', '17299.75']);
      const exact = await get<Record<string, string>>('/reports/finance-summary?period_from=2026-03-31T20:59:00Z&period_to=2026-03-31T21:00:00%2B00:00');
      assert.equal(exact.period_to, '2026-03-31T21:00:00+00:00');
      assert.equal(exact.income, '46000.50');
    });

    it('requires both bounds and takes no paging', async () => {
      assert.deepEqual((await invalid('/reports/finance-summary')).sort(), ['period_from', 'period_to']);
      assert.deepEqual(await invalid('/reports/finance-summary?period_from=2026-01-01'), ['period_to']);
      assert.deepEqual(await invalid('/reports/finance-summary?period_from=2026-01-01&period_to=2026-12-31&limit=5'), ['limit']);
      assert.deepEqual(await invalid('/reports/finance-summary?period_from=2026-12-31&period_to=2026-01-01'), ['period_from']);
    });
  });

  describe('paging edges on every list', () => {
    for (const list of ['/students', '/instructors', '/vehicles', '/lessons', '/contracts', '/payments', '/leads']) {
      it(`${list}: limit 1 and 200 work, 201 and 0 are refused, offset past the end is empty`, async () => {
        const one = await get(`${list}?limit=1`);
        assert.equal(one.items.length, 1);
        assert.equal(one.meta.limit, 1);
        const all = await get(`${list}?limit=200`);
        assert.equal(all.items.length, all.meta.total);
        assert.deepEqual(await invalid(`${list}?limit=201`), ['limit']);
        assert.deepEqual(await invalid(`${list}?limit=0`), ['limit']);
        assert.deepEqual(await get(`${list}?offset=1000000`), { items: [], meta: { total: all.meta.total, limit: 50, offset: 1000000 } });
        assert.deepEqual(await invalid(`${list}?offset=1000001`), ['offset']);
      });
    }
  });
});
