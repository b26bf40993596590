/**
 * The key lookup (src/access/lookup.ts). On SQLite a key found is read again only once
 * something has committed to the file, and a hash that is no key is read once per turn:
 * a key revoked by another connection, of this process or another, is seen revoked from
 * the next turn on. On PostgreSQL a lookup never joins a statement sent before it.
 */
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { hashKey } from '../../src/access/keys.js';
import { KeyFinder, type KeyRow } from '../../src/access/lookup.js';
import { sqlitePath } from '../../src/db/index.js';
import type { SqliteReader } from '../../src/db/reader.js';
import { revokeKey } from '../../src/management/keys.js';
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
});
