/**
 * `backup FILE`: a whole copy of the SQLite store taken while it is open and written to
 * (what is still in its write-ahead log included), which serves as the database once put
 * in a data directory (docs/operations.md, "Backups"); never over an existing file, and
 * nothing left of a copy that could not be written. On PostgreSQL it points to pg_dump.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { backupCommand } from '../../src/cli/commands/backup.js';
import { contextFor } from '../../src/cli/context.js';
import { runCli } from '../helpers/processes.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

describe('backup', () => {
  let store: TestStore;
  let env: NodeJS.ProcessEnv;
  before(async () => {
    store = await createTestStore();
    env = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, DATABASE_URL: store.url ?? '', SCHOOL_DATA_LOG_LEVEL: 'warn' };
  });
  after(() => store.close());

  it('copies the open store whole, and the copy serves as the database of a data directory', async (t) => {
    if (store.url !== null) {
      const r = await runCli(['backup', path.join(store.dataDir, 'copy.db')], env);
      assert.equal(r.code, 1);
      assert.equal(r.stderr, 'school-data: the data is on PostgreSQL (DATABASE_URL): take its backup with pg_dump (docs/operations.md, "Backups")\n');
      t.skip('SQLite only beyond its refusal: PostgreSQL is copied by pg_dump');
      return;
    }
    // Written by the open store, and still in its write-ahead log while the copy is taken.
    await store.db.insertInto('schools').values({ id: 'copied', name: 'Copied', plan: 'VIP', timezone: 'Europe/Moscow', currency: 'RUB', created_at: '2026-01-01T00:00:00Z' }).execute();
    assert.ok(fs.statSync(path.join(store.dataDir, 'school-data.db-wal')).size > 0);
    const file = path.join(store.dataDir, 'copy.db');
    const r = await runCli(['backup', file, '--json'], env);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { file, bytes: fs.statSync(file).size });
    assert.equal(fs.statSync(file).mode & 0o777, 0o600, 'readable by its owner alone');
    assert.deepEqual(fs.readdirSync(store.dataDir).filter((f) => f.endsWith('.partial')), []);
    const restored = path.join(store.dataDir, 'restored');
    fs.mkdirSync(restored);
    fs.copyFileSync(file, path.join(restored, 'school-data.db'));
    const list = await runCli(['school', 'list', '--json'], { ...env, SCHOOL_DATA_DIR: restored });
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual((JSON.parse(list.stdout) as { id: string }[]).map((s) => s.id), ['copied']);
    // A FILE that exists is never written over, whatever it holds.
    fs.writeFileSync(file, 'mine');
    const again = await runCli(['backup', file], env);
    assert.equal(again.code, 1);
    assert.equal(again.stderr, `school-data: ${file} exists already: name a new file (a backup never writes over one)\n`);
    assert.equal(fs.readFileSync(file, 'utf8'), 'mine');
  });

  it('leaves nothing of a copy it cannot write, and names what it cannot copy', (t) => {
    if (store.url !== null) return t.skip('SQLite only');
    const ctx = contextFor({ json: true });
    const config = { ...ctx.config, dataDir: store.dataDir, databaseUrl: null };
    const into = path.join(store.dataDir, 'no-such-directory', 'copy.db');
    assert.throws(() => backupCommand({ ...ctx, config }, into), /^CliError: cannot write the backup \S+copy\.db \(ENOENT in \S+no-such-directory\): nothing of it is left$/);
    assert.ok(!fs.existsSync(path.dirname(into)));
    // Another run's copy, still being written or left by a run that was stopped, is not touched.
    const stopped = path.join(store.dataDir, 'stopped.db');
    const another = `${stopped}.1-00000000.partial`;
    fs.writeFileSync(another, 'half');
    backupCommand({ ...ctx, config }, stopped);
    assert.equal(fs.readFileSync(another, 'utf8'), 'half');
    const copy = new SQLite(stopped, { readonly: true });
    try {
      assert.equal((copy.prepare('select count(*) as n from schools').get() as { n: number }).n, 1);
    } finally {
      copy.close();
    }
    assert.throws(() => backupCommand({ ...ctx, config }, `${store.dataDir}/new/`), /^CliError: \S+new\/ names a directory: name the new file in it$/);
    // The store's own failures are the store's, as every command says them.
    const notADatabase = path.join(store.dataDir, 'not-a-database');
    fs.mkdirSync(notADatabase);
    fs.writeFileSync(path.join(notADatabase, 'school-data.db'), 'x'.repeat(4096));
    assert.throws(() => backupCommand({ ...ctx, config: { ...config, dataDir: notADatabase } }, path.join(notADatabase, 'x.db')), (err: unknown) => (err as { code?: string }).code === 'SQLITE_NOTADB');
    assert.deepEqual(fs.readdirSync(notADatabase), ['school-data.db']);
    assert.throws(() => backupCommand({ ...ctx, config }, path.join(store.dataDir, 'school-data.db')), /is the database itself/);
    const empty = path.join(store.dataDir, 'empty');
    fs.mkdirSync(empty);
    assert.throws(() => backupCommand({ ...ctx, config: { ...config, dataDir: empty } }, path.join(empty, 'x.db')), /^CliError: there is no database in \S+empty to copy \(SCHOOL_DATA_DIR\)$/);
  });
});
