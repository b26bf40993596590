/**
 * The bulk connection's loads (PostgreSQL's COPY): a load begun while an `exclusive` job
 * holds the connection never makes its writer wait; past what it holds in memory its rows
 * go to a spill file that no name in the file system points to, and every row arrives
 * once, the rows given while that file is being sent included; a load that cannot spill
 * fails at once, and the connection stays usable. A COPY that PostgreSQL stops taking (a
 * partition while rows are sent) fails once nothing was taken for its bound, the connection
 * dropped; a slow link is not such a COPY.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { LOAD_HELD_BYTES, openBulkConnection, registerBulk, type BulkConnection } from '../../src/db/bulk.js';
import { openStore, type Store } from '../../src/db/index.js';
import { FaultProxy } from '../helpers/faultproxy.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

/** The files this process holds open that were removed from their directory: spill files. */
function spillFiles(): string[] {
  if (!fs.existsSync('/proc/self/fd')) return [];
  const out: string[] = [];
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      const target = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (target.includes('school-data-load-')) out.push(target);
    } catch {
      // Closed meanwhile.
    }
  }
  return out;
}

describe('bulk connection: loads held behind an exclusive job', () => {
  let store: TestStore;
  let conn: BulkConnection;
  before(async () => {
    store = await createTestStore();
    conn = await openBulkConnection(store.db);
  });
  after(async () => {
    await conn.close();
    await store.close();
  });

  it('spills what it cannot hold, never waits, and sends every row once', async (t) => {
    if (conn.dialect !== 'postgres') {
      t.skip('PostgreSQL only: SQLite writes each row as it is given');
      return;
    }
    await conn.run(sql`create temp table spilled (idx integer primary key, body text not null)`.compile(conn.db));
    let release!: () => void;
    const holding = new Promise<void>((resolve) => (release = resolve));
    let jobDone = false;
    const job = conn.exclusive(async () => {
      await holding;
      await conn.run(sql`select 1`.compile(conn.db));
      jobDone = true;
    });
    const loader = conn.load('spilled', ['idx', 'body']);
    // Tabs, line breaks and backslashes too, so a row cut in two would not go unnoticed.
    const tail = `\tс табом\nи переводом \\ ${'x'.repeat(900)}`;
    const body = (i: number) => `строка ${i}${tail}`;
    let rows = 0;
    let waited = 0;
    while (rows * 1000 < 2 * LOAD_HELD_BYTES) {
      if (loader.write([rows, body(rows)]) !== undefined) waited += 1;
      rows += 1;
    }
    assert.equal(waited, 0, 'the writer never waits while the COPY waits for the job');
    assert.ok(spillFiles().length >= 1, 'a spill file is open');
    assert.ok(spillFiles().every((f) => f.endsWith('(deleted)')), 'and has no name left in the file system');
    release();
    // More rows while the spill file is sent: they join it.
    for (let i = 0; i < 5000; i++) {
      const wait = loader.write([rows, body(rows)]);
      rows += 1;
      if (wait) await wait;
    }
    await loader.end();
    await job;
    assert.ok(jobDone, 'the job ran before the COPY began');
    const { rows: counted } = await conn.run(sql`select count(*) as n, sum(idx) as s, count(*) filter (where body <> 'строка ' || idx || ${tail}) as bad from spilled`.compile(conn.db));
    assert.deepEqual(
      { n: Number(counted[0]!.n), s: Number(counted[0]!.s), bad: Number(counted[0]!.bad) },
      { n: rows, s: (rows * (rows - 1)) / 2, bad: 0 },
    );
    assert.deepEqual(spillFiles(), [], 'the spill file is closed');
  });

  it('fails a load whose rows cannot be spilled, and leaves the connection usable', async (t) => {
    if (conn.dialect !== 'postgres') {
      t.skip('PostgreSQL only: SQLite writes each row as it is given');
      return;
    }
    await conn.run(sql`create temp table unspilled (idx integer, body text)`.compile(conn.db));
    let release!: () => void;
    const holding = new Promise<void>((resolve) => (release = resolve));
    const job = conn.exclusive(() => holding);
    const loader = conn.load('unspilled', ['idx', 'body']);
    const tmp = process.env.TMPDIR;
    // os.tmpdir() reads TMPDIR each time: a directory that is not there.
    process.env.TMPDIR = path.join(os.tmpdir(), `school-data-missing-${process.pid}`, 'x');
    let thrown: unknown = null;
    try {
      for (let i = 0; i * 1000 < 2 * LOAD_HELD_BYTES; i++) {
        const wait = loader.write([i, 'y'.repeat(1000)]);
        if (wait) await wait;
      }
    } catch (err) {
      thrown = err;
    } finally {
      if (tmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = tmp;
    }
    assert.match(String(thrown), /ENOENT/);
    loader.abort();
    release();
    await job;
    await assert.rejects(loader.end());
    const { rows } = await conn.run(sql`select count(*) as n from unspilled`.compile(conn.db));
    assert.equal(Number(rows[0]!.n), 0, 'nothing of the load was written');
  });
});

describe('bulk connection: a COPY PostgreSQL stops taking', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only: SQLite has no connection to lose' }, () => {
  let direct: TestStore;
  let proxy: FaultProxy;
  let proxied: Store;
  let conn: BulkConnection;
  const body = 'x'.repeat(1000);
  before(async () => {
    direct = await createTestStore();
    let url: string;
    ({ proxy, url } = await FaultProxy.inFrontOf(direct.url!));
    proxied = openStore({ databaseUrl: url, dataDir: direct.dataDir, dbTimeoutMs: 3000, dbPoolSize: 1 });
    // The store's own bound is 30 s at least; the tests take it down to 3 s.
    registerBulk(proxied.db, { driver: pg, connection: { connectionString: url }, stallMs: 3000 });
    conn = await openBulkConnection(proxied.db);
  });
  after(async () => {
    await conn.close();
    await proxied.close();
    await proxy.close();
    await direct.close();
  });

  it('takes its time over a slow link, with rows held while an exclusive job ran sent once it ends', async () => {
    await conn.run(sql`create temp table held (idx integer primary key, body text not null)`.compile(conn.db));
    let release!: () => void;
    const holding = new Promise<void>((resolve) => (release = resolve));
    const job = conn.exclusive(() => holding);
    const loader = conn.load('held', ['idx', 'body']);
    for (let idx = 0; idx < 4000; idx++) assert.equal(loader.write([idx, body]), undefined, 'held without waiting');
    // Each piece 0.8 s late both ways: PostgreSQL's first answer to the COPY comes after 1.6 s.
    proxy.delayMs = 800;
    try {
      release();
      await job;
      await loader.end();
    } finally {
      proxy.delayMs = 0;
    }
    const { rows } = await conn.run(sql`select count(*)::int as n from held`.compile(conn.db));
    assert.deepEqual(rows, [{ n: 4000 }]);
  });

  it('fails the load once PostgreSQL has taken nothing for the bound, and drops the connection', async () => {
    await conn.run(sql`create temp table partitioned (idx integer primary key, body text not null)`.compile(conn.db));
    const loader = conn.load('partitioned', ['idx', 'body']);
    for (let idx = 0; idx < 1000; idx++) await loader.write([idx, body]);
    // A partition: the proxy holds every byte both ways and resets nothing. The rows
    // after it fill the sockets' buffers and what the load holds, so the writer waits.
    await proxy.setMode('blackhole');
    const silentAt = Date.now();
    let failure: unknown = null;
    try {
      for (let idx = 1000; idx < 200_000; idx++) await loader.write([idx, body]);
      await loader.end();
    } catch (error) {
      failure = error;
    }
    const seconds = (Date.now() - silentAt) / 1000;
    assert.ok(failure instanceof Error, 'the load failed');
    assert.match(failure.message, /PostgreSQL took nothing of a COPY for 3 s/);
    assert.equal((failure as { code?: string }).code, 'ETIMEDOUT');
    // The bound counts from the last piece taken, which may be a moment before the partition.
    assert.ok(seconds >= 2 && seconds < 10, `failed ${seconds} s after the database went silent`);
    await assert.rejects(conn.run(sql`select 1`.compile(conn.db)), 'the connection was dropped');
  });
});
