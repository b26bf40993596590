/**
 * The changes feed's page against a model of it: for many cursors (every list, every seq,
 * ids between and around the school's), resource sets and page sizes, the page the store
 * makes is the places after the cursor in the change order (seq, resource, id), each with its
 * record and batch (its time, and the stamp of the page's last), as a sort of every place in
 * JavaScript gives them. The statement reads each list from the cursor's place on and merges
 * them (docs/decisions.md, "A page's places are merged by the database"); this is what holds
 * it to the order.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { importData } from '../../src/importer/index.js';
import { createSchool } from '../../src/management/schools.js';
import { changePage } from '../../src/resources/changes/repository.js';
import { LIST_TABLES, type ListTable } from '../../src/resources/items.js';
import { schoolData } from '../helpers/fixtures.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

interface Place {
  seq: number;
  resource: string;
  id: string;
}

/** The feed's order, its strings compared by their ranks in the store's own order of them (its collation). */
function order(rank: Map<string, number>): (a: Place, b: Place) => number {
  return (a, b) => a.seq - b.seq || rank.get(a.resource)! - rank.get(b.resource)! || rank.get(a.id)! - rank.get(b.id)!;
}

/** Ids that sort around each other in byte order: capitals, digits, `_` and `-` among letters. */
const IDS = ['A', 'Z', '_', '-', '0', '9', 'a', 's', 's0', 's1x', 'z', 'zz', 'x-y', 'x_y', 'Y_'];

describe('the changes feed\'s page against a model', () => {
  let store: TestStore;
  let school: string;

  before(async () => {
    store = await createTestStore();
    const created = await createSchool(store.db, { name: 'Feed model', plan: 'VIP', timezone: 'Europe/Moscow' });
    assert.ok(created.ok);
    school = created.value.id;
    const student = (id: string, n: string) => ({ id, full_name: `Ученик ${n}`, phone: '+79990000001', email: 'student@example.ru', category: 'B', status: 'enrolled', group_id: 'g1', branch_id: null, created_at: '2026-01-10T09:00:00Z' });
    const lead = (id: string, n: string) => ({ id, full_name: `Лид ${n}`, phone: '+79992220001', email: null, category: 'B', source: 'website', status: 'new', student_id: null, created_at: '2026-03-01T08:00:00Z' });
    const payment = (id: string, amount: string) => ({ id, student_id: 's1', contract_id: null, kind: 'payment', method: 'cash', amount, currency: 'RUB', paid_at: '2026-02-28T21:00:00Z', created_at: '2026-02-28T21:00:05Z' });
    const base = schoolData('A');
    const imports: unknown[] = [
      // Records in every list, with ids that sort around each other.
      { ...base, students: [...base.students!, ...IDS.map((i) => student(i, '1'))], leads: [...base.leads!, ...IDS.map((i) => lead(i, '1'))], payments: [...base.payments!, ...IDS.map((i) => payment(i, '10.00'))] },
      // Changes and deletions (tombstones) in later seqs.
      { students: IDS.filter((_, k) => k % 2 === 0).map((i) => student(i, '2')), deleted: { leads: IDS.filter((_, k) => k % 3 === 1), payments: IDS.filter((_, k) => k % 2 === 1) } },
      { students: IDS.filter((_, k) => k % 3 === 0).map((i) => student(i, '3')), payments: IDS.filter((_, k) => k % 4 === 1).map((i) => payment(i, '11.00')), deleted: { leads: IDS.filter((_, k) => k % 3 === 2), lessons: ['l3'] } },
      // Deleted leads back again.
      { leads: IDS.filter((_, k) => k % 3 === 1).slice(0, 3).map((i) => lead(i, '4')), deleted: { students: ['A', '_'] } },
      // A seq of deletions alone.
      { deleted: { leads: ['ld1'], students: ['z'] } },
    ];
    for (const data of imports) {
      const result = await importData(store.db, school, data);
      assert.ok(result.ok && result.seq !== null, JSON.stringify(result));
    }
    // The imports commit within a second, in whole seconds: each batch its own time and stamp,
    // so that a change given another's batch shows.
    await sql`update change_batches set committed_at = '2026-03-0' || seq || 'T10:00:00Z', stamp = 'stamp-' || seq where school_id = ${school}`.execute(store.db);
  });
  after(() => store.close());

  it('gives, from any place, the places after it in the change order, each with its record and batch', async () => {
    const live = await sql<Place>`select change_seq as seq, resource, id from list_changes where school_id = ${school}`.execute(store.db);
    const gone = await sql<Place>`select change_seq as seq, resource, id from tombstones where school_id = ${school}`.execute(store.db);
    const unsorted = [...live.rows.map((p) => ({ ...p, seq: Number(p.seq), live: true })), ...gone.rows.map((p) => ({ ...p, seq: Number(p.seq), live: false }))];
    const records = new Map<string, unknown>();
    for (const table of LIST_TABLES) {
      const rows = await sql<{ id: string; item: string }>`select id, item from ${sql.table(table)} where school_id = ${school}`.execute(store.db);
      for (const row of rows.rows) records.set(`${table}/${row.id}`, JSON.parse(row.item));
    }
    const batches = await sql<{ seq: number; committed_at: string; stamp: string }>`select seq, committed_at, stamp from change_batches where school_id = ${school}`.execute(store.db);
    const committed = new Map(batches.rows.map((b) => [Number(b.seq), b.committed_at]));
    const stamps = new Map(batches.rows.map((b) => [Number(b.seq), b.stamp]));
    assert.equal(new Set(committed.values()).size, committed.size, 'each batch its own time');
    const lastSeq = Math.max(...unsorted.map((p) => p.seq));
    assert.ok(lastSeq >= 5 && unsorted.some((p) => !p.live), 'the school has several seqs and deletions');

    // Cursors: the start, and every list at every seq (and one past the last) with ids at,
    // between and around the school's.
    const ids = [...new Set([...unsorted.map((p) => p.id), ...IDS, '--', 'zzz', 'Zz', 'l35', 'q', 's10'])];
    const strings = [...new Set(['', 'zz', ...LIST_TABLES, ...ids])];
    const ranked = await sql<{ s: string }>`select column1 as s from (values ${sql.join(strings.map((v) => sql`(${v})`))}) as t order by column1`.execute(store.db);
    const compare = order(new Map(ranked.rows.map((r, i) => [r.s, i])));
    const places = unsorted.sort(compare);
    const cursors: Place[] = [{ seq: 0, resource: 'zz', id: '' }];
    for (let seq = 0; seq <= lastSeq + 1; seq++) {
      cursors.push({ seq, resource: 'zz', id: '' });
      for (const resource of LIST_TABLES) for (const id of ids) cursors.push({ seq, resource, id });
    }
    const sets: ListTable[][] = [[...LIST_TABLES], ['students'], ['leads', 'payments'], ['contracts', 'instructors', 'students']];
    let pages = 0;
    for (const resources of sets) {
      for (const limit of [2, 1000]) {
        // Ten at a time: on PostgreSQL, reads of one turn go out as one statement.
        for (let from = 0; from < cursors.length; from += 10) {
          const batch = cursors.slice(from, from + 10);
          const got = await Promise.all(batch.map((cursor) => changePage(store.reads, school, resources, cursor, limit)));
          batch.forEach((cursor, i) => {
            const page = got[i]!;
            const following = places.filter((p) => resources.includes(p.resource as ListTable) && compare(p, cursor) > 0);
            const want = following.slice(0, limit).map((p) => ({
              resource: p.resource, id: p.id, change: p.live ? 'upsert' : 'delete', changed_at: committed.get(p.seq), record: p.live ? records.get(`${p.resource}/${p.id}`) : null,
            }));
            const items = page.items.length === 0 ? [] : (JSON.parse(`[${page.items.map((part) => part.toString()).join(',')}]`) as unknown[]);
            const where = `${JSON.stringify(cursor)} ${resources.join(',')} limit ${limit}`;
            assert.deepEqual(items, want, where);
            assert.equal(page.more, following.length > limit, where);
            const last = following.slice(0, limit).at(-1);
            assert.deepEqual(page.last, last ? { seq: last.seq, resource: last.resource, id: last.id, stamp: stamps.get(last.seq) } : null, where);
            assert.equal(page.pruned, 0, where);
            pages += 1;
          });
        }
      }
    }
    assert.ok(pages > 5_000, `${pages} pages`);
  });
});
