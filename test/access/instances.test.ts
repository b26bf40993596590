/**
 * Three real `serve` processes sharing PostgreSQL and Redis behave as one service:
 * one rate limit, immediate revocation everywhere, and exact request counters even
 * when every instance is stopped with SIGTERM in the middle of a load.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { randomBytes } from 'node:crypto';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { loadTls } from '../../src/tls.js';
import { httpsClient } from '../helpers/http.js';
import { runCli, startServes, type ServeProcess } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

const external = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);
const PROFI_LIMIT = 30;

describe('three instances on shared PostgreSQL and Redis', { skip: external ? false : 'needs DATABASE_URL and REDIS_URL' }, () => {
  let store: TestStore;
  let env: NodeJS.ProcessEnv;
  let servers: ServeProcess[] = [];
  let clients: ReturnType<typeof httpsClient>[] = [];

  async function school(plan: 'Profi' | 'VIP') {
    const s = await createSchool(store.db, { name: 'Multi', plan, id: `mi_${randomBytes(5).toString('hex')}` });
    assert.ok(s.ok);
    const k = await createKey(store.db, s.value.id, 'multi');
    assert.ok(k.ok);
    return k.value;
  }

  before(async () => {
    store = await createTestStore();
    const tls = await loadTls({ dataDir: store.dataDir, tlsCert: null, tlsKey: null });
    env = {
      ...process.env,
      DATABASE_URL: store.url!,
      SCHOOL_DATA_DIR: store.dataDir,
      SCHOOL_DATA_RATE_LIMIT_PROFI: String(PROFI_LIMIT),
      SCHOOL_DATA_RATE_LIMIT_VIP: '1000000',
      SCHOOL_DATA_USAGE_FLUSH_MS: '300',
      SCHOOL_DATA_LOG_LEVEL: 'warn',
    };
    const ports = [await freePort(), await freePort(), await freePort()];
    servers = await startServes(ports.map((port) => ({ ...env, PORT: String(port) })));
    clients = ports.map((port) => httpsClient(`https://127.0.0.1:${port}`, tls.cert));
  });

  after(async () => {
    for (const c of clients) c.close();
    for (const s of servers) if (s.child.exitCode === null) s.child.kill('SIGKILL');
    await store.close();
  });

  it('holds one limit across instances: N+1 requests spread over 3 give exactly one 429', async () => {
    const { key } = await school('Profi');
    const statuses: number[] = [];
    for (let i = 0; i <= PROFI_LIMIT; i++) {
      statuses.push((await clients[i % 3]!.request('/api/public/v1/students', { key })).status);
    }
    assert.equal(statuses.filter((s) => s === 429).length, 1);
    assert.equal(statuses.filter((s) => s === 200).length, PROFI_LIMIT);
    assert.equal(statuses.at(-1), 429);
  });

  it('a key revoked through the CLI gets 401 on the very next request on every instance', async () => {
    const created = await school('VIP');
    for (const c of clients) assert.equal((await c.request('/api/public/v1/students', { key: created.key })).status, 200);
    const revoked = await runCli(['key', 'revoke', '--key', created.id, '--json'], env);
    assert.equal(revoked.code, 0, revoked.stderr);
    for (const c of clients) assert.equal((await c.request('/api/public/v1/students', { key: created.key })).status, 401);
  });

  it('a key\'s options changed through the CLI take effect on the very next request on every instance', async () => {
    const s = await createSchool(store.db, { name: 'Options', plan: 'VIP', id: `mo_${randomBytes(5).toString('hex')}` });
    assert.ok(s.ok);
    const made = await runCli(['key', 'create', '--school', s.value.id, '--name', 'site', '--scopes', 'students,lessons', '--allow', '127.0.0.1,::1', '--json'], env);
    assert.equal(made.code, 0, made.stderr);
    const created = JSON.parse(made.stdout) as { id: string; key: string };
    for (const c of clients) {
      assert.equal((await c.request('/api/public/v1/students', { key: created.key })).status, 200);
      assert.equal((await c.request('/api/public/v1/payments', { key: created.key })).status, 403);
    }
    const moved = await runCli(['key', 'allow', '--key', created.id, '--allow', '203.0.113.0/24', '--json'], env);
    assert.equal(moved.code, 0, moved.stderr);
    for (const c of clients) {
      const res = await c.request('/api/public/v1/students', { key: created.key });
      assert.equal(res.status, 403);
      assert.equal((res.json() as { code: string }).code, 'address_not_allowed');
    }
    assert.equal((await runCli(['key', 'allow', '--key', created.id, '--any', '--json'], env)).code, 0);
    for (const c of clients) assert.equal((await c.request('/api/public/v1/students', { key: created.key })).status, 200);
    const rolled = await runCli(['key', 'roll', '--key', created.id, '--overlap', 'now', '--json'], env);
    assert.equal(rolled.code, 0, rolled.stderr);
    const fresh = JSON.parse(rolled.stdout) as { key: string };
    for (const c of clients) {
      assert.equal((await c.request('/api/public/v1/students', { key: created.key })).status, 401);
      assert.equal((await c.request('/api/public/v1/students', { key: fresh.key })).status, 200);
      assert.equal((await c.request('/api/public/v1/payments', { key: fresh.key })).status, 403);
    }
  });

  it('counts every answered request exactly, also when all instances get SIGTERM mid-load', async () => {
    const created = await school('VIP');
    let answered = 0;
    let stop = false;
    const load = clients.map(async (c) => {
      while (!stop) {
        try {
          const res = await c.request('/api/public/v1/students?limit=5', { key: created.key });
          if (res.status !== 200) throw new Error(`unexpected ${res.status}: ${res.text}`);
          answered += 1;
        } catch (err) {
          // Connection refused or reset once the instance has closed: that request was not made.
          if ((err as Error).message.startsWith('unexpected')) throw err;
          if (servers.every((s) => s.child.exitCode !== null)) return;
        }
      }
    });
    // Four loops per instance keep several requests in flight when the signal lands.
    const more = clients.flatMap((c) =>
      [1, 2, 3].map(async () => {
        while (!stop) {
          try {
            const res = await c.request('/api/public/v1/vehicles', { key: created.key });
            if (res.status === 200) answered += 1;
            else throw new Error(`unexpected ${res.status}`);
          } catch (err) {
            if ((err as Error).message.startsWith('unexpected')) throw err;
            if (servers.every((s) => s.child.exitCode !== null)) return;
          }
        }
      }),
    );
    await new Promise((r) => setTimeout(r, 1500));
    for (const s of servers) s.child.kill('SIGTERM');
    const codes = await Promise.all(servers.map((s) => s.exited));
    stop = true;
    await Promise.all([...load, ...more]);
    assert.deepEqual(codes, [0, 0, 0], servers.map((s) => s.output()).join('\n'));
    assert.ok(answered > 50, `only ${answered} requests answered`);
    const row = await store.db.selectFrom('api_keys').select('request_count').where('id', '=', created.id).executeTakeFirstOrThrow();
    assert.equal(Number(row.request_count), answered);
  });
});
