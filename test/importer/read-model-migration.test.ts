/**
 * Migrations 0003 and 0005 add the read models to a store that already holds data, and the
 * read-model rebuild that runs after `migrate` fills them: every stored list row gets its
 * item and its position, so the API serves the same lists as before the upgrade, in the
 * contract's order, with the contract balances the rows hold; and the stored payments and
 * expenses get their day totals, so the finance summary is what the rows say. Migration
 * 0006 makes the existing data the school's first change batch.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { rebuildStale } from '../../src/importer/rebuild.js';
import { createKey } from '../../src/management/keys.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

describe('migrations 0003 and 0005 on a store with data', () => {
  let store: TestStore;
  let t: TestApp;
  let key: string;
  const school = 'before-0003';

  before(async () => {
    store = await createTestStore({ migrateTo: '0002_cabinet' });
    // Rows as the importer wrote them before 0003: no item, no position.
    await sql`insert into schools (id, name, plan, timezone, currency, created_at) values (${school}, 'Old', 'VIP', 'Europe/Moscow', 'RUB', '2025-01-01T00:00:00Z')`.execute(store.db);
    for (const [id, created] of [['s2', '2026-01-02T09:00:00Z'], ['s1', '2026-01-02T09:00:00Z'], ['s0', '2026-01-03T09:00:00Z'], ['s3', '2026-01-01T09:00:00Z']]) {
      await sql`insert into students (school_id, id, full_name, phone, email, category, status, group_id, branch_id, created_at)
                values (${school}, ${id}, ${`Студент ${id}`}, '+79990000000', ${`${id}@example.ru`}, 'B', 'enrolled', 'g1', null, ${created})`.execute(store.db);
    }
    await sql`insert into contracts (school_id, id, number, student_id, category, status, signed_on, price_minor, paid_minor, currency, created_at)
              values (${school}, 'c1', 'Д-1', 's1', 'B', 'active', '2026-01-02', 5000000, 1250050, 'RUB', '2026-01-02T10:00:00Z')`.execute(store.db);
    await sql`insert into payments (school_id, id, student_id, contract_id, kind, method, amount_minor, currency, paid_at, created_at)
              values (${school}, 'p1', 's1', 'c1', 'payment', 'card', 1250050, 'RUB', '2026-02-01T10:00:00Z', '2026-02-01T10:00:00Z')`.execute(store.db);
    await sql`insert into payments (school_id, id, student_id, contract_id, kind, method, amount_minor, currency, paid_at, created_at)
              values (${school}, 'p2', 's1', null, 'refund', 'card', 50, 'RUB', '2026-02-03T10:00:00Z', '2026-02-03T10:00:00Z')`.execute(store.db);
    await sql`insert into expenses (school_id, id, category, amount_minor, currency, spent_at, comment)
              values (${school}, 'e1', 'fuel', 300000, 'RUB', '2026-02-10T08:00:00Z', null)`.execute(store.db);

    const applied = await store.migrate();
    assert.deepEqual(applied, ['0003_read_model', '0004_data_version', '0005_day_totals', '0006_change_log', '0007_key_activity', '0008_key_options', '0009_list_blocks', '0010_request_log_ring', '0011_data_stamps', '0012_form_nonces', '0013_tombstone_place', '0014_key_watchers', '0015_month_totals', '0016_list_changes', '0017_import_tables_unchecked', '0018_list_changes_feed_order']);
    assert.deepEqual(await rebuildStale(store.db), ['items', 'positions', 'day_totals']);
    assert.deepEqual(await rebuildStale(store.db), [], 'a rebuilt store is up to date');
    t = await startTestApp({ store });
    const created = await createKey(store.db, school, 'after upgrade');
    assert.ok(created.ok);
    key = created.value.key;
  });
  after(async () => {
    await t.close();
    await store.close();
  });

  it('numbers every list in its order and serves it', async () => {
    const rows = await store.db.selectFrom('students').select(['id', 'pos']).where('school_id', '=', school).orderBy('pos').execute();
    assert.deepEqual(rows, [
      { id: 's3', pos: 0 },
      { id: 's1', pos: 1 },
      { id: 's2', pos: 2 },
      { id: 's0', pos: 3 },
    ]);
    const res = await t.request('/api/public/v1/students?limit=2&offset=1', { key });
    const body = res.json() as { items: { id: string; full_name: string; branch_id: string | null }[]; meta: { total: number } };
    assert.deepEqual(body.items.map((s) => s.id), ['s1', 's2']);
    assert.equal(body.items[0]!.full_name, 'Студент s1');
    assert.equal(body.items[0]!.branch_id, null);
    assert.equal(body.meta.total, 4);
  });

  it('makes the items from the rows, money and balances included', async () => {
    const contracts = (await t.request('/api/public/v1/contracts', { key })).json() as { items: Record<string, unknown>[] };
    assert.deepEqual(contracts.items, [
      { id: 'c1', number: 'Д-1', student_id: 's1', category: 'B', status: 'active', signed_on: '2026-01-02', price: '50000.00', paid: '12500.50', debt: '37499.50', currency: 'RUB', created_at: '2026-01-02T10:00:00Z' },
    ]);
    const payments = (await t.request('/api/public/v1/payments?period_from=2026-02-01', { key })).json() as { items: { id: string; amount: string }[]; meta: { total: number } };
    assert.deepEqual(payments.items.map((p) => [p.id, p.amount]), [['p1', '12500.50'], ['p2', '0.50']]);
    assert.equal(payments.meta.total, 2);
  });

  it('makes the stored data the first change batches: migrated rows, then the rebuilt items', async () => {
    const school_ = await store.db.selectFrom('schools').select(['data_version', 'tombstones_dropped_seq']).where('id', '=', school).executeTakeFirstOrThrow();
    const batches = await store.db.selectFrom('change_batches').select('seq').where('school_id', '=', school).orderBy('seq').execute();
    assert.deepEqual(batches.map((b) => Number(b.seq)), [1, 2], 'the migrated data (1), then the items the rebuild made (2)');
    assert.equal(Number(school_.data_version), 2);
    assert.equal(Number(school_.tombstones_dropped_seq), 0);
    const seqs = await store.db.selectFrom('students').select('change_seq').distinct().where('school_id', '=', school).execute();
    assert.deepEqual(seqs.map((r) => Number(r.change_seq)), [2]);
    const marks = await store.db.selectFrom('list_changes').select(['change_seq', 'id']).where('school_id', '=', school).where('resource', '=', 'students').orderBy('id').execute();
    const students = await store.db.selectFrom('students').select(['change_seq', 'id']).where('school_id', '=', school).orderBy('id').execute();
    assert.deepEqual(marks.map((m) => [m.id, Number(m.change_seq)]), students.map((r) => [r.id, Number(r.change_seq)]), 'each migrated student has its mark, moved by the rebuild');
  });

  it('makes the day totals from the stored payments and expenses', async () => {
    const summary = (await t.request('/api/public/v1/reports/finance-summary?period_from=2026-01-01&period_to=2026-12-31', { key })).json() as Record<string, unknown>;
    assert.equal(summary.income, '12500.00');
    assert.equal(summary.expense, '3000.00');
    assert.equal(summary.profit, '9500.00');
    assert.equal((summary.income_by_method as Record<string, string>).card, '12500.00');
    assert.equal((summary.expense_by_category as Record<string, string>).fuel, '3000.00');
  });
});

describe('migration 0010 on a store with request logs', () => {
  let store: TestStore;
  before(async () => {
    store = await createTestStore({ migrateTo: '0009_list_blocks' });
  });
  after(async () => {
    await store.close();
  });

  it('keeps the newest 100 requests of each key in its ring and goes on from there', async () => {
    // 150 requests of one key and 3 of another, as the log held them before the ring.
    const row = (key: string, i: number) =>
      sql`insert into key_requests (key_id, request_id, at_ms, method, target, status, address, duration_ms)
          values (${key}, ${`r${i}`}, ${1_700_000_000_000 + i}, 'GET', ${`/api/public/v1/students?limit=${i}`}, 200, '127.0.0.1', 1.5)`.execute(store.db);
    for (let i = 0; i < 150; i++) await row('key_a', i);
    for (let i = 0; i < 3; i++) await row('key_b', i);
    assert.deepEqual(await store.migrate(), ['0010_request_log_ring', '0011_data_stamps', '0012_form_nonces', '0013_tombstone_place', '0014_key_watchers', '0015_month_totals', '0016_list_changes', '0017_import_tables_unchecked', '0018_list_changes_feed_order']);

    const ring = await store.db.selectFrom('key_requests').select(['key_id', 'slot', 'request_id']).orderBy('key_id').orderBy('slot').execute();
    const a = ring.filter((r) => r.key_id === 'key_a');
    assert.equal(a.length, 100);
    assert.deepEqual(a.map((r) => Number(r.slot)), Array.from({ length: 100 }, (_, i) => i));
    // The 150th request (r149) was the key's 150th: slot 149 % 100; the oldest kept, r50, slot 50.
    assert.equal(a.find((r) => r.request_id === 'r149')!.slot, 49);
    assert.equal(a.find((r) => r.request_id === 'r50')!.slot, 50);
    assert.ok(!a.some((r) => r.request_id === 'r49'), 'the oldest are left behind');
    assert.deepEqual(ring.filter((r) => r.key_id === 'key_b').map((r) => [Number(r.slot), r.request_id]), [[0, 'r0'], [1, 'r1'], [2, 'r2']]);
    const next = await store.db.selectFrom('key_request_next').select(['key_id', 'next']).orderBy('key_id').execute();
    assert.deepEqual(next.map((r) => [r.key_id, Number(r.next)]), [['key_a', 150], ['key_b', 3]]);
  });
});

describe('a store a newer version migrated', () => {
  let store: TestStore;
  before(async () => {
    store = await createTestStore();
  });
  after(async () => {
    await store.close();
  });

  it('is refused, naming the migration it does not know, and nothing is changed', async () => {
    await sql`insert into kysely_migration (name, timestamp) values ('9999_from_the_future', '2027-01-01T00:00:00.000Z')`.execute(store.db);
    await assert.rejects(store.migrate(), (err: Error) => {
      assert.equal(err.name, 'StoreNewerError');
      assert.match(err.message, /upgraded by a newer school-data \(its migration 9999_from_the_future is unknown here\)/);
      return true;
    });
    await sql`delete from kysely_migration where name = '9999_from_the_future'`.execute(store.db);
    assert.deepEqual(await store.migrate(), []);
  });
});
