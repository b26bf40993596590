/**
 * The finance summary reads whole UTC months from the month totals the importer keeps, whole
 * UTC days around them from the day totals, and only the partial days at its edges from the
 * rows (src/resources/finance/repository.ts). Held here against the records themselves:
 * whole months and many random periods (dates and date-times, one day, a few hours, a year)
 * in time zones with a half-hour offset, with daylight saving and UTC, after imports that
 * move payments to other days and methods, turn payments into refunds and delete every
 * payment of one month, every total must be the sum worked out from the records.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Random } from '../../src/demo/random.js';
import { EXPENSE_CATEGORIES, PAYMENT_METHODS } from '../../src/domain/enums.js';
import { importData } from '../../src/importer/index.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { resolvePeriod } from '../../src/resources/common/period.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

type Rec = Record<string, unknown> & { id: string };

const random = new Random(20261123);
const pick = <T>(values: readonly T[]): T => values[random.int(0, values.length - 1)]!;
const DAY = 86_400_000;
const START = Date.UTC(2026, 0, 1);
/** Instants over 80 days, a few of them right at or around UTC midnight. */
const instant = () => {
  const day = START + random.int(0, 79) * DAY;
  const within = random.chance(0.2) ? pick([0, 1000, DAY - 1000]) : random.int(0, 86_399) * 1000;
  return new Date(day + within).toISOString().slice(0, 19) + 'Z';
};
const money = (minor: number) => `${Math.floor(minor / 100)}.${String(minor % 100).padStart(2, '0')}`;
const minor = (text: unknown) => Math.round(Number(text) * 100);

/** One student and group for the payments to belong to. */
const BASE = { branches: [], groups: [{ id: 'g1', name: 'G', category: 'B' }], students: [{ id: 's1', full_name: 'Студент', phone: '+79990000000', email: 's@example.ru', category: 'B', status: 'enrolled', group_id: 'g1', branch_id: null, created_at: '2025-12-01T00:00:00Z' }] };

function generate(): { payments: Rec[]; expenses: Rec[] } {
  const payments = Array.from({ length: 600 }, (_, n): Rec => ({
    id: `p${n}`, student_id: 's1', contract_id: null, kind: random.chance(0.15) ? 'refund' : 'payment', method: pick(PAYMENT_METHODS),
    amount: money(random.int(1, 2_000_000)), paid_at: instant(), created_at: '2026-01-01T00:00:00Z',
  }));
  const expenses = Array.from({ length: 200 }, (_, n): Rec => ({
    id: `e${n}`, category: pick(EXPENSE_CATEGORIES), amount: money(random.int(1, 900_000)), spent_at: instant(), comment: null,
  }));
  return { payments, expenses };
}

/** Moves some records to other days, methods and kinds: what a second import of corrected data does. */
function changed(records: Rec[]): Rec[] {
  return records.filter(() => random.chance(0.3)).map((r) => {
    const m: Rec = { ...r };
    if ('paid_at' in m) {
      m.paid_at = instant();
      if (random.chance(0.5)) m.method = pick(PAYMENT_METHODS);
      if (random.chance(0.3)) m.kind = m.kind === 'refund' ? 'payment' : 'refund';
    } else {
      m.spent_at = instant();
      if (random.chance(0.5)) m.category = pick(EXPENSE_CATEGORIES);
    }
    if (random.chance(0.3)) m.amount = money(random.int(1, 2_000_000));
    return m;
  });
}

/** A random period as the API takes it: dates, date-times with an offset, or one of each. */
function period(): { from: string; to: string } {
  const a = START - 3 * DAY + random.int(0, 85) * DAY + random.int(0, 86_399) * 1000;
  const b = a + pick([0, 3_600_000, DAY / 2, DAY, 2 * DAY, 10 * DAY, 45 * DAY, 400 * DAY]) + random.int(0, 86_399) * 1000;
  const date = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  const dateTime = (ms: number) => {
    const offset = pick(['Z', '+03:00', '-05:00', '+05:30']);
    if (offset === 'Z') return new Date(ms).toISOString().slice(0, 19) + 'Z';
    const sign = offset[0] === '+' ? 1 : -1;
    const [h, m] = offset.slice(1).split(':').map(Number);
    return new Date(ms + sign * (h! * 60 + m!) * 60_000).toISOString().slice(0, 19) + offset;
  };
  const kind = random.int(0, 2);
  if (kind === 0) return { from: date(a), to: date(b) };
  if (kind === 1) return { from: dateTime(a), to: dateTime(b) };
  return { from: date(a), to: dateTime(b) };
}

describe('the finance summary from day totals', () => {
  let t: TestApp;
  const schools: { key: string; timezone: string; final: { payments: Rec[]; expenses: Rec[] } }[] = [];

  before(async () => {
    t = await startTestApp({ config: { rateLimitVip: 100_000 } });
    for (const timezone of ['Asia/Kolkata', 'America/New_York', 'Europe/Moscow', 'UTC']) {
      const school = await createSchool(t.store.db, { name: `Finance ${timezone}`, plan: 'VIP', timezone });
      assert.ok(school.ok);
      const first = generate();
      const one = await importData(t.store.db, school.value.id, { ...BASE, ...first });
      assert.ok(one.ok, JSON.stringify(one));
      const second = { payments: changed(first.payments), expenses: changed(first.expenses) };
      const two = await importData(t.store.db, school.value.id, second);
      assert.ok(two.ok, JSON.stringify(two));
      const merge = (a: Rec[], b: Rec[]) => [...new Map([...a, ...b].map((r) => [r.id, r])).values()];
      const final = { payments: merge(first.payments, second.payments), expenses: merge(first.expenses, second.expenses) };
      // Every payment of February (UTC) deleted: its month total must go with them.
      const february = (r: Rec) => String(r.paid_at).startsWith('2026-02');
      const three = await importData(t.store.db, school.value.id, { deleted: { payments: final.payments.filter(february).map((r) => r.id) } });
      assert.ok(three.ok, JSON.stringify(three));
      final.payments = final.payments.filter((r) => !february(r));
      const key = await createKey(t.store.db, school.value.id, 'finance');
      assert.ok(key.ok);
      schools.push({ key: key.value.key, timezone, final });
    }
  });
  after(() => t.close());

  it('equals the sums of the records for whole months and 120 random periods in each time zone', async () => {
    // Whole months alone, with whole days around them, and with days and edges on both sides.
    const fixed = [
      { from: '2026-02-01', to: '2026-02-28' },
      { from: '2026-01-01', to: '2026-03-31' },
      { from: '2026-01-15', to: '2026-03-10' },
      { from: '2025-12-31', to: '2026-02-01' },
      { from: '2026-02-01T00:00:00Z', to: '2026-03-01T00:00:00Z' },
      { from: '2026-01-31T12:00:00Z', to: '2026-03-02T12:00:00Z' },
    ];
    for (const school of schools) {
      for (let n = 0; n < 120 + fixed.length; n++) {
        const p = fixed[n] ?? period();
        const path = `/api/public/v1/reports/finance-summary?period_from=${encodeURIComponent(p.from)}&period_to=${encodeURIComponent(p.to)}`;
        const res = await t.request(path, { key: school.key });
        if (res.status === 400) continue; // period_from after period_to, once offsets are applied
        assert.equal(res.status, 200, `${path}: ${res.text}`);
        const body = res.json() as { income: string; expense: string; profit: string; income_by_method: Record<string, string>; expense_by_category: Record<string, string> };

        const range = resolvePeriod(p.from, p.to, school.timezone);
        const within = (at: unknown) => String(at) >= range.from! && (range.until === null || String(at) < range.until);
        const byMethod = Object.fromEntries(PAYMENT_METHODS.map((m) => [m, 0]));
        for (const pay of school.final.payments) if (within(pay.paid_at)) byMethod[pay.method as string]! += pay.kind === 'refund' ? -minor(pay.amount) : minor(pay.amount);
        const byCategory = Object.fromEntries(EXPENSE_CATEGORIES.map((c) => [c, 0]));
        for (const e of school.final.expenses) if (within(e.spent_at)) byCategory[e.category as string]! += minor(e.amount);

        const where = `${school.timezone} ${p.from} .. ${p.to}`;
        assert.deepEqual(Object.fromEntries(Object.entries(body.income_by_method).map(([k, v]) => [k, minor(v)])), byMethod, `${where}: income by method`);
        assert.deepEqual(Object.fromEntries(Object.entries(body.expense_by_category).map(([k, v]) => [k, minor(v)])), byCategory, `${where}: expense by category`);
        const income = Object.values(byMethod).reduce((a, b) => a + b, 0);
        const expense = Object.values(byCategory).reduce((a, b) => a + b, 0);
        assert.equal(minor(body.income), income, where);
        assert.equal(minor(body.expense), expense, where);
        assert.equal(minor(body.profit), income - expense, where);
      }
    }
  });

  it('reads a period ending in the year 9999 as open at its end, not as empty', async () => {
    for (const school of schools) {
      const summary = async (to: string) => (await t.request(`/api/public/v1/reports/finance-summary?period_from=0000-01-01&period_to=${to}`, { key: school.key })).json() as { income: string };
      const all = await summary('9999-12-30');
      assert.notEqual(all.income, '0.00');
      assert.equal((await summary('9999-12-31')).income, all.income, school.timezone);
      assert.equal((await summary(encodeURIComponent('9999-12-31T23:59:59Z'))).income, all.income, school.timezone);
    }
  });
});

describe('a local day whose midnight the clocks skip', () => {
  let t: TestApp;
  let key: string;

  before(async () => {
    t = await startTestApp();
    // Havana's clocks went from 2026-03-08 00:00 straight to 01:00 (05:00Z): the two payments
    // are on the evening of 03-07, local time, and the third in the first minute of 03-08.
    const school = await createSchool(t.store.db, { name: 'Havana', plan: 'VIP', timezone: 'America/Havana' });
    assert.ok(school.ok);
    const payment = (id: string, paid_at: string, amount: string) => ({ id, student_id: 's1', contract_id: null, kind: 'payment', method: 'cash', amount, paid_at, created_at: paid_at });
    const imported = await importData(t.store.db, school.value.id, {
      ...BASE,
      payments: [payment('p1', '2026-03-08T04:30:00Z', '10.00'), payment('p2', '2026-03-08T04:59:59Z', '20.00'), payment('p3', '2026-03-08T05:00:00Z', '40.00'), payment('p4', '9999-12-31T23:59:59Z', '80.00')],
    });
    assert.ok(imported.ok, JSON.stringify(imported));
    const created = await createKey(t.store.db, school.value.id, 'havana');
    assert.ok(created.ok);
    key = created.value.key;
  });
  after(() => t.close());

  it('puts the evening before the jump in the day before, in lists and in the summary', async () => {
    const ids = async (day: string) => ((await t.request(`/api/public/v1/payments?period_from=${day}&period_to=${day}`, { key })).json() as { items: Rec[] }).items.map((p) => p.id).sort();
    const income = async (day: string) => ((await t.request(`/api/public/v1/reports/finance-summary?period_from=${day}&period_to=${day}`, { key })).json() as { income: string }).income;
    assert.deepEqual(await ids('2026-03-07'), ['p1', 'p2']);
    assert.deepEqual(await ids('2026-03-08'), ['p3']);
    assert.equal(await income('2026-03-07'), '30.00');
    assert.equal(await income('2026-03-08'), '40.00');
  });

  it('reaches the last second of the year 9999 when the period ends on its last day', async () => {
    const res = await t.request('/api/public/v1/reports/finance-summary?period_from=2026-03-07&period_to=9999-12-31', { key });
    assert.equal((res.json() as { income: string }).income, '150.00');
    const list = await t.request('/api/public/v1/payments?period_from=9999-12-31', { key });
    assert.deepEqual((list.json() as { items: Rec[] }).items.map((p) => p.id), ['p4']);
  });

  it('finds nothing in a period that starts after the year 9999, and everything in one that starts before the year 0', async () => {
    const after = encodeURIComponent('9999-12-31T23:59:59-00:01');
    const list = (await t.request(`/api/public/v1/payments?period_from=${after}`, { key })).json() as { items: Rec[]; meta: { total: number } };
    assert.deepEqual([list.items, list.meta.total], [[], 0]);
    const summary = await t.request(`/api/public/v1/reports/finance-summary?period_from=${after}&period_to=${after}`, { key });
    assert.equal(summary.status, 200, summary.text);
    assert.equal((summary.json() as { income: string }).income, '0.00');
    const before = encodeURIComponent('0000-01-01T00:00:00+00:01');
    const all = (await t.request(`/api/public/v1/payments?period_from=${before}`, { key })).json() as { meta: { total: number } };
    assert.equal(all.meta.total, 4);
    const everything = await t.request(`/api/public/v1/reports/finance-summary?period_from=${before}&period_to=9999-12-31`, { key });
    assert.equal((everything.json() as { income: string }).income, '150.00');
  });
});

describe('money at the bound of an exact total', () => {
  let t: TestApp;
  let key: string;
  let school: string;
  const MOST = '9999999999999.99';
  const payment = (n: number, kind = 'payment') => ({ id: `p${n}`, student_id: 's1', contract_id: 'c1', kind, method: 'cash', amount: MOST, paid_at: `2026-03-${String(n).padStart(2, '0')}T12:00:00Z`, created_at: '2026-03-01T00:00:00Z' });
  const expense = (n: number) => ({ id: `e${n}`, category: 'rent', amount: MOST, spent_at: `2026-03-${String(n).padStart(2, '0')}T12:00:00Z`, comment: null });
  const contract = (n: number) => ({ id: `c${n}`, number: `N-${n}`, student_id: 's1', category: 'B', status: 'active', signed_on: '2026-01-10', price: MOST, created_at: '2026-01-10T10:00:00Z' });

  before(async () => {
    t = await startTestApp();
    const created = await createSchool(t.store.db, { name: 'Big money', plan: 'VIP' });
    assert.ok(created.ok);
    school = created.value.id;
    const imported = await importData(t.store.db, school, {
      ...BASE,
      contracts: Array.from({ length: 9 }, (_, i) => contract(i + 1)),
      payments: [...Array.from({ length: 8 }, (_, i) => payment(i + 1)), payment(9, 'refund')],
      expenses: Array.from({ length: 9 }, (_, i) => expense(i + 1)),
    });
    assert.ok(imported.ok, JSON.stringify(imported));
    const k = await createKey(t.store.db, school, 'big');
    assert.ok(k.ok);
    key = k.value.key;
  });
  after(() => t.close());

  it('shows every sum up to the bound exact to the kopeck', async () => {
    const summary = (await t.request('/api/public/v1/reports/finance-summary?period_from=2026-03-01&period_to=2026-03-31', { key })).json() as Record<string, string>;
    assert.deepEqual([summary.income, summary.expense, summary.profit], ['69999999999999.93', '89999999999999.91', '-19999999999999.98']);
    const card = (await t.request('/api/public/v1/students/s1', { key })).json() as { balance: Record<string, string> };
    assert.deepEqual(card.balance, { price: '89999999999999.91', paid: '69999999999999.93', debt: '19999999999999.98', currency: 'RUB' });
    const c1 = ((await t.request('/api/public/v1/contracts?limit=1', { key })).json() as { items: Record<string, string>[] }).items[0]!;
    assert.deepEqual([c1.id, c1.paid, c1.debt], ['c1', '69999999999999.93', '-59999999999999.94']);
  });

  it('shows a debt and a profit past 2^53 kopecks exact: each is the difference of two sums within the bound', async () => {
    const other = await createSchool(t.store.db, { name: 'Refunds', plan: 'VIP' });
    assert.ok(other.ok);
    const refunds = [...Array.from({ length: 9 }, (_, i) => payment(i + 1, 'refund')), { ...payment(10, 'refund'), amount: '0.01' }];
    const imported = await importData(t.store.db, other.value.id, {
      ...BASE,
      contracts: Array.from({ length: 9 }, (_, i) => contract(i + 1)),
      payments: refunds,
      expenses: Array.from({ length: 9 }, (_, i) => expense(i + 1)),
    });
    assert.ok(imported.ok, JSON.stringify(imported));
    const k = await createKey(t.store.db, other.value.id, 'refunds');
    assert.ok(k.ok);
    const get = async (path: string) => (await t.request(path, { key: k.value.key })).json() as Record<string, unknown>;
    const summary = await get('/api/public/v1/reports/finance-summary?period_from=2026-03-01&period_to=2026-03-31');
    assert.deepEqual([summary.income, summary.expense, summary.profit], ['-89999999999999.92', '89999999999999.91', '-179999999999999.83']);
    const card = (await get('/api/public/v1/students/s1')) as { balance: Record<string, string>; contracts: Record<string, string>[] };
    assert.deepEqual(card.balance, { price: '89999999999999.91', paid: '-89999999999999.92', debt: '179999999999999.83', currency: 'RUB' });
    assert.deepEqual([card.contracts[0]!.id, card.contracts[0]!.debt], ['c1', '99999999999999.91']);
    const c1 = ((await get('/api/public/v1/contracts?limit=1')) as { items: Record<string, string>[] }).items[0]!;
    assert.deepEqual([c1.id, c1.paid, c1.debt], ['c1', '-89999999999999.92', '99999999999999.91']);
  });

  it('refuses an import that would take a total past the bound, naming it, and writes nothing', async () => {
    for (const [array, file] of [['payments', { payments: [payment(10)] }], ['expenses', { expenses: [expense(10)] }], ['contracts', { contracts: [contract(10)] }]] as const) {
      const result = await importData(t.store.db, school, file);
      assert.equal(result.ok, false, array);
      if (result.ok) continue;
      assert.deepEqual(result.errors.map((e) => [e.array, e.index, e.field]), [[array, null, array === 'contracts' ? 'price' : 'amount']]);
      assert.match(result.errors[0]!.reason, /to more than 90071992547409\.91 in all, the most a total of money can hold exactly/);
    }
    const summary = (await t.request('/api/public/v1/reports/finance-summary?period_from=2026-03-01&period_to=2026-03-31', { key })).json() as Record<string, string>;
    assert.deepEqual([summary.income, summary.expense], ['69999999999999.93', '89999999999999.91'], 'nothing written');
    // The same payment along with a change that keeps the total within the bound is taken.
    const within = await importData(t.store.db, school, { payments: [{ ...payment(1), amount: '1.00' }, payment(10)] });
    assert.ok(within.ok, JSON.stringify(within));
  });

  it('refuses, as past the bound, payments whose sum on one contract would pass the stores\' integers (2^63), before or after their contract', async () => {
    const other = await createSchool(t.store.db, { name: 'Overflow', plan: 'VIP' });
    assert.ok(other.ok);
    // 9,300 of the largest amount: 9.3e18 kopecks on c1, past 2^63 (9.22e18).
    const payments = Array.from({ length: 9300 }, (_, i) => ({ ...payment(1), id: `px${i}` }));
    for (const file of [{ ...BASE, contracts: [contract(1)], payments }, { ...BASE, payments, contracts: [contract(1)] }]) {
      const result = await importData(t.store.db, other.value.id, file);
      assert.equal(result.ok, false);
      if (result.ok) continue;
      assert.deepEqual(result.errors.map((e) => [e.array, e.index, e.field]), [['payments', null, 'amount']], JSON.stringify(result.errors));
      assert.match(result.errors[0]!.reason, /would bring the school's payments and refunds to more than 90071992547409\.91 in all/);
    }
    assert.equal((await t.store.db.selectFrom('payments').select('id').where('school_id', '=', other.value.id).execute()).length, 0, 'nothing written');
  });
});
