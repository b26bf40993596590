/**
 * The key lookup (src/access/lookup.ts). On SQLite a key found is read again only once
 * something has committed to the file, and a hash that is no key is read once per turn:
 * a key revoked by another connection, of this process or another, is seen revoked from
 * the next turn on. On PostgreSQL a lookup never joins a statement sent before it, and a key
 * found is kept while the store's key watch (src/db/watch.ts) trusts it: a change announced,
 * the watch's connection lost or a revoke's barrier each end that, and a revoke returns only
 * once every watch has dropped what it kept (or its lease has run out).
 */
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import pg from 'pg';
import { hashKey } from '../../src/access/keys.js';
import { KeyFinder, type KeyRow } from '../../src/access/lookup.js';
import { announceKeyChanges, KeyWatch, sqlitePath } from '../../src/db/index.js';
import type { SqliteReader } from '../../src/db/reader.js';
import { createKey, revokeKey } from '../../src/management/keys.js';
import { runCli } from '../helpers/processes.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { seedWorld, type World } from '../helpers/world.js';

describe('the key lookup on SQLite', { skip: process.env.DATABASE_URL ? 'SQLite only' : false }, () => {
  let store: TestStore;
  let w: World;
  let reads = 0;

  before(async () => {
    store = await createTestStore();
    w = await seedWorld(store.db);
    // Counts the statements the read path runs (the store itself is the real one).
    const run = store.reads.run.bind(store.reads);
    store.reads.run = (text, parameters) => {
      reads += 1;
      return run(text, parameters);
    };
  });
  after(() => store.close());

  it('reads a key found once until something commits, and a hash that is no key once per turn', async () => {
    const keys = new KeyFinder(store.reads);
    const known = hashKey(w.a.key);
    const unknown = hashKey(`service_pk_${'0'.repeat(32)}`);
    await nextTurn();
    reads = 0;
    const first = keys.find(known) as KeyRow;
    assert.equal(first.keyId, w.a.keyId);
    assert.equal(keys.find(known), first);
    assert.equal(keys.find(unknown), undefined);
    assert.equal(keys.find(unknown), undefined);
    assert.equal((keys.find(hashKey(w.b.key)) as KeyRow).keyId, w.b.keyId);
    assert.equal(reads, 3);
    await nextTurn();
    assert.equal(keys.find(known), first, 'kept in the next turn: nothing committed');
    assert.equal(keys.find(unknown), undefined);
    assert.equal(reads, 4, 'only the unknown hash read again');
    // A commit of this process's own writing connection, to a row no key depends on.
    await store.db.updateTable('schools').set({ name: 'Renamed' }).where('id', '=', w.lone.id).execute();
    await nextTurn();
    assert.equal((keys.find(known) as KeyRow).keyId, w.a.keyId);
    assert.equal(reads, 5, 'read again after a commit');
  });

  it('sees a key revoked by another connection from the next turn on', async () => {
    const keys = new KeyFinder(store.reads);
    const hash = hashKey(w.lone.key);
    await nextTurn();
    assert.equal((keys.find(hash) as KeyRow).revokedAt, null);
    const other = new SQLite(sqlitePath({ dataDir: store.dataDir }));
    try {
      other.prepare('update api_keys set revoked_at = ? where id = ?').run(new Date().toISOString(), w.lone.keyId);
    } finally {
      other.close();
    }
    assert.equal((keys.find(hash) as KeyRow).revokedAt, null, 'the same snapshot within the turn');
    await nextTurn();
    assert.notEqual((keys.find(hash) as KeyRow).revokedAt, null);
  });

  it('never repeats a data version after the read connection is opened again', async () => {
    const reader = store.reads as SqliteReader;
    await nextTurn();
    const first = reader.dataVersion();
    await reader.close();
    await nextTurn();
    assert.ok(reader.dataVersion() > first);
  });

  it('sees a key revoked by another process from the next turn on', async () => {
    const keys = new KeyFinder(store.reads);
    const hash = hashKey(w.b.key);
    await nextTurn();
    assert.equal((keys.find(hash) as KeyRow).revokedAt, null);
    await nextTurn();
    assert.equal((keys.find(hash) as KeyRow).revokedAt, null, 'kept while nothing commits');
    const revoked = await runCli(['key', 'revoke', '--key', w.b.keyId], { ...process.env, SCHOOL_DATA_DIR: store.dataDir });
    assert.equal(revoked.code, 0, revoked.stderr);
    await nextTurn();
    assert.notEqual((keys.find(hash) as KeyRow).revokedAt, null);
  });
});

describe('the key lookup on PostgreSQL', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' }, () => {
  let store: TestStore;
  let w: World;
  /** While set, the rows of the statements sent are held back, after they ran, until released. */
  let holding: { released: Promise<void>; back(): void } | null = null;
  /**
   * Holds back, until `release()`, the rows of the statements sent from now until `holding`
   * is cleared; `came` resolves when the first of them has run.
   */
  const holdRows = () => {
    let release!: () => void;
    let back!: () => void;
    const came = new Promise<void>((resolve) => (back = resolve));
    holding = { released: new Promise((resolve) => (release = resolve)), back };
    return { release, came };
  };

  before(async () => {
    store = await createTestStore();
    w = await seedWorld(store.db);
    const run = store.reads.run.bind(store.reads);
    store.reads.run = <R>(text: string, parameters: readonly unknown[]) => {
      const held = holding;
      const rows = run<R>(text, parameters) as Promise<R[]>;
      if (!held) return rows;
      return rows.then(async (r) => {
        held.back();
        await held.released;
        return r;
      });
    };
  });
  after(() => store.close());

  it('never answers a lookup from a statement sent before it', async () => {
    const keys = new KeyFinder(store.reads);
    const hash = hashKey(w.lone.key);
    const { release, came } = holdRows();
    const earlier = keys.find(hash);
    await nextTurn();
    holding = null;
    // The first statement has read the key, and its rows are held back while the key is revoked.
    await came;
    await revokeKey(store.db, w.lone.keyId);
    const later = keys.find(hash);
    await nextTurn();
    release();
    assert.equal((await earlier)?.revokedAt, null, 'the request that started before the revocation');
    assert.notEqual((await later)?.revokedAt, null, 'a request that started after it is refused');
  });

  describe('with the key watch', () => {
    let watch: KeyWatch;
    let reads = 0;
    const counted = <T>(run: () => T): { value: T; reads: number } => {
      const before = reads;
      const value = run();
      return { value, reads: reads - before };
    };
    /** A new key of school A, its hash and id. */
    const newKey = async () => {
      const made = await createKey(store.db, w.a.id, 'watched');
      assert.ok(made.ok);
      return { hash: hashKey(made.value.key), id: made.value.id };
    };
    const until = async (what: string, done: () => boolean) => {
      for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(done(), what);
    };

    /**
     * Runs `body` while another connection holds key_watchers locked, 150 ms after taking the
     * lock: a watch renewing every 100 ms has a renewal waiting for it by then.
     */
    const whileLeasesLocked = async <T>(body: () => Promise<T>): Promise<T> => {
      const locker = new pg.Client({ connectionString: store.url! });
      await locker.connect();
      try {
        await locker.query('begin');
        await locker.query('lock table key_watchers in exclusive mode');
        await new Promise((r) => setTimeout(r, 150));
        return await body();
      } finally {
        await locker.query('rollback');
        await locker.end();
      }
    };

    before(async () => {
      watch = store.watchKeys({ leaseMs: 4000 })!;
      await watch.start();
      assert.ok(watch.trusted, 'the watch listens and holds a lease');
      const run = store.reads.run.bind(store.reads);
      store.reads.run = <R>(text: string, parameters: readonly unknown[]) => {
        reads += 1;
        return run<R>(text, parameters);
      };
    });
    after(() => watch.close());

    it('keeps a key it looked up, and looks it up again once a revoke returns', async () => {
      const keys = new KeyFinder(store.reads, watch);
      const { hash, id } = await newKey();
      const first = counted(() => keys.find(hash));
      assert.ok(first.value instanceof Promise);
      assert.equal((await first.value)?.keyId, id);
      await nextTurn();
      const kept = counted(() => keys.find(hash));
      assert.equal(kept.reads, 0, 'answered from what the finder kept');
      assert.equal((kept.value as KeyRow).keyId, id);
      await revokeKey(store.db, id);
      const after = keys.find(hash);
      assert.ok(after instanceof Promise, 'looked up again');
      assert.notEqual((await after)?.revokedAt, null);
    });

    it('does not keep what a lookup read while a change was announced', async () => {
      const keys = new KeyFinder(store.reads, watch);
      const { hash, id } = await newKey();
      const { release, came } = holdRows();
      const earlier = keys.find(hash);
      await nextTurn();
      holding = null;
      await came;
      // Revoked, and announced, while the lookup's rows are held back.
      await revokeKey(store.db, id);
      release();
      assert.equal((await earlier)?.revokedAt, null, 'the request that started before the revocation');
      const later = keys.find(hash);
      assert.ok(later instanceof Promise, 'its rows were not kept');
      assert.notEqual((await later)?.revokedAt, null);
    });

    it('hears a change made with SQL, whoever made it', async () => {
      const { id } = await newKey();
      const generation = watch.generation;
      await store.db.updateTable('api_keys').set({ scopes: 'students' }).where('id', '=', id).execute();
      await until('the trigger announced it', () => watch.generation > generation);
      await announceKeyChanges(store.db);
    });

    it('keeps nothing once its connection is lost, and keeps again once it listens again', async () => {
      const keys = new KeyFinder(store.reads, watch);
      const { hash } = await newKey();
      await keys.find(hash);
      await nextTurn();
      assert.ok(!(keys.find(hash) instanceof Promise));
      const name = watch.name;
      await sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${name}`.execute(store.db);
      await until('the watch saw its connection go', () => !watch.trusted);
      assert.ok(keys.find(hash) instanceof Promise, 'looked up again');
      await until('the watch listens again', () => watch.trusted);
      await keys.find(hash);
      await nextTurn();
      assert.ok(!(keys.find(hash) instanceof Promise), 'kept again');
    });

    it('sends its statements one at a time: a barrier heard while it renews its lease is acknowledged after the renewal', async () => {
      // A watch of its own, whose connection counts the statements running on it (pg 9
      // refuses a query sent while another runs on the same client).
      let running = 0;
      let most = 0;
      const counting = new KeyWatch({
        leaseMs: 400,
        client: (name) => {
          const client = new pg.Client({ connectionString: store.url!, application_name: name });
          const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
          client.query = ((...args: unknown[]) => {
            running += 1;
            most = Math.max(most, running);
            const done = () => {
              running -= 1;
            };
            const result = query(...args);
            result.then(done, done);
            return result;
          }) as typeof client.query;
          return client;
        },
      });
      await counting.start();
      try {
        // A barrier arrives while its renewal waits for the lock.
        const { announced } = await whileLeasesLocked(async () => {
          const announced = announceKeyChanges(store.db);
          await new Promise((r) => setTimeout(r, 150));
          return { announced };
        });
        await announced;
      } finally {
        await counting.close();
      }
      assert.equal(most, 1, 'never two statements at once on the watch connection');
    });

    it('closes without an error when its connection is lost as it closes (its lease runs out by itself)', async () => {
      const closing = new KeyWatch({ leaseMs: 400, client: (name) => new pg.Client({ connectionString: store.url!, application_name: name }) });
      await closing.start();
      // The close's statement waits behind the renewal, which waits for the lock.
      await whileLeasesLocked(async () => {
        const closed = closing.close();
        await sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${closing.name}`.execute(store.db);
        await closed;
      });
    });

    it('closed while it starts, holds no lease and no connection once both return', async () => {
      let closed: Promise<void> | undefined;
      const closing: KeyWatch = new KeyWatch({
        leaseMs: 400,
        client: (name) => {
          const client = new pg.Client({ connectionString: store.url!, application_name: name });
          const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
          // The server stops after the watch listens and before it takes its lease.
          client.query = ((...args: unknown[]) => {
            if (closed === undefined && String(args[0]).startsWith('delete from key_watchers where id')) closed = closing.close();
            return query(...args);
          }) as typeof client.query;
          return client;
        },
      });
      await closing.start();
      assert.ok(closed, 'closed while starting');
      await closed;
      assert.equal(closing.trusted, false);
      const id = closing.name.replace('school-data key watch ', '');
      await new Promise((r) => setTimeout(r, 300));
      const leases = await store.db.selectFrom('key_watchers').select('id').where('id', '=', id).execute();
      assert.deepEqual(leases, [], 'no lease left for writers to wait for');
      const open = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where application_name = ${closing.name}`.execute(store.db);
      assert.equal(open.rows[0]!.n, 0, 'its connection is closed');
    });

    it('closes within about a second when the database does not answer (a stopping server is not held up by a partition)', async () => {
      const closing = new KeyWatch({ leaseMs: 400, client: (name) => new pg.Client({ connectionString: store.url!, application_name: name }) });
      await closing.start();
      // Neither the renewal nor the close's statement is answered while the lock is held.
      const took = await whileLeasesLocked(async () => {
        const started = performance.now();
        await closing.close();
        return performance.now() - started;
      });
      assert.ok(took >= 900 && took < 3000, `closed after ${Math.round(took)} ms`);
      // Its connection was dropped: the backend ends once it finds no client to answer.
      for (let i = 0; i < 100; i++) {
        const left = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where application_name = ${closing.name}`.execute(store.db);
        if (left.rows[0]!.n === 0) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.fail('its connection is still open 5 s after the close');
    });

    it('makes a revoke wait for a server that holds a lease and does not answer, no longer than its lease', async () => {
      const { id } = await newKey();
      // A server that took a lease of 1.5 s and died without giving it up.
      const dead = `dead-${id}`;
      await sql`insert into key_watchers (id, lease_until) values (${dead}, (extract(epoch from clock_timestamp()) * 1000)::bigint + 1500)`.execute(store.db);
      const started = performance.now();
      await revokeKey(store.db, id);
      const took = performance.now() - started;
      assert.ok(took >= 1400 && took < 4000, `waited ${Math.round(took)} ms`);
      const left = await store.db.selectFrom('key_watchers').select('id').where('id', '=', dead).where('lease_until', '>', sql<number>`(extract(epoch from clock_timestamp()) * 1000)::bigint`).execute();
      assert.deepEqual(left, []);
    });
  });
});
