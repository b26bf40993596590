/**
 * The usage counts between requests and the store, on the real store (SQLite, or PostgreSQL
 * when DATABASE_URL is set): one flush adds every key's requests to its counter and to its
 * requests of the day, and moves its last use forward, never back; once a stop begins no
 * periodic flush does, and the close writes what is pending without the hourly prune; while
 * an import holds SQLite's write lock, a flush is put off at once rather than holding the
 * connection.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import pino from 'pino';
import { UsageRecorder } from '../../src/access/usage.js';
import { sqlitePath } from '../../src/db/index.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { seedWorld, type World } from '../helpers/world.js';

describe('usage counts on their way to the store', () => {
  let store: TestStore;
  let w: World;

  before(async () => {
    store = await createTestStore();
    w = await seedWorld(store.db);
  });
  after(async () => {
    await store.close();
  });

  async function usageOf(keyId: string) {
    const key = await store.db.selectFrom('api_keys').select(['request_count', 'last_used_at']).where('id', '=', keyId).executeTakeFirstOrThrow();
    const days = await store.db.selectFrom('key_days').select(['day', 'requests']).where('key_id', '=', keyId).execute();
    // The requests of all its days: a run that crosses midnight (UTC) counts on two.
    return { count: Number(key.request_count), lastUsedAt: key.last_used_at, inDays: days.reduce((sum, d) => sum + Number(d.requests), 0) };
  }

  /** Counts `n` requests of each key given, then flushes once. */
  async function recordAndFlush(requests: Record<string, number>): Promise<void> {
    const recorder = new UsageRecorder(store.db, pino({ level: 'silent' }), 60_000);
    try {
      for (const [keyId, n] of Object.entries(requests)) for (let i = 0; i < n; i++) recorder.record(keyId);
      await recorder.flush();
    } finally {
      await recorder.close();
    }
  }

  it('adds each key\'s requests of one flush to its own counter and days, and sets its last use', async () => {
    const [a0, b0, lone0] = await Promise.all([usageOf(w.a.keyId), usageOf(w.b.keyId), usageOf(w.lone.keyId)]);
    const started = new Date().toISOString().slice(0, 19) + 'Z';
    await recordAndFlush({ [w.a.keyId]: 3, [w.b.keyId]: 2 });
    const [a, b, lone] = await Promise.all([usageOf(w.a.keyId), usageOf(w.b.keyId), usageOf(w.lone.keyId)]);
    assert.equal(a.count, a0.count + 3);
    assert.equal(b.count, b0.count + 2);
    assert.equal(a.inDays, a0.inDays + 3);
    assert.equal(b.inDays, b0.inDays + 2);
    assert.ok(a.lastUsedAt !== null && a.lastUsedAt >= started, `last use ${a.lastUsedAt} is this flush's`);
    assert.ok(b.lastUsedAt !== null && b.lastUsedAt >= started);
    assert.deepEqual(lone, lone0, 'a key without requests is left alone');

    await recordAndFlush({ [w.a.keyId]: 1 });
    const again = await usageOf(w.a.keyId);
    assert.equal(again.count, a.count + 1, 'a second flush adds to the first');
    assert.equal(again.inDays, a.inDays + 1);
  });

  it('never moves a last use back (a batch applied late may be older than one applied before it)', async () => {
    const later = '2999-01-01T00:00:00Z';
    await store.db.updateTable('api_keys').set({ last_used_at: later }).where('id', '=', w.b.keyId).execute();
    const before = await usageOf(w.b.keyId);
    await recordAndFlush({ [w.b.keyId]: 1 });
    const after = await usageOf(w.b.keyId);
    assert.equal(after.lastUsedAt, later);
    assert.equal(after.count, before.count + 1);
  });

  it('begins no periodic flush once the stop has begun; the close writes what is pending, and leaves the hourly prune to the flushes', async () => {
    const old = { key_id: w.lone.keyId, day: '2000-01-01', requests: 1 };
    await store.db.insertInto('key_days').values(old).execute();
    const oldDays = () => store.db.selectFrom('key_days').select('day').where('key_id', '=', w.lone.keyId).where('day', '=', old.day).execute();
    const before = await usageOf(w.a.keyId);

    const recorder = new UsageRecorder(store.db, pino({ level: 'silent' }), 20);
    recorder.record(w.a.keyId);
    recorder.record(w.a.keyId);
    recorder.stopFlushing();
    await new Promise((r) => setTimeout(r, 200));
    assert.equal((await usageOf(w.a.keyId)).count, before.count, 'a periodic flush ran after the stop began');
    await recorder.close();
    assert.equal((await usageOf(w.a.keyId)).count, before.count + 2);
    assert.equal((await oldDays()).length, 1, 'the close pruned');

    // A periodic flush prunes the days past those kept.
    const next = new UsageRecorder(store.db, pino({ level: 'silent' }), 60_000);
    try {
      await next.flush();
      assert.equal((await oldDays()).length, 0);
    } finally {
      await next.close();
    }
  });

  it('puts a flush off at once while another process holds SQLite\'s write lock, the connection free for others, and writes it after', { skip: process.env.DATABASE_URL ? 'SQLite only: PostgreSQL has no file lock' : false }, async () => {
    const before = await usageOf(w.a.keyId);
    const lines: string[] = [];
    const recorder = new UsageRecorder(store.db, pino({ level: 'debug' }, { write: (line: string) => lines.push(line) }), 60_000);
    // As an import's merge does, from another connection: the file's write lock, held.
    const importer = new SQLite(sqlitePath({ dataDir: store.dataDir }));
    importer.exec('begin immediate');
    try {
      recorder.record(w.a.keyId);
      const started = performance.now();
      // A page's read on the same connection, begun while the flush runs: not queued behind a wait.
      const [, read] = await Promise.all([recorder.flush(), store.db.selectFrom('schools').select('id').execute()]);
      assert.ok(read.length > 0);
      // Waiting for the lock would take the store's 3 s timeout.
      assert.ok(performance.now() - started < 1500, `the flush waited ${Math.round(performance.now() - started)} ms`);
      assert.deepEqual(await usageOf(w.a.keyId), before, 'nothing written while the lock is held');
      // Put off, not an outage: told at debug only (a lock held over a minute is told as a failing flush).
      assert.ok(lines.some((line) => line.includes('"level":20') && line.includes('usage flush put off')), lines.join(''));
      assert.ok(!lines.some((line) => /"level":(40|50|60)/.test(line)), lines.join(''));
    } finally {
      importer.exec('commit');
      importer.close();
    }
    await recorder.flush();
    assert.equal((await usageOf(w.a.keyId)).count, before.count + 1, 'the count written once the lock is free');
    await recorder.close();
  });
});
