/**
 * A valid file is written as the API will read it: minor units, UTC timestamps, derived
 * durations and contract balances; importing again upserts to the same state.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { importData } from '../../src/importer/index.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { NOTHING, addSchool, rowCounts, sampleFile, snapshot } from './helpers.js';

describe('importer: valid files', () => {
  let store: TestStore;
  before(async () => {
    store = await createTestStore();
  });
  after(async () => {
    await store.close();
  });

  it('writes every record with stored formats and derived values', async () => {
    const school = await addSchool(store.db);
    const result = await importData(store.db, school, sampleFile());
    assert.ok(result.ok);
    assert.deepEqual(result.counts, { branches: 2, groups: 2, students: 2, instructors: 2, vehicles: 1, contracts: 2, payments: 4, lessons: 2, leads: 2, expenses: 2 });
    assert.equal(result.seq, 1, 'the first import that changes something takes change seq 1');
    const data = await snapshot(store.db, school);

    const [ct1, ct2] = data.contracts as { price_minor: number; paid_minor: number; created_at: string }[];
    assert.equal(ct1!.price_minor, 5_000_000);
    assert.equal(ct1!.paid_minor, 2_000_000 + 1_500_050 - 50_025, 'payments minus refunds');
    assert.equal(ct1!.created_at, '2025-09-01T09:00:00Z', 'offset normalised to UTC');
    assert.equal(ct2!.price_minor, 0);
    assert.equal(ct2!.paid_minor, 0, 'pm-4 has no contract');

    const payments = data.payments as { id: string; amount_minor: number; paid_at: string; contract_id: string | null }[];
    assert.deepEqual(
      payments.map((p) => [p.id, p.amount_minor, p.paid_at, p.contract_id]),
      [
        ['pm-1', 2_000_000, '2025-10-01T07:00:00Z', 'ct-1'],
        ['pm-2', 1_500_050, '2025-11-01T10:00:00Z', 'ct-1'],
        ['pm-3', 50_025, '2025-11-02T10:00:00Z', 'ct-1'],
        ['pm-4', 250_000, '2025-11-03T10:00:00Z', null],
      ],
    );

    const lessons = data.lessons as { id: string; starts_at: string; ends_at: string; duration_minutes: number; student_id: string | null }[];
    assert.deepEqual(
      lessons.map((l) => [l.id, l.starts_at, l.ends_at, l.duration_minutes, l.student_id]),
      [
        ['ls-1', '2025-10-01T06:00:00Z', '2025-10-01T07:30:00Z', 90, 'st-1'],
        ['ls-2', '2025-10-02T15:00:00Z', '2025-10-02T15:45:59Z', 45, null],
      ],
    );

    // The longest lesson a file may hold, on either store (its duration is a 32-bit integer).
    const longest = sampleFile();
    (longest.lessons![0] as Record<string, unknown>).ends_at = '6108-10-24T08:07:59Z';
    const long = await importData(store.db, await addSchool(store.db), longest);
    assert.ok(long.ok, JSON.stringify(long));

    const [in1, in2] = data.instructors as { categories: string; is_active: number; email: string | null; branch_id: string | null; hired_on: string | null }[];
    assert.deepEqual(JSON.parse(in1!.categories), ['B', 'C']);
    assert.equal(in1!.is_active, 1);
    assert.equal(in2!.is_active, 0);
    assert.deepEqual([in2!.email, in2!.branch_id, in2!.hired_on], [null, null, null], 'left-out nullable fields are stored as null');

    const st2 = (data.students as { id: string; birth_date: string | null; instructor_id: string | null; transmission: string | null }[])[1]!;
    assert.deepEqual([st2.birth_date, st2.instructor_id, st2.transmission], [null, null, null]);

    const expenses = data.expenses as { amount_minor: number; comment: string | null; spent_at: string }[];
    assert.deepEqual(
      expenses.map((e) => [e.amount_minor, e.comment, e.spent_at]),
      [
        [9_000_000, 'Аренда, октябрь', '2025-10-01T07:00:00Z'],
        [1_234_567, null, '2025-10-15T10:00:00Z'],
      ],
    );
  });

  it('is idempotent: the same file twice changes nothing the second time', async () => {
    const school = await addSchool(store.db);
    const first = await importData(store.db, school, sampleFile());
    const once = await snapshot(store.db, school);
    const second = await importData(store.db, school, sampleFile());
    assert.ok(first.ok && second.ok);
    assert.deepEqual(second.counts, first.counts);
    assert.deepEqual([second.changes, second.seq], [0, null]);
    assert.deepEqual(await snapshot(store.db, school), once);
  });

  it('upserts: a changed record overwrites every column, and balances follow moved payments', async () => {
    const school = await addSchool(store.db);
    assert.equal((await importData(store.db, school, sampleFile())).ok, true);
    const changed = sampleFile();
    changed.students![1] = { ...changed.students![1]!, full_name: 'Петрова-Смирнова Анна Сергеевна', branch_id: 'br-2', transmission: 'automatic' };
    // pm-4 now pays st-2's contract ct-2.
    changed.payments![3] = { ...changed.payments![3]!, contract_id: 'ct-2' };
    assert.equal((await importData(store.db, school, changed)).ok, true);
    const data = await snapshot(store.db, school);
    const st2 = (data.students as { full_name: string; branch_id: string | null; transmission: string | null }[])[1]!;
    assert.deepEqual([st2.full_name, st2.branch_id, st2.transmission], ['Петрова-Смирнова Анна Сергеевна', 'br-2', 'automatic']);
    assert.deepEqual(
      (data.contracts as { id: string; paid_minor: number }[]).map((c) => [c.id, c.paid_minor]),
      [
        ['ct-1', 3_450_025],
        ['ct-2', 250_000],
      ],
    );
  });

  it('moves the balances of contracts past one batch of them, every one counted once', async () => {
    const school = await addSchool(store.db);
    const base = sampleFile();
    const n = 1201;
    const contracts = Array.from({ length: n }, (_, i) => ({ ...base.contracts![0]!, id: `ctx-${String(i).padStart(4, '0')}`, number: `X-${i}` }));
    const payments = contracts.map((c, i) => ({ ...base.payments![0]!, id: `pmx-${i}`, contract_id: c.id, student_id: c.student_id, amount: '100.00' }));
    const first = await importData(store.db, school, { ...base, contracts, payments, lessons: [] });
    assert.ok(first.ok, JSON.stringify(first).slice(0, 500));
    const result = await importData(store.db, school, { payments: [] }, { replace: true });
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.changes, 2 * n, 'each payment deleted and each balance moved, once');
    const rows = await store.db.selectFrom('contracts').select(['paid_minor', 'item']).where('school_id', '=', school).execute();
    assert.equal(rows.length, n);
    assert.deepEqual([...new Set(rows.map((r) => Number(r.paid_minor)))], [0]);
    assert.ok(rows.every((r) => (JSON.parse(String(r.item)) as { paid: string }).paid === '0.00'));
  });

  it('accepts references to rows stored by an earlier import', async () => {
    const school = await addSchool(store.db);
    assert.equal((await importData(store.db, school, sampleFile())).ok, true);
    const later = {
      payments: [{ id: 'pm-5', student_id: 'st-1', contract_id: 'ct-1', kind: 'payment', method: 'card', amount: '1000.00', currency: 'RUB', paid_at: '2025-12-01T10:00:00Z', created_at: '2025-12-01T10:00:00Z' }],
      lessons: [{ id: 'ls-3', type: 'autodrome', status: 'planned', starts_at: '2025-12-02T09:00:00Z', ends_at: '2025-12-02T10:00:00Z', instructor_id: 'in-1', student_id: 'st-2', group_id: 'gr-2', vehicle_id: 'veh-1', branch_id: 'br-2', created_at: '2025-12-01T10:00:00Z' }],
      leads: [{ id: 'ld-3', full_name: 'Петрова Анна Сергеевна', phone: '+79267654321', source: 'referral', status: 'converted', student_id: 'st-2', created_at: '2025-08-30T10:00:00Z' }],
    };
    const result = await importData(store.db, school, later);
    assert.ok(result.ok);
    assert.deepEqual(result.counts, { ...NOTHING, payments: 1, lessons: 1, leads: 1 });
    const contracts = (await snapshot(store.db, school)).contracts as { id: string; paid_minor: number }[];
    assert.equal(contracts.find((c) => c.id === 'ct-1')!.paid_minor, 3_450_025 + 100_000, 'balance recomputed over stored and new payments');
  });

  it('keeps balances right when two imports into one school run at once', async () => {
    const school = await addSchool(store.db);
    assert.equal((await importData(store.db, school, sampleFile())).ok, true);
    const pay = (id: string, amount: string) => ({ id, student_id: 'st-2', contract_id: 'ct-2', kind: 'payment', method: 'cash', amount, currency: 'RUB', paid_at: '2025-12-01T10:00:00Z', created_at: '2025-12-01T10:00:00Z' });
    const files = Array.from({ length: 4 }, (_, i) => ({ payments: Array.from({ length: 50 }, (_, j) => pay(`pm-c${i}-${j}`, '1.00')) }));
    const results = await Promise.all(files.map((file) => importData(store.db, school, file)));
    assert.ok(results.every((r) => r.ok));
    const contracts = (await snapshot(store.db, school)).contracts as { id: string; paid_minor: number }[];
    assert.equal(contracts.find((c) => c.id === 'ct-2')!.paid_minor, 4 * 50 * 100);
  });

  it('imports the example of docs/import-format.md with the results it states', async () => {
    const doc = fs.readFileSync(new URL('../../docs/import-format.md', import.meta.url), 'utf8');
    const example = /## Example\s+```json\n([\s\S]*?)\n```/.exec(doc);
    assert.ok(example, 'the example block is there');
    const school = await addSchool(store.db);
    const result = await importData(store.db, school, JSON.parse(example[1]!));
    assert.ok(result.ok, JSON.stringify(result));
    const data = await snapshot(store.db, school);
    assert.deepEqual((data.contracts as { price_minor: number; paid_minor: number }[]).map((c) => [c.price_minor, c.paid_minor]), [[5_000_000, 2_500_000]]);
    assert.deepEqual((data.lessons as { duration_minutes: number; starts_at: string }[]).map((l) => [l.duration_minutes, l.starts_at]), [[90, '2025-10-01T06:00:00Z']]);
  });

  it('imports an empty file as nothing', async () => {
    const school = await addSchool(store.db);
    assert.deepEqual(await importData(store.db, school, {}), { ok: true, counts: NOTHING, deleted: NOTHING, changes: 0, seq: null });
    assert.deepEqual(await rowCounts(store.db, school), NOTHING);
  });

  it("takes the school's currency for money records that leave currency out", async () => {
    const school = await addSchool(store.db, { currency: 'KZT' });
    const file = sampleFile() as unknown as Record<string, Record<string, unknown>[]>;
    for (const array of ['contracts', 'payments', 'expenses']) for (const record of file[array] ?? []) delete record.currency;
    const result = await importData(store.db, school, file);
    assert.ok(result.ok, JSON.stringify(result));
    for (const table of ['contracts', 'payments', 'expenses'] as const) {
      const currencies = await store.db.selectFrom(table).select('currency').distinct().where('school_id', '=', school).execute();
      assert.deepEqual(currencies, [{ currency: 'KZT' }], table);
    }
  });
});
