/**
 * Data that changes: deletions (`deleted`, --replace) validated and applied with the
 * upserts, refused when a kept record still refers to a deleted one, and the change log the
 * changes feed reads (change_seq, tombstones, change batches, data_version): only real
 * changes count, and deleted records vanish from lists, cards, balances and totals.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { importData, type ImportResult } from '../../src/importer/index.js';
import { createKey } from '../../src/management/keys.js';
import { LIST_TABLES } from '../../src/resources/items.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { addSchool, sampleFile, snapshot } from './helpers.js';

type Json = Record<string, unknown>;

function ok(result: ImportResult): asserts result is Extract<ImportResult, { ok: true }> {
  assert.ok(result.ok, JSON.stringify(result.ok ? null : result.errors));
}

describe('importer: deletions and the change log', () => {
  let store: TestStore;
  let t: TestApp;
  before(async () => {
    store = await createTestStore();
    t = await startTestApp({ store });
  });
  after(async () => {
    await t.close();
    await store.close();
  });

  /** Every list's change marks are its rows' (id, seq): one per record, none of a deleted one. */
  const marksMatch = async (school: string) => {
    for (const table of LIST_TABLES) {
      const rows = (await store.db.selectFrom(table).select(['id', 'change_seq']).where('school_id', '=', school).orderBy('id').execute()).map((r): [string, number] => [r.id, Number(r.change_seq)]);
      const marks = (await store.db.selectFrom('list_changes').select(['id', 'change_seq']).where('school_id', '=', school).where('resource', '=', table).orderBy('id').execute()).map(
        (r): [string, number] => [r.id, Number(r.change_seq)],
      );
      assert.deepEqual(marks, rows, `the marks of ${table} are its rows' seqs`);
    }
  };
  const log = async (school: string) => {
    await marksMatch(school);
    return {
    version: Number((await store.db.selectFrom('schools').select('data_version').where('id', '=', school).executeTakeFirstOrThrow()).data_version),
    batches: (await store.db.selectFrom('change_batches').select(['seq', 'committed_at']).where('school_id', '=', school).orderBy('seq').execute()).map((b) => ({ seq: Number(b.seq), at: b.committed_at })),
    tombstones: (await store.db.selectFrom('tombstones').select(['resource', 'id', 'change_seq']).where('school_id', '=', school).orderBy('resource').orderBy('id').execute()).map((r) => [r.resource, r.id, Number(r.change_seq)]),
    };
  };
  /** Each record's change seq by id, checked against its change mark: one per record, none of a deleted one. */
  const seqs = async (school: string, table: 'students' | 'contracts' | 'payments' | 'lessons') => {
    await marksMatch(school);
    return Object.fromEntries((await store.db.selectFrom(table).select(['id', 'change_seq']).where('school_id', '=', school).execute()).map((r) => [r.id, Number(r.change_seq)])) as Record<string, number>;
  };

  it('gives the first import seq 1 on every row and one batch; the same file again changes nothing', async () => {
    const school = await addSchool(store.db);
    const first = await importData(store.db, school, sampleFile());
    ok(first);
    assert.equal(first.seq, 1);
    const before = await log(school);
    assert.equal(before.version, 1);
    assert.deepEqual(before.batches.map((b) => b.seq), [1]);
    assert.match(before.batches[0]!.at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    assert.deepEqual(new Set(Object.values(await seqs(school, 'students'))), new Set([1]));
    const rows = await snapshot(store.db, school);
    const again = await importData(store.db, school, sampleFile());
    ok(again);
    assert.deepEqual([again.changes, again.seq], [0, null]);
    assert.deepEqual(await log(school), before, 'no batch, no new data version');
    assert.deepEqual(await snapshot(store.db, school), rows);
  });

  it('marks only the rows that really changed, and a contract whose balance moved', async () => {
    const school = await addSchool(store.db);
    ok(await importData(store.db, school, sampleFile()));
    const file = sampleFile();
    (file.students![1] as Json).status = 'graduated';
    (file.payments![0] as Json).amount = '21000.00';
    const result = await importData(store.db, school, file);
    ok(result);
    assert.equal(result.seq, 2);
    assert.deepEqual(await seqs(school, 'students'), { 'st-1': 1, 'st-2': 2 });
    assert.deepEqual(await seqs(school, 'payments'), { 'pm-1': 2, 'pm-2': 1, 'pm-3': 1, 'pm-4': 1 });
    assert.deepEqual(await seqs(school, 'contracts'), { 'ct-1': 2, 'ct-2': 1 }, 'ct-1 paid moved with pm-1');
    assert.equal(result.changes, 3);
  });

  it('writes a contract once, with its balance, when its record and its payments change together', async () => {
    const school = await addSchool(store.db);
    const contract = async (id: string) => {
      await marksMatch(school);
      const row = await store.db.selectFrom('contracts').select(['paid_minor', 'item', 'change_seq']).where('school_id', '=', school).where('id', '=', id).executeTakeFirstOrThrow();
      return { paid: Number(row.paid_minor), shown: (JSON.parse(row.item) as Json).paid, seq: Number(row.change_seq) };
    };
    const first = await importData(store.db, school, sampleFile());
    ok(first);
    assert.equal(first.changes, Object.values(first.counts).reduce((a, b) => a + b, 0), 'each record once: ct-1 is not counted again for its balance');
    assert.deepEqual(await contract('ct-1'), { paid: 3450025, shown: '34500.25', seq: 1 });

    // ct-1's record, a payment of it, and a deletion of another, in one file.
    const file = sampleFile();
    (file.contracts![0] as Json).number = 'ДОГ-2025-0001/1';
    (file.payments![0] as Json).amount = '21000.00';
    file.payments = file.payments!.filter((p) => (p as Json).id !== 'pm-2');
    const second = await importData(store.db, school, { ...file, deleted: { payments: ['pm-2'] } });
    ok(second);
    assert.equal(second.changes, 3, 'ct-1 written once, pm-1 written, pm-2 deleted');
    assert.deepEqual(await contract('ct-1'), { paid: 2049975, shown: '20499.75', seq: 2 });

    // --replace: the payments the file leaves out (pm-3, pm-4) are gone from ct-1's balance too.
    (file.contracts![0] as Json).number = 'ДОГ-2025-0001/2';
    const third = await importData(store.db, school, { contracts: file.contracts, payments: [file.payments[0]!] }, { replace: true });
    ok(third);
    assert.equal(third.changes, 3, 'ct-1 written once, pm-3 and pm-4 deleted');
    assert.deepEqual(await contract('ct-1'), { paid: 2100000, shown: '21000.00', seq: 3 });

    // Only a payment changes: the contract's balance moves, and that is its one change.
    const fourth = await importData(store.db, school, { payments: [{ ...(file.payments[0] as Json), amount: '22000.00' }] });
    ok(fourth);
    assert.equal(fourth.changes, 2, 'pm-1, and ct-1 whose balance moved');
    assert.deepEqual(await contract('ct-1'), { paid: 2200000, shown: '22000.00', seq: 4 });

    // Payments before contracts and the deletions last: on PostgreSQL ct-1 is written as the
    // file is read, before the deletion of pm-5 is known, and put right after; one change still.
    const pm5 = { ...(file.payments[0] as Json), id: 'pm-5', amount: '1000.00' };
    ok(await importData(store.db, school, { payments: [pm5] }));
    assert.deepEqual(await contract('ct-1'), { paid: 2300000, shown: '23000.00', seq: 5 });
    const sixth = await importData(store.db, school, {
      payments: [{ ...(file.payments[0] as Json), amount: '23000.00' }],
      contracts: [{ ...(file.contracts![0] as Json), number: 'ДОГ-2025-0001/3' }],
      deleted: { payments: ['pm-5'] },
    });
    ok(sixth);
    assert.equal(sixth.changes, 3, 'pm-1 and ct-1 written, pm-5 deleted');
    assert.deepEqual(await contract('ct-1'), { paid: 2300000, shown: '23000.00', seq: 6 });
  });

  it('deletes the ids of `deleted`, leaves tombstones, and forgets an id it does not have', async () => {
    const school = await addSchool(store.db);
    ok(await importData(store.db, school, sampleFile()));
    const result = await importData(store.db, school, { deleted: { payments: ['pm-2', 'pm-404'], leads: ['ld-2'], expenses: ['ex-1'] } });
    ok(result);
    assert.deepEqual([result.seq, result.deleted.payments, result.deleted.leads, result.deleted.expenses], [2, 1, 1, 1]);
    const data = await snapshot(store.db, school);
    assert.deepEqual((data.payments as { id: string }[]).map((p) => p.id), ['pm-1', 'pm-3', 'pm-4']);
    assert.deepEqual((data.contracts as { id: string; paid_minor: number }[]).map((c) => [c.id, Number(c.paid_minor)]), [['ct-1', 2_000_000 - 50_025], ['ct-2', 0]]);
    assert.deepEqual((await log(school)).tombstones, [['leads', 'ld-2', 2], ['payments', 'pm-2', 2]], 'expenses have no endpoint, no tombstone');
    assert.equal((await seqs(school, 'contracts'))['ct-1'], 2);

    // Replaying the delta is a no-op.
    const replay = await importData(store.db, school, { deleted: { payments: ['pm-2'] } });
    ok(replay);
    assert.deepEqual([replay.changes, replay.seq], [0, null]);

    // Imported again, the record is a row again and its tombstone goes.
    const back = await importData(store.db, school, { payments: [sampleFile().payments![1]!] });
    ok(back);
    assert.deepEqual((await log(school)).tombstones, [['leads', 'ld-2', 2]]);
    assert.equal((await seqs(school, 'payments'))['pm-2'], 3);
  });

  it('removes deleted records from lists, totals, cards, balances and the finance summary', async () => {
    const school = await addSchool(store.db);
    await store.db.updateTable('schools').set({ plan: 'VIP' }).where('id', '=', school).execute();
    ok(await importData(store.db, school, sampleFile()));
    const created = await createKey(store.db, school, 'changes');
    assert.ok(created.ok);
    const key = created.value.key;
    const get = async (path: string) => (await t.request(path, { key })).json() as Json & { items: Json[]; meta: { total: number } };
    const summaryBefore = await get('/api/public/v1/reports/finance-summary?period_from=2025-01-01&period_to=2025-12-31');
    ok(await importData(store.db, school, { deleted: { payments: ['pm-1'], lessons: ['ls-2'] } }));
    const payments = await get('/api/public/v1/payments?period_from=2025-01-01');
    assert.deepEqual(payments.items.map((p) => p.id), ['pm-2', 'pm-3', 'pm-4']);
    assert.equal(payments.meta.total, 3);
    const lessons = await get('/api/public/v1/lessons?period_from=2025-01-01');
    assert.deepEqual(lessons.items.map((l) => l.id), ['ls-1']);
    const contract = (await get('/api/public/v1/contracts')).items.find((c) => c.id === 'ct-1')!;
    assert.deepEqual([contract.paid, contract.debt], ['14500.25', '35499.75']);
    const card = await get('/api/public/v1/students/st-1');
    assert.deepEqual(card.balance, { price: '50000.00', paid: '14500.25', debt: '35499.75', currency: 'RUB' });
    const summary = await get('/api/public/v1/reports/finance-summary?period_from=2025-01-01&period_to=2025-12-31');
    assert.equal(Number(summary.income), Number(summaryBefore.income) - 20000);
    assert.equal((summary.income_by_method as Json).card, '0.00');
  });

  it('refuses to move a contract to another student while stored payments of the old one refer to it', async () => {
    const school = await addSchool(store.db);
    ok(await importData(store.db, school, sampleFile()));
    const before = await snapshot(store.db, school);
    const moved = { ...sampleFile().contracts![0]!, student_id: 'st-2' };
    const refused = await importData(store.db, school, { contracts: [moved] });
    assert.equal(refused.ok, false);
    if (refused.ok) return;
    assert.deepEqual(refused.errors.map((e) => [e.array, e.index, e.field]), [['contracts', 0, 'student_id'], ['contracts', 0, 'student_id'], ['contracts', 0, 'student_id']]);
    assert.equal(refused.errors[0]!.reason, 'moves contract "ct-1" to student "st-2", but payment "pm-1" of student "st-1" still refers to it');
    assert.deepEqual(await snapshot(store.db, school), before, 'nothing written');
    // Moved with its payments, it is accepted.
    const payments = sampleFile().payments!.filter((p) => p.contract_id === 'ct-1').map((p) => ({ ...p, student_id: 'st-2' }));
    ok(await importData(store.db, school, { contracts: [moved], payments }));
  });

  it('refuses to delete a record a kept record refers to, naming both, and writes nothing', async () => {
    const school = await addSchool(store.db);
    ok(await importData(store.db, school, sampleFile()));
    const before = await snapshot(store.db, school);
    const logBefore = await log(school);
    // Stored referrers: st-1 has a contract, payments, lessons and a lead.
    const stored = await importData(store.db, school, { deleted: { payments: ['pm-4'], students: ['st-1'] } });
    assert.equal(stored.ok, false);
    if (stored.ok) return;
    assert.ok(stored.errors.every((e) => e.array === 'deleted.students' && e.index === 0 && e.field === null));
    assert.ok(stored.errors.some((e) => e.reason === '"st-1" is still referred to by payments "pm-1"'), JSON.stringify(stored.errors));
    assert.ok(stored.errors.some((e) => e.reason === '"st-1" is still referred to by contracts "ct-1"'));
    // A referrer in the file itself.
    const inFile = await importData(store.db, school, {
      payments: [{ id: 'pm-9', student_id: 'st-2', kind: 'payment', method: 'cash', amount: '1.00', paid_at: '2025-12-01T10:00:00Z', created_at: '2025-12-01T10:00:00Z' }],
      deleted: { students: ['st-2'], contracts: ['ct-2'] },
    });
    assert.equal(inFile.ok, false);
    if (inFile.ok) return;
    assert.ok(inFile.errors.some((e) => e.array === 'deleted.students' && e.reason === '"st-2" is still referred to by payments "pm-9"'), JSON.stringify(inFile.errors));
    // Imported and deleted at once.
    const both = await importData(store.db, school, { branches: [{ id: 'br-3', name: 'Новый' }], deleted: { branches: ['br-3'] } });
    assert.equal(both.ok, false);
    if (both.ok) return;
    assert.match(both.errors[0]!.reason, /"br-3" is also imported by this file \(branches\[0\]\)/);
    assert.deepEqual(await snapshot(store.db, school), before);
    assert.deepEqual(await log(school), logBefore);
  });

  it('deletes a student with everything that refers to it in one file', async () => {
    const school = await addSchool(store.db);
    ok(await importData(store.db, school, sampleFile()));
    const result = await importData(store.db, school, {
      deleted: { students: ['st-2'], contracts: ['ct-2'], payments: ['pm-4'] },
    });
    ok(result);
    assert.deepEqual((await log(school)).tombstones, [['contracts', 'ct-2', 2], ['payments', 'pm-4', 2], ['students', 'st-2', 2]]);
  });

  it('refuses bad `deleted` entries', async () => {
    const school = await addSchool(store.db);
    const result = await importData(store.db, school, { deleted: { teachers: ['x'], students: 'st-1', payments: ['ok', 7, 'not ok'] } });
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.deepEqual(
      result.errors.map((e) => [e.array, e.index]),
      [['deleted.teachers', null], ['deleted.students', null], ['deleted.payments', 1], ['deleted.payments', 2]],
    );
    const notObject = await importData(store.db, school, { deleted: ['st-1'] });
    assert.equal(notObject.ok, false);
  });

  it('--replace: each array present is the whole truth; others are left alone', async () => {
    const school = await addSchool(store.db);
    ok(await importData(store.db, school, sampleFile()));
    const file = sampleFile();
    // Leads: only ld-1 stays. Lessons: only ls-1. Payments absent from the file: untouched.
    const result = await importData(store.db, school, { leads: [file.leads![0]!], lessons: [file.lessons![0]!] }, { replace: true });
    ok(result);
    assert.deepEqual([result.deleted.leads, result.deleted.lessons, result.deleted.payments], [1, 1, 0]);
    const data = await snapshot(store.db, school);
    assert.deepEqual((data.leads as { id: string }[]).map((l) => l.id), ['ld-1']);
    assert.deepEqual((data.lessons as { id: string }[]).map((l) => l.id), ['ls-1']);
    assert.equal(data.payments.length, 4);
    assert.deepEqual((await log(school)).tombstones, [['leads', 'ld-2', 2], ['lessons', 'ls-2', 2]]);

    // A replace that would delete a record still referred to is refused, naming both.
    const refused = await importData(store.db, school, { students: [file.students![0]!] }, { replace: true });
    assert.equal(refused.ok, false);
    if (refused.ok) return;
    assert.ok(refused.errors.some((e) => e.array === 'students' && e.index === null && /"st-2" is not in the file, so --replace deletes it, but it is still referred to by contracts "ct-2"/.test(e.reason)), JSON.stringify(refused.errors));

    // An empty array is present too: the resource has no records left.
    const emptied = await importData(store.db, school, { leads: [] }, { replace: true });
    ok(emptied);
    assert.deepEqual([emptied.deleted.leads, emptied.deleted.lessons], [1, 0]);
    assert.deepEqual((await snapshot(store.db, school)).leads, []);
    await marksMatch(school);
  });

  it('prunes tombstones older than the retention and remembers the highest seq dropped', async () => {
    const school = await addSchool(store.db);
    ok(await importData(store.db, school, sampleFile()));
    ok(await importData(store.db, school, { deleted: { leads: ['ld-2'] } }));
    // Batch 2 committed long ago.
    await store.db.updateTable('change_batches').set({ committed_at: '2020-01-01T00:00:00Z' }).where('school_id', '=', school).where('seq', '<=', 2).execute();
    ok(await importData(store.db, school, { deleted: { leads: ['ld-1'] } }, { tombstoneDays: 30 }));
    assert.deepEqual((await log(school)).tombstones, [['leads', 'ld-1', 3]]);
    const row = await store.db.selectFrom('schools').select('tombstones_dropped_seq').where('id', '=', school).executeTakeFirstOrThrow();
    assert.equal(Number(row.tombstones_dropped_seq), 2);
  });

  it('keeps every list numbered in its order after deletions and inserts in the middle', async () => {
    const school = await addSchool(store.db);
    const pay = (n: number, day: number) => ({ id: `p-${n}`, student_id: 'st-1', kind: 'payment', method: 'cash', amount: '1.00', paid_at: `2025-12-${String(day).padStart(2, '0')}T10:00:00Z`, created_at: '2025-12-01T10:00:00Z' });
    ok(await importData(store.db, school, { ...sampleFile(), payments: [1, 3, 5, 7, 9].map((d) => pay(d, d)) }));
    ok(await importData(store.db, school, { payments: [pay(4, 4), pay(8, 8)], deleted: { payments: ['p-3'] } }));
    const rows = await store.db.selectFrom('payments').select(['id', 'pos']).where('school_id', '=', school).orderBy('pos').execute();
    assert.deepEqual(rows.map((r) => [r.id, Number(r.pos)]), [['p-1', 0], ['p-4', 1], ['p-5', 2], ['p-7', 3], ['p-8', 4], ['p-9', 5]]);
  });
});
