/**
 * The per-key request log between requests and the store: the recorder keeps each key's
 * last 100 requests until its write, and a write that fails keeps them, ahead of the
 * requests logged meanwhile. On the real store (SQLite, or PostgreSQL when DATABASE_URL
 * is set); the write is made to fail by moving the log's table away. Only on PostgreSQL
 * does the write wait for the server, so only there are requests logged while it fails.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pino from 'pino';
import { UsageRecorder } from '../../src/access/usage.js';
import { keyRequests } from '../../src/management/key-activity.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { seedWorld, type World } from '../helpers/world.js';

describe('the request log on its way to the store', () => {
  let store: TestStore;
  let w: World;
  const t0 = Date.parse('2026-11-20T10:00:00Z');

  before(async () => {
    store = await createTestStore();
    w = await seedWorld(store.db);
  });
  after(async () => {
    await store.close();
  });

  /** Logs requests number `from` to `to` of school A's key, one millisecond apart. */
  function logRange(recorder: UsageRecorder, from: number, to: number): void {
    for (let n = from; n <= to; n++) {
      recorder.logRequest({
        keyId: w.a.keyId, at: t0 + n, method: 'GET', target: `/api/public/v1/students?n=${n}`, status: n % 7 === 0 ? 429 : 200,
        requestId: `req-${String(n).padStart(4, '0')}`, address: '192.0.2.7', durationMs: n / 10,
      });
    }
  }

  async function loggedNumbers(): Promise<number[]> {
    const entries = await keyRequests(store.db, w.a.id, w.a.keyId);
    return entries.map((e) => Number(new URL(e.target, 'https://x').searchParams.get('n'))).sort((a, b) => a - b);
  }

  const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

  it('writes the last 100 requests of a key, each as it was logged', async () => {
    const recorder = new UsageRecorder(store.db, pino({ level: 'silent' }), 60_000);
    try {
      logRange(recorder, 1, 150);
      await recorder.flush();
      assert.deepEqual(await loggedNumbers(), range(51, 150));
      const [entry] = await keyRequests(store.db, w.a.id, w.a.keyId);
      assert.deepEqual(entry, {
        at: '2026-11-20T10:00:00Z', method: 'GET', target: '/api/public/v1/students?n=150', status: 200,
        request_id: 'req-0150', address: '192.0.2.7', duration_ms: 15,
      });
    } finally {
      await recorder.close();
    }
  });

  it('writes each field as it was logged, oldest first, a key value in the target masked', async () => {
    const recorder = new UsageRecorder(store.db, pino({ level: 'silent' }), 60_000);
    const keyId = 'fields-key';
    const target = '/api/public/v1/students?api_key=service_pk_0123456789abcdef&q="a\\b"\t&name=Ärger\u00ff';
    try {
      recorder.logRequest({ keyId, at: t0 + 0.4, method: 'HEAD', target, status: 304, requestId: 'req-"quoted"', address: '2001:db8::1', durationMs: 0.26 });
      recorder.logRequest({ keyId, at: t0 + 5, method: 'GET', target: '/api/public/v1/leads', status: 200, requestId: 'req-second', address: '192.0.2.7', durationMs: 12 });
      await recorder.flush();
      const rows = await store.db.selectFrom('key_requests').selectAll().where('key_id', '=', keyId).orderBy('slot').execute();
      assert.deepEqual(rows.map((r) => ({ ...r, at_ms: Number(r.at_ms), slot: Number(r.slot), status: Number(r.status), duration_ms: Number(r.duration_ms) })), [
        {
          key_id: keyId, slot: 0, request_id: 'req-"quoted"', at_ms: t0, method: 'HEAD',
          target: '/api/public/v1/students?api_key=[redacted-key]&q="a\\b"\t&name=Ärger\u00ff', status: 304, address: '2001:db8::1', duration_ms: 0.3,
        },
        { key_id: keyId, slot: 1, request_id: 'req-second', at_ms: t0 + 5, method: 'GET', target: '/api/public/v1/leads', status: 200, address: '192.0.2.7', duration_ms: 12 },
      ]);
    } finally {
      await recorder.close();
    }
  });

  it('keeps writing a key\'s log past two billion requests (its count of requests wraps, its slots go on)', async () => {
    // Logs that have had 2^31 - 30 requests written (PostgreSQL's integer ends 30 later), and
    // 10^9 - 30 (the count wraps to 0 30 later): each log's next slot is its count modulo 100.
    for (const [keyId, count, firstSlot] of [['busy-key', 2 ** 31 - 30, 18], ['wrapping-key', 1e9 - 30, 70]] as const) {
      const recorder = new UsageRecorder(store.db, pino({ level: 'silent' }), 60_000);
      const log = (from: number, to: number) => {
        for (let n = from; n <= to; n++) recorder.logRequest({ keyId, at: t0 + n, method: 'GET', target: `/api/public/v1/leads?n=${n}`, status: 200, requestId: `req-${n}`, address: '192.0.2.7', durationMs: 1 });
      };
      await store.db.insertInto('key_request_next').values({ key_id: keyId, next: count }).execute();
      log(1, 60);
      await recorder.flush();
      log(61, 100);
      // A close writes the log at once (a flush writes it at most every few seconds).
      await recorder.close();
      const rows = await store.db.selectFrom('key_requests').select(['slot', 'request_id']).where('key_id', '=', keyId).execute();
      assert.equal(rows.length, 100, keyId);
      const slotOf = new Map(rows.map((r) => [r.request_id, Number(r.slot)]));
      // Request n goes in the slot after request n - 1's, round the ring.
      for (let n = 1; n <= 100; n++) assert.equal(slotOf.get(`req-${n}`), (firstSlot + n - 1) % 100, `${keyId}: req-${n}`);
    }
  });

  it('a failed write is retried before what came after it, and only the newest 100 are kept', async () => {
    const recorder = new UsageRecorder(store.db, pino({ level: 'silent' }), 60_000);
    try {
      await sql`alter table key_requests rename to key_requests_away`.execute(store.db);
      try {
        logRange(recorder, 301, 380);
        const failing = recorder.flush();
        // On PostgreSQL the write waits for the server by now: these are logged while it fails.
        await new Promise((r) => setImmediate(r));
        logRange(recorder, 381, 410);
        await failing;
      } finally {
        await sql`alter table key_requests_away rename to key_requests`.execute(store.db);
      }
      await recorder.close();
      assert.deepEqual(await loggedNumbers(), range(311, 410));
    } finally {
      await recorder.close();
    }
  });

  it("writes many keys' logs in pieces, letting the event loop turn between them", async () => {
    const recorder = new UsageRecorder(store.db, pino({ level: 'silent' }), 60_000);
    const keys = Array.from({ length: 12 }, (_, k) => `piece-key-${k}`);
    try {
      for (const keyId of keys) {
        for (let n = 0; n < 100; n++) {
          recorder.logRequest({ keyId, at: t0 + n, method: 'GET', target: `/api/public/v1/students?n=${n}`, status: 200, requestId: `${keyId}-${n}`, address: '192.0.2.7', durationMs: 1 });
        }
      }
      let done = false;
      let turns = 0;
      const count = () => {
        if (done) return;
        turns += 1;
        setImmediate(count);
      };
      setImmediate(count);
      await recorder.flush().finally(() => (done = true));
      // 1,200 rows: at least three pieces, and a turn before each after the first.
      assert.ok(turns >= 2, `the flush held the event loop for all its pieces (${turns} turns)`);
      const written = await store.db
        .selectFrom('key_requests')
        .select(['key_id', (eb) => eb.fn.countAll().as('n')])
        .where('key_id', 'in', keys)
        .groupBy('key_id')
        .execute();
      assert.deepEqual(new Map(written.map((r) => [r.key_id, Number(r.n)])), new Map(keys.map((k) => [k, 100])));
    } finally {
      await recorder.close();
    }
  });
});
