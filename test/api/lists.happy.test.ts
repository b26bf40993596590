/**
 * Lists are answered from the read model (src/resources/items.ts): stored items and
 * positions. These tests hold every answer against the records themselves. After imports
 * that add rows in the middle of every list, move rows (a new created_at, starts_at,
 * paid_at) and move payments to other contracts, every list, filter, period and page
 * (first, last, past the end, deep) must be the page worked out here from the records,
 * and every contract's paid and debt the sums of its payments.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Random } from '../../src/demo/random.js';
import { importData } from '../../src/importer/index.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { DEEP_OFFSET } from '../../src/resources/common/params.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

type Rec = Record<string, unknown> & { id: string };
type Data = Record<string, Rec[]>;

const random = new Random(20261122);
const pad = (n: number) => String(n).padStart(4, '0');
const pick = <T>(values: readonly T[]): T => values[random.int(0, values.length - 1)]!;
/** A time in 2026 on one of few instants, so that many rows tie on it and the order falls to the id. */
const instant = (days: number) => new Date(Date.UTC(2026, 0, 1) + random.int(0, days - 1) * 86_400_000 + pick([0, 9, 15]) * 3_600_000).toISOString().slice(0, 19) + 'Z';
const money = (minor: number) => `${Math.floor(minor / 100)}.${String(minor % 100).padStart(2, '0')}`;

const STATUSES = ['enrolled', 'learning_theory', 'learning_practice', 'graduated'];
const CATEGORIES = ['A', 'B', 'C'];
/** More lessons of one instructor than DEEP_OFFSET, so its filtered list has deep pages. */
const BUSY_LESSONS = DEEP_OFFSET + 120;

/** A payment's student and contract: mostly on a contract, and then the contract's student. */
function payer(students: Rec[], contracts: Rec[]): { student_id: string; contract_id: string | null } {
  if (random.chance(0.2)) return { student_id: pick(students).id, contract_id: null };
  const contract = pick(contracts);
  return { student_id: contract.student_id as string, contract_id: contract.id };
}

function generate(): Data {
  const students = Array.from({ length: 260 }, (_, n): Rec => ({
    id: `s${pad(n)}`, full_name: `Ученик ${n}`, phone: '+79990000000', email: `s${n}@example.ru`,
    category: pick(CATEGORIES), status: pick(STATUSES), group_id: pick(['g1', 'g2']), branch_id: random.chance(0.5) ? 'b1' : null, created_at: instant(60),
  }));
  const instructors = Array.from({ length: 14 }, (_, n): Rec => ({
    id: `i${pad(n)}`, full_name: `Инструктор ${n}`, phone: '+79990000001', email: null, categories: ['B'], is_active: random.chance(0.6),
    branch_id: null, vehicle_id: null, hired_on: null, created_at: instant(5),
  }));
  const vehicles = Array.from({ length: 9 }, (_, n): Rec => ({
    id: `v${pad(n)}`, plate_number: `А${n}ВС77`, brand: 'Lada', model: 'Vesta', year: 2022, category: 'B', transmission: 'manual', status: 'active',
    instructor_id: null, branch_id: null, insurance_policy_number: null, insurance_valid_from: null, insurance_valid_until: null, inspection_valid_until: null,
    created_at: instant(3),
  }));
  const lessons = Array.from({ length: BUSY_LESSONS + 300 }, (_, n): Rec => {
    const starts = instant(200);
    return {
      id: `l${pad(n)}`, type: 'driving', status: 'completed', starts_at: starts, ends_at: starts.replace(/T(\d\d)/, (_m, h: string) => `T${String(Number(h) + 1).padStart(2, '0')}`),
      instructor_id: n < BUSY_LESSONS ? 'i0000' : pick(instructors).id, student_id: random.chance(0.8) ? pick(students).id : null,
      group_id: null, vehicle_id: null, branch_id: null, created_at: '2025-12-01T00:00:00Z',
    };
  });
  const contracts = Array.from({ length: 120 }, (_, n): Rec => ({
    id: `c${pad(n)}`, number: `Д-${n}`, student_id: pick(students).id, category: 'B', status: 'active', signed_on: '2026-01-10', price: money(random.int(1000, 9_000_000)), created_at: instant(30),
  }));
  const payments = Array.from({ length: 400 }, (_, n): Rec => ({
    id: `p${pad(n)}`, ...payer(students, contracts), kind: random.chance(0.1) ? 'refund' : 'payment',
    method: pick(['card', 'cash']), amount: money(random.int(1, 500_000)), paid_at: instant(200), created_at: '2026-01-01T00:00:00Z',
  }));
  const leads = Array.from({ length: 180 }, (_, n): Rec => ({
    id: `d${pad(n)}`, full_name: `Заявка ${n}`, phone: '+79990000002', email: null, category: null, source: 'website', status: pick(['new', 'in_progress', 'converted']),
    student_id: null, created_at: instant(200),
  }));
  return { branches: [{ id: 'b1', name: 'Филиал' }], groups: [{ id: 'g1', name: 'B-1', category: 'B' }, { id: 'g2', name: 'B-2', category: 'B' }], students, instructors, vehicles, lessons, contracts, payments, leads };
}

/** Splits the data into imports: half, then the rest together with changes to records of the first half. */
function batches(data: Data): { imports: Data[]; final: Data } {
  const first: Data = {};
  const second: Data = {};
  const final: Data = {};
  for (const [array, records] of Object.entries(data)) {
    // References point anywhere, so the first import carries what they point at in full.
    const whole = array === 'branches' || array === 'groups' || array === 'students' || array === 'instructors' || array === 'contracts';
    const half = whole ? records.length : Math.floor(records.length / 2);
    first[array] = records.slice(0, half);
    const moved = records.slice(0, half).filter(() => random.chance(0.15)).map((r): Rec => {
      const m = { ...r };
      if ('starts_at' in m) {
        m.starts_at = instant(200);
        m.ends_at = String(m.starts_at).replace(/T(\d\d)/, (_x, h: string) => `T${String(Number(h) + 1).padStart(2, '0')}`);
      } else if ('paid_at' in m) {
        m.paid_at = instant(200);
        Object.assign(m, payer(data.students!, data.contracts!));
      } else if ('created_at' in m && array !== 'contracts') {
        m.created_at = instant(200);
      }
      if ('status' in m && array === 'students') m.status = pick(STATUSES);
      return m;
    });
    second[array] = [...records.slice(half), ...moved];
    const byId = new Map(records.map((r) => [r.id, r]));
    for (const m of moved) byId.set(m.id, m);
    final[array] = [...byId.values()];
  }
  return { imports: [first, second], final };
}

/** The list's records in the contract's order: the order field, then id (byte order, as both engines compare here). */
function ordered(records: Rec[], field: string): Rec[] {
  const key = (r: Rec) => [String(r[field]), r.id] as const;
  return [...records].sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0;
  });
}

interface Case {
  path: string;
  expected: Rec[];
}

/** Pages that test the edges: first, one-row, middle, last, past the end, deep. */
function pagesOf(base: string, expected: Rec[]): Case[] {
  const total = expected.length;
  const sep = base.includes('?') ? '&' : '?';
  const windows: [number, number][] = [[50, 0], [1, 0], [7, 13], [200, 0], [50, Math.max(0, total - 3)], [50, total], [10, total + 25]];
  if (total > DEEP_OFFSET) windows.push([50, DEEP_OFFSET], [30, total - 30]);
  return windows.map(([limit, offset]) => ({ path: `${base}${sep}limit=${limit}&offset=${offset}`, expected: expected.slice(offset, offset + limit) }));
}

describe('lists read from the read model match the records', () => {
  let t: TestApp;
  let key: string;
  let final: Data;

  before(async () => {
    t = await startTestApp({ config: { rateLimitVip: 100_000 } });
    const school = await createSchool(t.store.db, { name: 'Lists', plan: 'VIP', timezone: 'Europe/Moscow' });
    assert.ok(school.ok);
    const split = batches(generate());
    final = split.final;
    for (const file of split.imports) {
      const result = await importData(t.store.db, school.value.id, file);
      assert.ok(result.ok, JSON.stringify(result));
    }
    const created = await createKey(t.store.db, school.value.id, 'lists');
    assert.ok(created.ok);
    key = created.value.key;
  });
  after(async () => {
    await t.close();
  });

  async function check(cases: Case[]): Promise<void> {
    for (const { path, expected } of cases) {
      const res = await t.request(path, { key });
      assert.equal(res.status, 200, `${path}: ${res.text}`);
      const body = res.json() as { items: Rec[]; meta: { total: number; limit: number; offset: number } };
      assert.deepEqual(body.items.map((i) => i.id), expected.map((r) => r.id), path);
      // The meta is written by the database: its numbers must be JSON integers as text too
      // (50, not 50.0), which a client decoding into an integer type needs.
      const { total, limit, offset } = body.meta;
      assert.ok(res.text.endsWith(`"meta":{"total":${total},"limit":${limit},"offset":${offset}}}`), `${path}: ${res.text.slice(-80)}`);
    }
  }

  async function checkTotal(path: string, total: number): Promise<void> {
    const res = await t.request(path, { key });
    assert.equal((res.json() as { meta: { total: number } }).meta.total, total, path);
  }

  it('students: every page, alone and filtered', async () => {
    const all = ordered(final.students!, 'created_at');
    const cases = pagesOf('/api/public/v1/students', all);
    for (const status of STATUSES) cases.push(...pagesOf(`/api/public/v1/students?status=${status}`, all.filter((r) => r.status === status)));
    cases.push(...pagesOf('/api/public/v1/students?status=graduated&category=B', all.filter((r) => r.status === 'graduated' && r.category === 'B')));
    cases.push(...pagesOf('/api/public/v1/students?group_id=g2', all.filter((r) => r.group_id === 'g2')));
    cases.push(...pagesOf('/api/public/v1/students?group_id=nothing', []));
    await check(cases);
    await checkTotal('/api/public/v1/students', all.length);
    await checkTotal('/api/public/v1/students?status=graduated&category=B&offset=5', all.filter((r) => r.status === 'graduated' && r.category === 'B').length);
  });

  it('lessons: periods open and closed, and an instructor with deep pages', async () => {
    const all = ordered(final.lessons!, 'starts_at');
    const inPeriod = (from: string | null, to: string | null) => all.filter((r) => (from === null || String(r.starts_at) >= from) && (to === null || String(r.starts_at) <= to));
    const cases = [
      ...pagesOf('/api/public/v1/lessons', all),
      ...pagesOf('/api/public/v1/lessons?period_from=2026-03-01T09:00:00Z&period_to=2026-05-31T15:00:00Z', inPeriod('2026-03-01T09:00:00Z', '2026-05-31T15:00:00Z')),
      ...pagesOf('/api/public/v1/lessons?period_from=2026-04-10T00:00:00Z', inPeriod('2026-04-10T00:00:00Z', null)),
      ...pagesOf('/api/public/v1/lessons?period_to=2026-02-01T09:00:00Z', inPeriod(null, '2026-02-01T09:00:00Z')),
      ...pagesOf('/api/public/v1/lessons?period_from=2027-01-01T00:00:00Z', []),
      ...pagesOf('/api/public/v1/lessons?period_to=2025-01-01T00:00:00Z', []),
      ...pagesOf('/api/public/v1/lessons?instructor_id=i0000', all.filter((r) => r.instructor_id === 'i0000')),
      ...pagesOf(
        '/api/public/v1/lessons?instructor_id=i0000&period_from=2026-02-01T00:00:00Z',
        all.filter((r) => r.instructor_id === 'i0000' && String(r.starts_at) >= '2026-02-01T00:00:00Z'),
      ),
    ];
    const student = final.students![3]!.id;
    cases.push(...pagesOf(`/api/public/v1/lessons?student_id=${student}`, all.filter((r) => r.student_id === student)));
    await check(cases);
    await checkTotal('/api/public/v1/lessons?period_from=2026-03-01T09:00:00Z&period_to=2026-05-31T15:00:00Z', inPeriod('2026-03-01T09:00:00Z', '2026-05-31T15:00:00Z').length);
  });

  it('payments, leads, instructors, vehicles and contracts: every page', async () => {
    const payments = ordered(final.payments!, 'paid_at');
    const leads = ordered(final.leads!, 'created_at');
    const instructors = ordered(final.instructors!, 'created_at');
    const contracts = ordered(final.contracts!, 'created_at');
    const student = contracts[0]!.student_id as string;
    await check([
      ...pagesOf('/api/public/v1/payments', payments),
      ...pagesOf('/api/public/v1/payments?period_from=2026-06-01T00:00:00Z&period_to=2026-06-30T23:59:59Z', payments.filter((r) => String(r.paid_at) >= '2026-06-01T00:00:00Z' && String(r.paid_at) <= '2026-06-30T23:59:59Z')),
      ...pagesOf('/api/public/v1/leads', leads),
      ...pagesOf('/api/public/v1/leads?status=new&period_from=2026-02-01T00:00:00Z', leads.filter((r) => r.status === 'new' && String(r.created_at) >= '2026-02-01T00:00:00Z')),
      ...pagesOf('/api/public/v1/instructors', instructors),
      ...pagesOf('/api/public/v1/instructors?is_active=false', instructors.filter((r) => r.is_active === false)),
      ...pagesOf('/api/public/v1/vehicles', ordered(final.vehicles!, 'created_at')),
      ...pagesOf('/api/public/v1/contracts', contracts),
      ...pagesOf(`/api/public/v1/contracts?student_id=${student}`, contracts.filter((r) => r.student_id === student)),
    ]);
  });

  it('every contract shows the sum of its payments after payments moved between contracts', async () => {
    const minor = (text: unknown) => Math.round(Number(text) * 100);
    const paid = new Map<string, number>();
    for (const p of final.payments!) {
      if (p.contract_id === null) continue;
      const id = p.contract_id as string;
      paid.set(id, (paid.get(id) ?? 0) + (p.kind === 'refund' ? -minor(p.amount) : minor(p.amount)));
    }
    const res = await t.request('/api/public/v1/contracts?limit=200', { key });
    const items = (res.json() as { items: { id: string; price: string; paid: string; debt: string }[] }).items;
    assert.equal(items.length, final.contracts!.length);
    for (const item of items) {
      const expected = paid.get(item.id) ?? 0;
      assert.equal(minor(item.paid), expected, `${item.id} paid`);
      assert.equal(minor(item.debt), minor(item.price) - expected, `${item.id} debt`);
    }
  });
});
