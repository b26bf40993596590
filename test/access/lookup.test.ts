/**
 * The key lookup (src/access/lookup.ts) on SQLite: a key asked for again in the same turn
 * of the event loop is the row already read in that turn's snapshot, and nothing is kept
 * past it: a key revoked by another connection is seen revoked from the next turn on.
 */
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { hashKey } from '../../src/access/keys.js';
import { KeyFinder, type KeyRow } from '../../src/access/lookup.js';
import { sqlitePath } from '../../src/db/index.js';
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

  it('reads a key once per turn, found or not', async () => {
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
    assert.equal((keys.find(known) as KeyRow).keyId, w.a.keyId);
    assert.equal(reads, 4, 'read again in the next turn');
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
});
