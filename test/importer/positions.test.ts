/**
 * Blocks of positions (src/resources/items.ts): after every kind of import, each page of a
 * list read by positions (the school alone, or a period) is exactly the page a plain
 * ORDER BY ... LIMIT ... OFFSET gives, with the same total; and the list's blocks describe
 * its rows (consecutive positions from each block's first, ranks that add up).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openStore } from '../../src/db/index.js';
import { importData, type ImportResult } from '../../src/importer/index.js';
import { READ_MODEL_VERSIONS, rebuildStale } from '../../src/importer/rebuild.js';
import { pagedList } from '../../src/resources/common/list.js';
import { BLOCK_ROWS, BLOCK_SPAN } from '../../src/resources/items.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { addSchool, sampleFile } from './helpers.js';

function ok(result: ImportResult): asserts result is Extract<ImportResult, { ok: true }> {
  assert.ok(result.ok, JSON.stringify(result.ok ? null : result.errors));
}

const payments = pagedList({ table: 'payments' });

/** A payment at minute `minute` of 2025 (two payments share each minute when `minute` repeats: the id breaks the tie). */
const pay = (id: string, minute: number) => ({
  id,
  student_id: 'st-1',
  kind: 'payment',
  method: 'cash',
  amount: '1.00',
  paid_at: new Date(Date.UTC(2025, 0, 1) + minute * 60_000).toISOString().replace('.000Z', 'Z'),
  created_at: '2025-01-01T00:00:00Z',
});

describe('importer: blocks of positions against ORDER BY/OFFSET', () => {
  let store: TestStore;
  before(async () => {
    store = await createTestStore();
  });
  after(async () => {
    await store.close();
  });

  /** The list's ids in its order, by a plain query. */
  const ordered = async (school: string, from?: string, until?: string) => {
    let query = store.db.selectFrom('payments').select(['id', 'paid_at']).where('school_id', '=', school);
    if (from !== undefined) query = query.where('paid_at', '>=', from);
    if (until !== undefined) query = query.where('paid_at', '<', until);
    return (await query.orderBy('paid_at').orderBy('id').execute()).map((r) => r.id);
  };

  const page = async (school: string, limit: number, offset: number, from?: string, until?: string) => {
    const body = await payments(store.reads, { schoolId: school, from, until }, limit, offset);
    const parsed = JSON.parse(String(body)) as { items: { id: string }[]; meta: { total: number; limit: number; offset: number } };
    return { ids: parsed.items.map((i) => i.id), total: parsed.meta.total };
  };

  /** Every page shape that can go wrong: block edges, the list's end and past it, with and without a period. */
  async function check(school: string): Promise<void> {
    // SQLite's reader keeps one snapshot per turn of the event loop: start a new turn.
    await new Promise((resolve) => setImmediate(resolve));
    const all = await ordered(school);
    const rows = await store.db.selectFrom('payments').select(['id', 'pos', 'paid_at']).where('school_id', '=', school).orderBy('pos').execute();
    assert.deepEqual(rows.map((r) => r.id), all, 'positions rise with the list order');
    const blocks = await store.db.selectFrom('list_blocks').select(['first_pos', 'first_rank', 'n']).where('school_id', '=', school).where('list', '=', 'payments').orderBy('first_pos').execute();
    let rank = 0;
    for (const b of blocks) {
      assert.ok(Number(b.n) > 0, 'no empty block');
      assert.equal(Number(b.first_rank), rank, 'a block starts at the rank after the blocks before it');
      const inBlock = rows.slice(rank, rank + Number(b.n)).map((r) => Number(r.pos));
      assert.deepEqual(inBlock, Array.from({ length: Number(b.n) }, (_, i) => Number(b.first_pos) + i), `block at ${b.first_pos}: consecutive positions`);
      rank += Number(b.n);
    }
    assert.equal(rank, all.length, 'the blocks hold every row');

    const n = all.length;
    const offsets = [0, 1, BLOCK_ROWS - 1, BLOCK_ROWS, BLOCK_ROWS + 1, 2 * BLOCK_ROWS + 7, Math.floor(n / 2), n - 1, n, n + 5];
    for (const offset of offsets) {
      for (const limit of [1, 50, 200]) {
        const got = await page(school, limit, offset);
        assert.deepEqual(got, { ids: all.slice(offset, offset + limit), total: n }, `limit ${limit} offset ${offset}`);
      }
    }
    // Periods: bounds on a row's time, between rows, before and after the list.
    const times = rows.map((r) => r.paid_at).sort();
    const periods: [string | undefined, string | undefined][] = [
      [times[Math.floor(n / 5)], times[Math.floor((4 * n) / 5)]],
      [times[1], undefined],
      [undefined, times[n - 2]],
      ['2024-01-01T00:00:00Z', '2030-01-01T00:00:00Z'],
      ['2030-01-01T00:00:00Z', undefined],
      [undefined, '2024-01-01T00:00:00Z'],
    ];
    for (const [from, until] of periods) {
      const want = await ordered(school, from, until);
      for (const offset of [0, 3, BLOCK_ROWS, Math.floor(want.length / 2), want.length - 1, want.length].filter((o) => o >= 0)) {
        const got = await page(school, 50, offset, from, until);
        assert.deepEqual(got, { ids: want.slice(offset, offset + 50), total: want.length }, `period ${from}..${until} offset ${offset}`);
      }
    }
  }

  it('holds after a first import, deltas at the start, middle and end, a split, appends and --replace', async () => {
    const school = await addSchool(store.db);
    const first = Array.from({ length: 700 }, (_, i) => pay(`p-${String(i).padStart(4, '0')}`, 10 + Math.floor(i / 2)));
    ok(await importData(store.db, school, { ...sampleFile(), payments: first }));
    await check(school);

    // Rows deleted inside blocks: the blocks are cut where they were, no other row moves.
    const placed = async () => new Map((await store.db.selectFrom('payments').select(['id', 'pos']).where('school_id', '=', school).execute()).map((r) => [r.id, Number(r.pos)]));
    const before = await placed();
    ok(await importData(store.db, school, { deleted: { payments: ['p-0030', 'p-0031', 'p-0100', 'p-0402'] } }));
    await check(school);
    const after = await placed();
    assert.deepEqual([...after].filter(([id, pos]) => before.get(id) !== pos), [], 'no row moved');

    // Deletions at the start, in the middle and at the end; inserts at each; moves both ways.
    ok(
      await importData(store.db, school, {
        payments: [pay('a-start', 0), pay('a-mid', 175), pay('a-end', 5000), { ...first[5]!, paid_at: pay('x', 300).paid_at }, { ...first[600]!, paid_at: pay('x', 1).paid_at }],
        deleted: { payments: ['pm-1', 'p-0000', 'p-0001', 'p-0350', 'p-0351', 'p-0698', 'p-0699'] },
      }),
    );
    await check(school);

    // 100 rows into one place: the block grows past twice its size and is split in its room.
    ok(await importData(store.db, school, { payments: Array.from({ length: 100 }, (_, i) => pay(`s-${String(i).padStart(3, '0')}`, 100)) }));
    await check(school);
    const firsts = await store.db.selectFrom('list_blocks').select('first_pos').where('school_id', '=', school).where('list', '=', 'payments').execute();
    assert.ok(firsts.some((b) => Number(b.first_pos) % BLOCK_SPAN !== 0), 'a block was split between two laid out');
    // 200 more: no room before the next block, so the list is laid out whole.
    ok(await importData(store.db, school, { payments: Array.from({ length: 200 }, (_, i) => pay(`s-${String(i + 100).padStart(3, '0')}`, 100)) }));
    await check(school);

    // Appends after the last row fill the last block, then open new ones.
    ok(await importData(store.db, school, { payments: Array.from({ length: 150 }, (_, i) => pay(`z-${String(i).padStart(3, '0')}`, 6000 + i)) }));
    await check(school);

    // Deleting whole blocks' rows leaves no empty block.
    ok(await importData(store.db, school, { deleted: { payments: Array.from({ length: 150 }, (_, i) => `s-${String(i).padStart(3, '0')}`) } }));
    await check(school);

    // --replace: a third of the list stays.
    const kept = (await ordered(school)).filter((_, i) => i % 3 === 0);
    const rows = await store.db.selectFrom('payments').selectAll().where('school_id', '=', school).where('id', 'in', kept).execute();
    const file = rows.map((r) => ({ id: r.id, student_id: r.student_id, contract_id: r.contract_id, kind: r.kind, method: r.method, amount: (Number(r.amount_minor) / 100).toFixed(2), paid_at: r.paid_at, created_at: r.created_at }));
    ok(await importData(store.db, school, { payments: file }, { replace: true }));
    await check(school);

    // Every row deleted, then the list filled again.
    ok(await importData(store.db, school, { payments: [] }, { replace: true }));
    assert.deepEqual(await ordered(school), []);
    await check(school);
    ok(await importData(store.db, school, { payments: first.slice(0, 100) }));
    await check(school);
  });

  it('holds when a file rewrites most of a list in its order, with rows moved both ways and new ones among them', async () => {
    const school = await addSchool(store.db);
    const first = Array.from({ length: 700 }, (_, i) => pay(`p-${String(i).padStart(4, '0')}`, 10 + Math.floor(i / 2)));
    ok(await importData(store.db, school, { ...sampleFile(), payments: first }));
    const changedBy = async (seq: number | null) =>
      (await store.db.selectFrom('payments').select('id').where('school_id', '=', school).where('change_seq', '=', Number(seq)).orderBy('id').execute()).map((r) => r.id);

    // Half the list and more (the update walks it in its order): ten moved, to the very
    // start, back and forward; three new in the middle and two at the end; the rest as stored.
    const moves = new Map([
      [3, 0],
      [40, 2],
      [41, 350],
      [120, 5],
      [200, 11],
      [260, 400],
      [300, 3000],
      [333, 150],
      [420, 1],
      [480, 12],
    ]);
    const file = first.slice(0, 500).map((p, i) => (moves.has(i) ? { ...p, paid_at: pay('x', moves.get(i)!).paid_at } : p));
    const added = [pay('n-mid-1', 175), pay('n-mid-2', 175), pay('n-mid-3', 176), pay('n-end-1', 9000), pay('n-end-2', 9001)];
    const result = await importData(store.db, school, { payments: [...file, ...added] });
    ok(result);
    await check(school);
    assert.equal(result.changes, 15);
    const expected = [...[...moves.keys()].map((i) => first[i]!.id), ...added.map((p) => p.id)].sort();
    assert.deepEqual(await changedBy(result.seq), expected, 'the moved and the new rows, and no other, carry the import');
    assert.equal((await ordered(school)).length, 705);

    // The same rows again, four more moved and none new: every staged row is stored.
    const again = [...file, ...added].map((p, i) => ([10, 250, 499, 502].includes(i) ? { ...p, paid_at: pay('x', 20 + i).paid_at } : p));
    const second = await importData(store.db, school, { payments: again });
    ok(second);
    await check(school);
    assert.equal(second.changes, 4);
    assert.deepEqual(await changedBy(second.seq), [again[10]!.id, again[250]!.id, again[499]!.id, again[502]!.id].sort());
  });

  /**
   * A school of 300 payments, and the whole store as positions of version 1 left it: every
   * school's lists numbered from 0 in their order, no blocks.
   */
  async function asPositionsOfVersionOne(school: string): Promise<void> {
    const first = Array.from({ length: 300 }, (_, i) => pay(`p-${String(i).padStart(4, '0')}`, 10 + i));
    ok(await importData(store.db, school, { ...sampleFile(), payments: first }));
    for (const table of ['students', 'contracts', 'payments', 'lessons', 'leads', 'instructors', 'vehicles'] as const) {
      await sql`update ${sql.table(table)} set pos = numbered.n
                from (select school_id, id, row_number() over (partition by school_id order by pos) - 1 as n from ${sql.table(table)}) as numbered
                where ${sql.ref(`${table}.school_id`)} = numbered.school_id and ${sql.ref(`${table}.id`)} = numbered.id`.execute(store.db);
    }
    await store.db.deleteFrom('list_blocks').execute();
    for (const [part, version] of Object.entries({ ...READ_MODEL_VERSIONS, positions: 1 })) await store.db.updateTable('read_model_versions').set({ version }).where('part', '=', part).execute();
  }

  it('describes the positions of an older store (0, 1, 2 ...) by blocks without rewriting a row, and lays a list out when an import needs room', async () => {
    const school = await addSchool(store.db);
    await asPositionsOfVersionOne(school);
    const numbered = await ordered(school);
    assert.deepEqual(await rebuildStale(store.db), ['positions']);
    const after = await store.db.selectFrom('payments').select(['id', 'pos']).where('school_id', '=', school).orderBy('pos').execute();
    assert.deepEqual(after.map((r) => [r.id, Number(r.pos)]), numbered.map((id, n) => [id, n]), 'no row moved');
    await check(school);
    ok(await importData(store.db, school, { payments: [pay('a-mid', 100), pay('a-end', 5000)], deleted: { payments: ['p-0000', 'p-0150'] } }));
    await check(school);
  });
  it('makes the blocks once when two upgrades find positions of version 1 at once, though an import laid a list out between them', async () => {
    const school = await addSchool(store.db);
    await asPositionsOfVersionOne(school);
    // One upgrade makes the blocks; an import then lays the list out with room.
    assert.deepEqual(await rebuildStale(store.db), ['positions']);
    ok(await importData(store.db, school, { payments: [pay('b-mid', 100), pay('b-end', 5000)], deleted: { payments: ['p-0001', 'p-0151'] } }));
    await check(school);
    const blocks = async () => store.db.selectFrom('list_blocks').selectAll().where('school_id', '=', school).orderBy('list').orderBy('first_pos').execute();
    const laidOut = await blocks();
    // A second upgrade read the versions before the first recorded its own (shown here by the
    // version of 1 it reads, and the first's record held back until the second waits for it).
    // On SQLite the second is a store of its own on the file, as another process's would be.
    await store.db.updateTable('read_model_versions').set({ version: 1 }).where('part', '=', 'positions').execute();
    let waited = () => {};
    const waitedForLock = new Promise<void>((resolve) => (waited = resolve));
    const other = store.url === null ? openStore({ databaseUrl: null, dataDir: store.dataDir, dbTimeoutMs: 3000, dbPoolSize: 1 }, { lockWaitMs: 30_000, onLockWait: () => waited() }) : store;
    const waitingOnPostgres = async () =>
      (await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query ilike '%read_model_versions%'`.execute(store.db)).rows[0]!.n > 0;
    let second: Promise<string[]> | undefined;
    try {
      await store.db.transaction().execute(async (trx) => {
        if (store.url !== null) await sql`lock table read_model_versions in share row exclusive mode`.execute(trx);
        await trx.updateTable('read_model_versions').set({ version: READ_MODEL_VERSIONS.positions }).where('part', '=', 'positions').execute();
        second = rebuildStale(other.db);
        if (store.url === null) await waitedForLock;
        else {
          for (let i = 0; i < 200 && !(await waitingOnPostgres()); i++) await new Promise((resolve) => setTimeout(resolve, 10));
          assert.ok(await waitingOnPostgres(), 'the second upgrade waits for the first to record the positions');
        }
      });
      assert.deepEqual(await second, [], 'the second upgrade finds the positions current');
    } finally {
      await second?.catch(() => undefined);
      if (other !== store) await other.close();
    }
    assert.deepEqual(await blocks(), laidOut, 'the blocks are the import\'s');
    await check(school);
  });
});
