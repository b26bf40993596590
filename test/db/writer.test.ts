/**
 * SQLite's writing connection waits for another writer without stopping the process: a
 * server keeps answering while an import in another process holds the write lock.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { ConfigError } from '../../src/config/index.js';
import { openStore, sqlitePath, useWal, type Store } from '../../src/db/index.js';

describe('SQLite store opened on a new file that another process is writing', () => {
  /**
   * Another connection, on a thread of its own (opening the store waits on this one), holds
   * the write lock of a new file for `holdMs`, as a command started a moment earlier does;
   * resolves once it holds it.
   */
  async function holdNewFile(file: string, holdMs: number): Promise<Worker> {
    const worker = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads');
      const SQLite = require(workerData.driver);
      const db = new SQLite(workerData.file);
      db.exec('begin immediate; create table first_writer (x)');
      parentPort.postMessage('held');
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, workerData.holdMs);
      db.exec('commit');
      db.close();`,
      { eval: true, workerData: { driver: createRequire(import.meta.url).resolve('better-sqlite3'), file, holdMs } },
    );
    await new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject));
    return worker;
  }

  it('waits for the other writer (SQLite answers the change to WAL with SQLITE_BUSY at once), then opens', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-open-'));
    const worker = await holdNewFile(sqlitePath({ dataDir }), 400);
    try {
      const started = performance.now();
      const store = openStore({ databaseUrl: null, dataDir, dbTimeoutMs: 3000, dbPoolSize: 1 });
      const ms = performance.now() - started;
      try {
        assert.ok(ms < 2500, `opened after ${ms.toFixed(0)} ms`);
        // It waited for the other writer: what that one committed is there.
        assert.equal((await sql<{ n: number }>`select count(*) as n from sqlite_master where name = 'first_writer'`.execute(store.db)).rows[0]!.n, 1);
        await store.migrate();
        assert.equal((await sql<{ journal_mode: string }>`pragma journal_mode`.execute(store.db)).rows[0]!.journal_mode, 'wal');
      } finally {
        await store.close();
      }
    } finally {
      await worker.terminate();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('gives up as the store being busy after its timeout', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-open-'));
    const worker = await holdNewFile(sqlitePath({ dataDir }), 3000);
    try {
      const started = performance.now();
      assert.throws(() => openStore({ databaseUrl: null, dataDir, dbTimeoutMs: 500, dbPoolSize: 1 }), (err: { code?: string }) => err.code === 'SQLITE_BUSY');
      const ms = performance.now() - started;
      assert.ok(ms >= 450 && ms < 2500, `gave up after ${ms.toFixed(0)} ms`);
    } finally {
      await worker.terminate();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('SQLite writing connection, after SQLite ended a transaction itself', () => {
  it('throws the error that ended it, not the failed rollback after it', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-writer-'));
    const store = openStore({ databaseUrl: null, dataDir, dbTimeoutMs: 1500, dbPoolSize: 1 });
    try {
      await store.migrate();
      const cause = new Error('database or disk is full');
      // As SQLite does on SQLITE_FULL: the transaction is over before the error reaches Kysely.
      const outcome = store.db.transaction().execute(async (trx) => {
        await sql`rollback`.execute(trx);
        throw cause;
      });
      await assert.rejects(outcome, (err) => err === cause);
      // The connection is usable afterwards.
      await store.db.transaction().execute(async (trx) => sql`select 1`.execute(trx));
    } finally {
      await store.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('SQLite writing connection, while another connection writes', () => {
  let dataDir: string;
  let store: Store;
  let other: SQLite.Database;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-writer-'));
    store = openStore({ databaseUrl: null, dataDir, dbTimeoutMs: 1500, dbPoolSize: 1 });
    await store.migrate();
    other = new SQLite(sqlitePath({ dataDir }));
  });
  after(async () => {
    other.close();
    await store.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** Runs `write` on the store while `other` holds the write lock for `holdMs`; counts the timer ticks meanwhile. */
  async function whileLocked(holdMs: number, write: () => Promise<unknown>): Promise<{ result: PromiseSettledResult<unknown>; ticks: number; ms: number }> {
    other.exec('begin immediate');
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    const release = setTimeout(() => other.exec('commit'), holdMs);
    const started = performance.now();
    const [result] = await Promise.allSettled([write()]);
    const ms = performance.now() - started;
    clearInterval(ticker);
    clearTimeout(release);
    if (other.inTransaction) other.exec('commit');
    return { result: result, ticks, ms };
  }

  it('waits its turn for a transaction without blocking the event loop', async () => {
    const { result, ticks, ms } = await whileLocked(300, () =>
      store.db.transaction().execute((trx) => trx.insertInto('usage_queue').values({ id: 'waited' }).execute()),
    );
    assert.equal(result.status, 'fulfilled', String((result as PromiseRejectedResult).reason));
    assert.ok(ms >= 250, `did not wait: ${ms} ms`);
    assert.ok(ticks >= 10, `the event loop stood still while waiting (${ticks} ticks in ${ms.toFixed(0)} ms)`);
  });

  it('waits its turn for a single write statement too', async () => {
    const { result, ticks } = await whileLocked(300, () => store.db.deleteFrom('usage_queue').where('id', '=', 'waited').execute());
    assert.equal(result.status, 'fulfilled', String((result as PromiseRejectedResult).reason));
    assert.ok(ticks >= 10, `the event loop stood still while waiting (${ticks} ticks)`);
  });

  it('reads at once in a read-only transaction, one snapshot, taking no lock', async () => {
    await store.db.insertInto('usage_queue').values({ id: 'seen' }).execute();
    const { result, ms } = await whileLocked(3000, () =>
      store.db
        .transaction()
        .setAccessMode('read only')
        .execute(async (trx) => {
          const first = await trx.selectFrom('usage_queue').select('id').execute();
          // The other connection writes and commits while the transaction reads: not in its snapshot.
          other.exec("insert into usage_queue (id) values ('meanwhile'); commit");
          const second = await trx.selectFrom('usage_queue').select('id').execute();
          return [first.length, second.length];
        }),
    );
    assert.equal(result.status, 'fulfilled', String((result as PromiseRejectedResult).reason));
    assert.ok(ms < 1000, `waited for the write lock: ${ms} ms`);
    const [first, second] = (result as PromiseFulfilledResult<number[]>).value;
    assert.equal(second, first);
    assert.equal((await store.db.selectFrom('usage_queue').select('id').execute()).length, first! + 1);
    await store.db.deleteFrom('usage_queue').where('id', 'in', ['seen', 'meanwhile']).execute();
  });

  it('gives up after the store timeout, as the store being busy', async () => {
    const { result, ticks, ms } = await whileLocked(5000, () => store.db.transaction().execute((trx) => trx.insertInto('usage_queue').values({ id: 'late' }).execute()));
    assert.equal(result.status, 'rejected');
    assert.equal(((result).reason as { code?: string }).code, 'SQLITE_BUSY');
    assert.ok(ms >= 1490 && ms < 4000, `gave up after ${ms} ms`);
    assert.ok(ticks >= 50, `the event loop stood still while waiting (${ticks} ticks)`);
    assert.equal((await store.db.selectFrom('usage_queue').select('id').where('id', '=', 'late').execute()).length, 0);
  });
});

describe('SQLite store where the file cannot keep a write-ahead log', () => {
  it('refuses to open with a configuration error naming the data directory (readers would block the writer)', () => {
    // An in-memory database answers the change to WAL as a file system without shared memory does: with the journal it keeps.
    const database = new SQLite(':memory:');
    try {
      assert.throws(() => useWal(database, 1000, 'SCHOOL_DATA_DIR'), (error: Error) => error instanceof ConfigError && /^SCHOOL_DATA_DIR: SQLite cannot keep its write-ahead log .*journal stayed "memory"/.test(error.message));
    } finally {
      database.close();
    }
  });
});
