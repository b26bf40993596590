/**
 * After an import that changed many rows, PostgreSQL's planner statistics are refreshed
 * for the tables that import wrote, and only for those: a large import of one array does
 * not read every other table of the school's store again; and of those tables only the
 * columns an index holds, which are the statistics that choose a plan.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { importData } from '../../src/importer/index.js';
import { createTestStore, usePostgres, type TestStore } from '../helpers/store.js';
import { addSchool } from './helpers.js';

describe('statistics after a large import', { skip: usePostgres() ? false : 'PostgreSQL only: SQLite runs pragma optimize, which picks its tables itself' }, () => {
  let store: TestStore;

  before(async () => {
    store = await createTestStore();
    // Else autovacuum may analyze every column of a table the test looks at first.
    for (const table of ['leads', 'students']) await sql`alter table ${sql.table(table)} set (autovacuum_enabled = off)`.execute(store.db);
  });
  after(() => store.close());

  it('analyzes the tables the import wrote, not the others', async () => {
    const school = await addSchool(store.db);
    const leads = Array.from({ length: 10_000 }, (_, i) => ({ id: `ld-${i}`, full_name: `Лид ${i}`, phone: '+79990001122', source: 'website', status: 'new', created_at: '2025-11-10T10:00:00Z' }));
    const result = await importData(store.db, school, { leads });
    assert.ok(result.ok, JSON.stringify(result));
    const { rows } = await sql<{ relname: string; analyze_count: string }>`select relname, analyze_count from pg_stat_user_tables where schemaname = current_schema()`.execute(store.db);
    const analyzed = new Map(rows.map((r) => [r.relname, Number(r.analyze_count)]));
    assert.ok((analyzed.get('leads') ?? 0) >= 1, 'leads analyzed');
    assert.ok((analyzed.get('list_blocks') ?? 0) >= 1, 'list_blocks analyzed');
    for (const untouched of ['lessons', 'payments', 'students', 'api_keys']) assert.equal(analyzed.get(untouched), 0, `${untouched} not analyzed`);
  });

  it('answers an import whose statistics refresh fails after the commit as imported, saying what failed', async () => {
    const school = await addSchool(store.db);
    const leads = Array.from({ length: 10_000 }, (_, i) => ({ id: `lx-${i}`, full_name: `Лид ${i}`, phone: '+79990001122', source: 'website', status: 'new', created_at: '2025-11-10T10:00:00Z' }));
    // A lock that lets the import write but keeps its statistics step waiting, whose connection is then ended.
    const holder = new pg.Client({ connectionString: store.url! });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('lock table leads in share update exclusive mode');
      const ending: { done?: Promise<unknown> } = {};
      const result = await importData(store.db, school, { leads }, {
        onProgress: (p) => {
          if (p.phase !== 'merge' || p.step !== 'statistics' || ending.done) return;
          ending.done = (async () => {
            for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
              // Not on the holder's connection: in its transaction, pg_stat_activity would stay as first read.
              // The statistics step's statements (its read of the indexes, its ANALYZE), waiting for this lock: no other test's.
              const { rows } = await sql<{ pid: number }>`select pid from pg_stat_activity
                where wait_event_type = 'Lock' and state = 'active' and pid <> pg_backend_pid() and (query ilike 'analyze%' or query ilike '%from pg_index i%')`.execute(store.db);
              if (rows.length > 0) {
                await sql`select pg_terminate_backend(${rows[0]!.pid})`.execute(store.db);
                // Released at once: had another statement been ended, the import goes on and the test fails, not hangs.
                return holder.query('rollback');
              }
              await new Promise((r) => setTimeout(r, 20));
            }
            throw new Error('the import did not wait for the lock');
          })();
        },
      });
      await ending.done;
      assert.ok(result.ok, JSON.stringify(result));
      assert.match(result.afterCommit ?? '', /^the planner's statistics were not refreshed \(autovacuum will\): /);
      const { count } = await store.db.selectFrom('leads').select((eb) => eb.fn.countAll<string>().as('count')).where('school_id', '=', school).executeTakeFirstOrThrow();
      assert.equal(Number(count), 10_000, 'the import is committed');
    } finally {
      await holder.query('rollback').catch(() => undefined);
      await holder.end();
    }
  });

  it('analyzes the columns an index holds, not the free text', async () => {
    const school = await addSchool(store.db);
    const leads = Array.from({ length: 10_000 }, (_, i) => ({ id: `st-${i}`, full_name: `Лид ${i}`, phone: '+79990001122', source: 'website', status: i % 2 ? 'new' : 'rejected', created_at: '2025-11-10T10:00:00Z' }));
    assert.ok((await importData(store.db, school, { leads })).ok);
    const { rows } = await sql<{ attname: string }>`select attname from pg_stats where schemaname = current_schema() and tablename = 'leads'`.execute(store.db);
    const columns = new Set(rows.map((r) => r.attname));
    for (const indexed of ['school_id', 'id', 'pos', 'status', 'created_at']) assert.ok(columns.has(indexed), `leads.${indexed} has statistics`);
    for (const text of ['full_name', 'phone', 'item', 'change_seq']) assert.ok(!columns.has(text), `leads.${text} has none`);
  });

  it('analyzes a table with an index on an expression whole (named columns would leave the expression without statistics)', async () => {
    await sql`create index students_lower_name on students (school_id, lower(full_name))`.execute(store.db);
    const school = await addSchool(store.db);
    const students = Array.from({ length: 10_000 }, (_, i) => ({ id: `st-${i}`, full_name: `Ученик ${i}`, phone: '+79990001122', email: `s${i}@example.com`, group_id: 'g1', category: 'B', status: 'enrolled', created_at: '2025-11-10T10:00:00Z' }));
    const result = await importData(store.db, school, { groups: [{ id: 'g1', name: 'Группа', category: 'B', branch_id: null }], students });
    assert.ok(result.ok, JSON.stringify(result));
    const { rows } = await sql<{ attname: string }>`select attname from pg_stats where schemaname = current_schema() and tablename = 'students'`.execute(store.db);
    assert.ok(rows.some((r) => r.attname === 'full_name'), 'students.full_name has statistics');
    const expression = await sql<{ n: string }>`select count(*) as n from pg_stats where schemaname = current_schema() and tablename = 'students_lower_name'`.execute(store.db);
    assert.ok(Number(expression.rows[0]!.n) > 0, 'the expression has statistics');
  });
});
