/**
 * SIGKILL under load. Three real `serve` processes sharing PostgreSQL and Redis, one
 * killed in the middle of a load: no count is lost (usage waits in Redis, recorded with
 * each rate-limit check, until a live instance moves it), and none is counted twice (each
 * batch is applied once, also the one the killed instance had claimed). A request the
 * killed instance had counted but not answered yet is on the counter: at most one per
 * connection it held. On the embedded stores, a SIGKILL loses at most one flush interval.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { loadTls } from '../../src/tls.js';
import { httpsClient } from '../helpers/http.js';
import { startServe, startServes, type ServeProcess } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

const external = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);
/** Concurrent request loops per instance: the killed one can have counted at most this many unanswered requests. */
const LOOPS = 3;

async function vipKey(store: TestStore) {
  const s = await createSchool(store.db, { name: 'Kill', plan: 'VIP', id: `kill_${randomBytes(5).toString('hex')}` });
  assert.ok(s.ok);
  const k = await createKey(store.db, s.value.id, 'kill');
  assert.ok(k.ok);
  return k.value;
}

async function counter(store: TestStore, keyId: string): Promise<number> {
  const row = await store.db.selectFrom('api_keys').select('request_count').where('id', '=', keyId).executeTakeFirstOrThrow();
  return Number(row.request_count);
}

describe('one of three instances SIGKILLed under load', { skip: external ? false : 'needs DATABASE_URL and REDIS_URL' }, () => {
  let store: TestStore;
  let servers: ServeProcess[] = [];
  let clients: ReturnType<typeof httpsClient>[] = [];

  before(async () => {
    store = await createTestStore();
    const tls = await loadTls({ dataDir: store.dataDir, tlsCert: null, tlsKey: null });
    const env = { ...process.env, DATABASE_URL: store.url!, SCHOOL_DATA_DIR: store.dataDir, SCHOOL_DATA_RATE_LIMIT_VIP: '1000000', SCHOOL_DATA_USAGE_FLUSH_MS: '500', SCHOOL_DATA_LOG_LEVEL: 'warn' };
    const ports = [await freePort(), await freePort(), await freePort()];
    servers = await startServes(ports.map((port) => ({ ...env, PORT: String(port) })));
    clients = ports.map((port) => httpsClient(`https://127.0.0.1:${port}`, tls.cert));
  });
  after(async () => {
    for (const c of clients) c.close();
    for (const s of servers) if (s.child.exitCode === null) s.child.kill('SIGTERM');
    await Promise.all(servers.map((s) => s.exited.catch(() => 0)));
    await store.close();
  });

  it('the counter holds every answer the clients received, none twice', async () => {
    const created = await vipKey(store);
    let answered = 0;
    let stop = false;
    const unexpected: string[] = [];
    const loops = clients.flatMap((c, i) =>
      Array.from({ length: LOOPS }, async (_, j) => {
        while (!stop) {
          try {
            const res = await c.request(['/api/public/v1/students?limit=5', '/api/public/v1/vehicles', '/api/public/v1/nothing'][j]!, { key: created.key });
            if (res.status === 200 || res.status === 404) answered += 1;
            else unexpected.push(`${res.status} ${res.text.slice(0, 200)}`);
          } catch {
            // The killed instance: refused or reset, that request got no answer.
            if (i === 0) await new Promise((r) => setTimeout(r, 20));
          }
        }
      }),
    );
    // A random moment of the load, after every instance flushed at least once.
    await new Promise((r) => setTimeout(r, 1500 + Math.floor(Math.random() * 1500)));
    servers[0]!.child.kill('SIGKILL');
    await servers[0]!.exited;
    await new Promise((r) => setTimeout(r, 1000));
    stop = true;
    await Promise.all(loops);
    assert.deepEqual(unexpected, []);
    assert.ok(answered > 100, `only ${answered} answers`);

    // The batches the killed instance claimed are taken over once their lease ends (BATCH_LEASE_MS).
    const deadline = Date.now() + 30_000;
    let counted = await counter(store, created.id);
    while (counted < answered && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      counted = await counter(store, created.id);
    }
    // And nothing more arrives later (no batch applied twice).
    await new Promise((r) => setTimeout(r, 7000));
    counted = await counter(store, created.id);
    assert.ok(counted >= answered, `lost ${answered - counted} of ${answered} counts`);
    assert.ok(counted - answered <= LOOPS, `counted ${counted} for ${answered} answers: more than the killed instance's requests in flight`);
    const days = await store.db.selectFrom('key_days').select('requests').where('key_id', '=', created.id).execute();
    assert.equal(days.reduce((sum, d) => sum + Number(d.requests), 0), counted, 'the days add up to the counter');
  });
});

describe('SIGKILL on the embedded stores', { skip: process.env.DATABASE_URL ? 'the embedded stores only' : false }, () => {
  let store: TestStore;
  let server: ServeProcess;
  let client: ReturnType<typeof httpsClient>;

  before(async () => {
    store = await createTestStore();
    const port = await freePort();
    const tls = await loadTls({ dataDir: store.dataDir, tlsCert: null, tlsKey: null });
    const env: NodeJS.ProcessEnv = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, PORT: String(port), SCHOOL_DATA_USAGE_FLUSH_MS: '1000', SCHOOL_DATA_LOG_LEVEL: 'warn', SCHOOL_DATA_RATE_LIMIT_VIP: '1000000' };
    delete env.REDIS_URL;
    server = await startServe(env);
    client = httpsClient(`https://127.0.0.1:${port}`, tls.cert);
  });
  after(async () => {
    client.close();
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
    await store.close();
  });

  it('loses at most the counts of one flush interval', async () => {
    const created = await vipKey(store);
    let answered = 0;
    // Answers over a little more than two flush intervals, then the kill.
    const started = Date.now();
    const times: number[] = [];
    while (Date.now() - started < 2500) {
      const res = await client.request('/api/public/v1/vehicles', { key: created.key });
      assert.equal(res.status, 200);
      answered += 1;
      times.push(Date.now());
    }
    server.child.kill('SIGKILL');
    await server.exited;
    const counted = await counter(store, created.id);
    const lastSecond = times.filter((t) => t > times.at(-1)! - 1000 - 200).length;
    assert.ok(counted <= answered, `counted ${counted} of ${answered}`);
    assert.ok(answered - counted <= lastSecond, `lost ${answered - counted}, more than the ${lastSecond} answers of the last flush interval`);
  });
});
