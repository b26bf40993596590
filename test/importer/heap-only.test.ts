/**
 * PostgreSQL: an import that changes only unindexed columns of a list's rows updates them in
 * place (heap-only): a row's change mark is in `list_changes`, not an indexed column of the
 * row, and the lists' pages keep room for the next versions (fillfactor 50). The list's
 * indexes then get no new entries: none of them grows. And no row an import writes waits
 * for a foreign key's check of its school (migration 0017).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { importData } from '../../src/importer/index.js';
import { createTestStore, usePostgres, type TestStore } from '../helpers/store.js';
import { addSchool } from './helpers.js';

describe('a list updated in place', { skip: usePostgres() ? false : 'PostgreSQL only: SQLite has no heap-only updates' }, () => {
  let store: TestStore;

  before(async () => {
    store = await createTestStore();
  });
  after(() => store.close());

  const indexSizes = async () => {
    const { rows } = await sql<{ name: string; bytes: string }>`select indexname as name, pg_relation_size(format('%I', indexname)::regclass) as bytes
                                                               from pg_indexes where schemaname = current_schema() and tablename = 'leads' order by indexname`.execute(store.db);
    return Object.fromEntries(rows.map((r) => [r.name, Number(r.bytes)]));
  };

  it('writes no index entry for a change of unindexed columns, and marks every changed record', async () => {
    const school = await addSchool(store.db);
    const leads = (name: string) =>
      Array.from({ length: 5_000 }, (_, i) => ({ id: `ld-${String(i).padStart(5, '0')}`, full_name: `${name} ${i}`, phone: '+79990001122', source: 'website', status: 'new', created_at: '2025-11-10T10:00:00Z' }));
    assert.ok((await importData(store.db, school, { leads: leads('Лид') })).ok);
    const before = await indexSizes();
    assert.ok(Object.keys(before).length >= 4, 'the leads have their indexes');

    const again = await importData(store.db, school, { leads: leads('Клиент') });
    assert.ok(again.ok, JSON.stringify(again));
    assert.equal(again.changes, 5_000);
    assert.deepEqual(await indexSizes(), before, "every lead's new version stayed on its page: no index grew");
    const marks = await store.db.selectFrom('list_changes').select(['change_seq']).distinct().where('school_id', '=', school).where('resource', '=', 'leads').execute();
    assert.deepEqual(marks.map((m) => Number(m.change_seq)), [2]);
  });
});

describe('the tables an import writes', { skip: usePostgres() ? false : 'PostgreSQL only: SQLite keeps its foreign keys' }, () => {
  let store: TestStore;

  before(async () => {
    store = await createTestStore();
  });
  after(() => store.close());

  it('checks no foreign key to the schools on the tables an import writes', async () => {
    const { rows } = await sql<{ name: string }>`select conrelid::regclass::text as name from pg_constraint
                                                  where contype = 'f' and confrelid = 'schools'::regclass order by 1`.execute(store.db);
    // The school's keys, directors and key events keep theirs: none is written by an import.
    assert.deepEqual(rows.map((r) => r.name), ['api_keys', 'directors', 'key_events']);
  });
});
