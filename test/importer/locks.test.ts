/**
 * What a long import leaves free (PostgreSQL, where an import holds its transaction from
 * the first record read to its commit): a director can create and revoke the school's keys
 * while it runs; a second import of the same school waits for the first; the removal of a
 * school by hand, as docs/operations.md gives it, waits for the import, and an import that
 * meets a school removed meanwhile is refused with nothing of it left.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { importFile, importData } from '../../src/importer/index.js';
import { createKey, revokeKey } from '../../src/management/keys.js';
import { createTestStore, usePostgres, type TestStore } from '../helpers/store.js';
import { addSchool } from './helpers.js';

/** The PostgreSQL block of docs/operations.md, "Removing a school by hand", for `school`. */
function removalBlock(school: string): string {
  const doc = fs.readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
  const section = doc.slice(doc.indexOf('## Removing a school by hand'));
  const block = /```sql\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block?.includes('sch_0123456789ab'), 'docs/operations.md has the removal block');
  return block!.replaceAll('sch_0123456789ab', school);
}

/** Rows of `school` left in the tables an import writes. */
async function rowsLeft(db: TestStore['db'], school: string): Promise<number> {
  const tables = ['students', 'groups', 'leads', 'list_changes', 'list_blocks', 'change_batches', 'tombstones'];
  let n = 0;
  for (const table of tables) n += Number((await sql<{ n: string }>`select count(*) as n from ${sql.table(table)} where school_id = ${school}`.execute(db)).rows[0]!.n);
  return n;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `work`'s result, or 'waiting' when it has not ended within `ms` (it goes on). */
async function within<T>(ms: number, work: Promise<T>): Promise<T | 'waiting'> {
  return Promise.race([work, sleep(ms).then(() => 'waiting' as const)]);
}

describe('an import running on PostgreSQL', { skip: usePostgres() ? false : 'PostgreSQL only: a SQLite import reads before it takes the write lock' }, () => {
  let store: TestStore;

  before(async () => {
    store = await createTestStore();
  });
  after(() => store.close());

  /**
   * Starts an import of a file fed through a named pipe: its first part (the students,
   * merged while the rest is awaited) now, the rest when `finish` is called.
   */
  async function heldImport(school: string) {
    const fifo = path.join(store.dataDir, `held-${school}.json`);
    execFileSync('mkfifo', [fifo]);
    const importing = importFile(store.db, school, fifo);
    const writer = fs.createWriteStream(fifo);
    const students = Array.from({ length: 2000 }, (_, i) => ({
      id: `st-${i}`,
      full_name: `Ученик ${i}`,
      phone: '+79990001122',
      email: `st${i}@example.com`,
      category: 'B',
      status: 'enrolled',
      group_id: 'g1',
      created_at: '2025-11-10T10:00:00Z',
    }));
    writer.write(`{"groups": [{"id": "g1", "name": "B-01", "category": "B"}],\n "students": ${JSON.stringify(students)},\n "leads": [`);
    // The students' rows are being written once their table is locked for writing by another session.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const { rows } = await sql<{ n: string }>`select count(*) as n from pg_locks l join pg_class c on c.oid = l.relation
          where c.relname = 'students' and c.relnamespace = current_schema()::regnamespace and l.mode = 'RowExclusiveLock' and l.pid <> pg_backend_pid()`.execute(store.db);
      if (Number(rows[0]!.n) > 0) break;
      assert.ok(Date.now() < deadline, 'the import never began writing the students');
      await sleep(20);
    }
    await sleep(300);
    return {
      importing,
      finish: async () => {
        await new Promise<void>((resolve) => writer.end('{"id": "ld-1", "full_name": "Лид", "phone": "+79990001122", "source": "website", "status": "new", "created_at": "2025-11-10T10:00:00Z"}]}', resolve));
        return importing;
      },
    };
  }

  it('lets the school’s keys be created and revoked meanwhile', async () => {
    const school = await addSchool(store.db);
    const old = await createKey(store.db, school, 'before the import');
    assert.ok(old.ok);
    const held = await heldImport(school);
    try {
      const created = await within(5_000, createKey(store.db, school, 'during the import'));
      assert.notEqual(created, 'waiting', 'creating a key waited for the import');
      assert.ok(created !== 'waiting' && created.ok);
      const revoked = await within(5_000, revokeKey(store.db, old.value.id));
      assert.notEqual(revoked, 'waiting', 'revoking a key waited for the import');
      assert.ok(revoked !== 'waiting' && revoked.ok);
    } finally {
      const result = await held.finish();
      assert.ok(result.ok, JSON.stringify(result));
      assert.equal(result.counts.students, 2000);
    }
  });

  it('makes a second import of the school wait for the first, and both land', async () => {
    const school = await addSchool(store.db);
    const held = await heldImport(school);
    const second = importData(store.db, school, { leads: [{ id: 'ld-2', full_name: 'Второй', phone: '+79990001123', source: 'website', status: 'new', created_at: '2025-11-11T10:00:00Z' }] });
    assert.equal(await within(1_000, second), 'waiting');
    assert.ok((await held.finish()).ok);
    const result = await second;
    assert.ok(result.ok, JSON.stringify(result));
    const batches = await store.db.selectFrom('change_batches').select('seq').where('school_id', '=', school).orderBy('seq').execute();
    assert.deepEqual(batches.map((b) => Number(b.seq)), [1, 2]);
    const leads = await store.db.selectFrom('leads').select('id').where('school_id', '=', school).orderBy('id').execute();
    assert.deepEqual(leads.map((l) => l.id), ['ld-1', 'ld-2']);
  });

  it('makes the removal of the school by hand wait for the import, then removes all it wrote', async () => {
    const school = await addSchool(store.db);
    const held = await heldImport(school);
    const removing = sql.raw(removalBlock(school)).execute(store.db);
    assert.equal(await within(1_000, removing), 'waiting', 'the removal did not wait for the import');
    assert.ok((await held.finish()).ok);
    await removing;
    assert.equal(await rowsLeft(store.db, school), 0);
    assert.equal((await store.db.selectFrom('schools').select('id').where('id', '=', school).execute()).length, 0);
  });

  /**
   * Runs `removal` in a transaction of another session, starts an import of one lead while
   * it is open (the import must wait), commits it, and checks the import was refused and
   * left nothing of the school.
   */
  async function importDuringRemoval(school: string, removal: (client: pg.Client) => Promise<unknown>): Promise<void> {
    const remover = new pg.Client({ connectionString: store.url! });
    await remover.connect();
    try {
      await remover.query('begin');
      await removal(remover);
      const importing = importData(store.db, school, { leads: [{ id: 'ld-1', full_name: 'Лид', phone: '+79990001122', source: 'website', status: 'new', created_at: '2025-11-10T10:00:00Z' }] });
      assert.equal(await within(1_000, importing), 'waiting', 'the import did not wait for the removal');
      await remover.query('commit');
      const result = await importing;
      assert.equal(result.ok, false);
      assert.match(JSON.stringify(result), /does not exist/);
      assert.equal(await rowsLeft(store.db, school), 0);
    } finally {
      await remover.end();
    }
  }

  it('refuses an import whose school is removed before it takes the lock, and leaves nothing of it', async () => {
    const school = await addSchool(store.db);
    // The removal holds the school's lock and has deleted the rows, not yet committed.
    await importDuringRemoval(school, (remover) => remover.query(removalBlock(school)));
  });

  it('refuses an import whose school is removed without its lock, and commits nothing of it', async () => {
    const school = await addSchool(store.db);
    // The import writes its rows, then waits for the school's row to record its batch.
    await importDuringRemoval(school, (remover) => remover.query('delete from schools where id = $1', [school]));
  });
});
