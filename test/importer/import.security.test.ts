/**
 * Tenant isolation in the importer: ids are per school, so another school's rows neither
 * satisfy a reference nor get overwritten by a file that reuses their ids.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { importData } from '../../src/importer/index.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { NOTHING, addSchool, rowCounts, sampleFile, snapshot } from './helpers.js';

describe('importer: schools are isolated', () => {
  let store: TestStore;
  before(async () => {
    store = await createTestStore();
  });
  after(async () => {
    await store.close();
  });

  it("does not accept another school's rows as references", async () => {
    const owner = await addSchool(store.db);
    const other = await addSchool(store.db);
    assert.equal((await importData(store.db, owner, sampleFile())).ok, true);
    const file = {
      payments: [{ id: 'pm-9', student_id: 'st-1', contract_id: 'ct-1', kind: 'payment', method: 'cash', amount: '100.00', currency: 'RUB', paid_at: '2025-12-01T10:00:00Z', created_at: '2025-12-01T10:00:00Z' }],
      lessons: [{ id: 'ls-9', type: 'driving', status: 'planned', starts_at: '2025-12-02T09:00:00Z', ends_at: '2025-12-02T10:30:00Z', instructor_id: 'in-1', created_at: '2025-12-01T10:00:00Z' }],
    };
    const result = await importData(store.db, other, file);
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.deepEqual(
      result.errors.map((e) => `${e.array}[${e.index}].${e.field}`),
      ['payments[0].student_id', 'payments[0].contract_id', 'lessons[0].instructor_id'],
    );
    // The reason names only the id the file gave, nothing about the school that has it.
    assert.ok(result.errors.every((e) => !e.reason.includes(owner)));
    assert.deepEqual(await rowCounts(store.db, other), NOTHING);
  });

  it("keeps each school's rows when two schools import the same ids", async () => {
    const first = await addSchool(store.db);
    const second = await addSchool(store.db);
    assert.equal((await importData(store.db, first, sampleFile())).ok, true);
    const before = await snapshot(store.db, first);

    const theirs = sampleFile();
    theirs.students![0]!.full_name = 'Другой Ученик Другой';
    theirs.contracts![0]!.price = '1.00';
    theirs.payments!.splice(1);
    assert.equal((await importData(store.db, second, theirs)).ok, true);

    assert.deepEqual(await snapshot(store.db, first), before, 'the first school is unchanged');
    const mine = await snapshot(store.db, second);
    assert.equal((mine.students[0] as { full_name: string }).full_name, 'Другой Ученик Другой');
    assert.deepEqual(
      (mine.contracts as { id: string; price_minor: number; paid_minor: number }[]).map((c) => [c.id, c.price_minor, c.paid_minor]),
      [
        ['ct-1', 100, 2_000_000],
        ['ct-2', 0, 0],
      ],
      "balances count only the school's own payments",
    );
  });

  it('checks a payment contract against the stored contract of the same school only', async () => {
    const first = await addSchool(store.db);
    const second = await addSchool(store.db);
    assert.equal((await importData(store.db, first, sampleFile())).ok, true);
    // In the second school ct-1 belongs to st-2; in the first, to st-1.
    const theirs = sampleFile();
    theirs.contracts![0]!.student_id = 'st-2';
    theirs.payments = [];
    assert.equal((await importData(store.db, second, theirs)).ok, true);
    const payment = { id: 'pm-8', student_id: 'st-2', contract_id: 'ct-1', kind: 'payment', method: 'card', amount: '10.00', currency: 'RUB', paid_at: '2025-12-01T10:00:00Z', created_at: '2025-12-01T10:00:00Z' };
    assert.equal((await importData(store.db, second, { payments: [payment] })).ok, true);
    const refused = await importData(store.db, first, { payments: [payment] });
    assert.equal(refused.ok, false);
  });

  it("refuses amounts in a currency other than the school's", async () => {
    const school = await addSchool(store.db, { currency: 'KZT' });
    const result = await importData(store.db, school, sampleFile());
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.ok(result.errors.length > 0 && result.errors.every((e) => e.field === 'currency' && e.reason === "must be the school's currency KZT"));
    assert.deepEqual(await rowCounts(store.db, school), NOTHING);
  });
});
