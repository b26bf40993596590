/**
 * Tenant isolation as a property: generated schools share every id with different
 * contents; random requests with random schools' keys over every route must only ever
 * show the key's own school. Each item returned is checked against the key's school's
 * import file (same id, same values), list totals and the finance totals against its
 * counts and sums, and a student card is 200 exactly when the school has that student.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { checkProperty, fuzzClient } from '../helpers/fuzz.js';
import { importWorld, POOLS, schoolFileArb, type ImportedSchool, type SchoolFile } from '../helpers/fuzz-world.js';

type Resource = 'students' | 'instructors' | 'vehicles' | 'lessons' | 'contracts' | 'payments' | 'leads';

interface ApiRequest {
  path: string;
  resource: Resource | 'card' | 'finance';
  filtered: boolean;
  id?: string;
}

const minor = (money: unknown) => Math.round(Number(money) * 100);
const format = (cents: number) => (cents / 100).toFixed(2);

const limitOffset = fc.record({ limit: fc.option(fc.integer({ min: 1, max: 200 }), { nil: undefined }), offset: fc.option(fc.integer({ min: 0, max: 6 }), { nil: undefined }) });
const period = fc.constantFrom(undefined, '2025-06-01', '2026-01-01', '2026-12-31T23:59:59Z', '2025-01-01T00:00:00+03:00');

function query(params: Record<string, string | number | boolean | undefined>): string {
  const pairs = Object.entries(params).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`);
  return pairs.length ? `?${pairs.join('&')}` : '';
}

const listRequest: fc.Arbitrary<ApiRequest> = fc.oneof(
  fc.record({ page: limitOffset, status: fc.constantFrom(undefined, 'enrolled', 'learning_practice', 'graduated'), category: fc.constantFrom(undefined, 'B', 'A'), group_id: fc.constantFrom(undefined, ...POOLS.groups) })
    .map(({ page, ...f }) => ({ path: `/students${query({ ...page, ...f })}`, resource: 'students' as const, filtered: Object.values(f).some((v) => v !== undefined) })),
  fc.record({ page: limitOffset, is_active: fc.constantFrom(undefined, true, false) }).map(({ page, is_active }) => ({ path: `/instructors${query({ ...page, is_active })}`, resource: 'instructors' as const, filtered: is_active !== undefined })),
  limitOffset.map((page) => ({ path: `/vehicles${query(page)}`, resource: 'vehicles' as const, filtered: false })),
  fc.record({ page: limitOffset, period_from: period, instructor_id: fc.constantFrom(undefined, ...POOLS.instructors), student_id: fc.constantFrom(undefined, ...POOLS.students) })
    .map(({ page, ...f }) => ({ path: `/lessons${query({ ...page, ...f })}`, resource: 'lessons' as const, filtered: Object.values(f).some((v) => v !== undefined) })),
  fc.record({ page: limitOffset, student_id: fc.constantFrom(undefined, ...POOLS.students) }).map(({ page, student_id }) => ({ path: `/contracts${query({ ...page, student_id })}`, resource: 'contracts' as const, filtered: student_id !== undefined })),
  fc.record({ page: limitOffset, period_to: period }).map(({ page, period_to }) => ({ path: `/payments${query({ ...page, period_to })}`, resource: 'payments' as const, filtered: period_to !== undefined })),
  fc.record({ page: limitOffset, status: fc.constantFrom(undefined, 'new', 'converted') }).map(({ page, status }) => ({ path: `/leads${query({ ...page, status })}`, resource: 'leads' as const, filtered: status !== undefined })),
);

const apiRequest: fc.Arbitrary<ApiRequest> = fc.oneof(
  { weight: 7, arbitrary: listRequest },
  { weight: 2, arbitrary: fc.constantFrom(...POOLS.students, 'nobody').map((id) => ({ path: `/students/${id}`, resource: 'card' as const, filtered: false, id })) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(['2000-01-01', '2100-12-31'], ['2026-01-01', '2026-06-30']).map(([from, to]) => ({
      path: `/reports/finance-summary?period_from=${from}&period_to=${to}`,
      resource: 'finance' as const,
      filtered: from !== '2000-01-01',
    })),
  },
);

/** Every field the item shares with the school's own record of that id has the same value. */
function assertOwnRow(own: SchoolFile, resource: Resource, item: Record<string, unknown>, context: string): void {
  const record = own[resource].find((r) => r.id === item.id);
  assert.ok(record, `${context}: ${resource} "${String(item.id)}" is not the key's school's`);
  for (const [field, value] of Object.entries(record)) {
    if (field in item) assert.deepEqual(item[field], value, `${context}: ${resource} ${record.id}.${field}`);
  }
}

function checkAnswer(school: ImportedSchool, req: ApiRequest, status: number, body: unknown): void {
  const own = school.file;
  const context = `${school.id} GET ${req.path}`;
  if (req.resource === 'card') {
    const mine = own.students.some((s) => s.id === req.id);
    assert.equal(status, mine ? 200 : 404, `${context}: the card is ${mine ? '' : 'not '}the school's`);
    if (!mine) return;
    const card = body as Record<string, unknown> & { contracts: { id: string }[]; balance: { price: string } };
    assertOwnRow(own, 'students', card, context);
    const contracts = own.contracts.filter((c) => c.student_id === req.id);
    assert.deepEqual(card.contracts.map((c) => c.id).sort(), contracts.map((c) => c.id).sort(), `${context}: card contracts`);
    assert.equal(card.balance.price, format(contracts.reduce((n, c) => n + minor(c.price), 0)), `${context}: card balance`);
    return;
  }
  assert.equal(status, 200, `${context}: ${JSON.stringify(body).slice(0, 300)}`);
  if (req.resource === 'finance') {
    if (req.filtered) return;
    const income = own.payments.reduce((n, p) => n + (p.kind === 'refund' ? -1 : 1) * minor(p.amount), 0);
    const expense = own.expenses.reduce((n, e) => n + minor(e.amount), 0);
    const summary = body as { income: string; expense: string };
    assert.equal(summary.income, format(income), `${context}: income`);
    assert.equal(summary.expense, format(expense), `${context}: expense`);
    return;
  }
  const page = body as { items: Record<string, unknown>[]; meta: { total: number } };
  for (const item of page.items) assertOwnRow(own, req.resource, item, context);
  if (!req.filtered) assert.equal(page.meta.total, own[req.resource].length, `${context}: total`);
}

describe('tenant isolation under generated data and random requests', () => {
  let t: TestApp;
  let client: ReturnType<typeof fuzzClient>;

  before(async () => {
    t = await startTestApp({ config: { rateLimitProfi: 10_000_000, rateLimitVip: 10_000_000 } });
    client = fuzzClient(t.origin, t.ca);
  });
  after(async () => {
    client.close();
    await t.close();
  });

  it('never shows a row of another school', async (ctx) => {
    const world = fc.array(schoolFileArb, { minLength: 2, maxLength: 4 });
    const requests = fc.array(fc.tuple(fc.nat(), apiRequest), { minLength: 20, maxLength: 50 });
    await checkProperty(
      ctx,
      'tenant isolation',
      6,
      fc.asyncProperty(world, requests, async (files, reqs) => {
        const schools = await importWorld(t.store.db, files);
        for (const [pickSchool, req] of reqs) {
          const school = schools[pickSchool % schools.length]!;
          const res = await client.send({ method: 'GET', path: `/api/public/v1${req.path}`, headers: { authorization: `Bearer ${school.key}` } });
          checkAnswer(school, req, res.status, JSON.parse(res.body) as unknown);
        }
      }),
    );
  });
});
