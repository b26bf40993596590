/**
 * SIGTERM under load on one real `serve` process with the embedded stores (SQLite and
 * the in-memory limiter): requests in flight finish, new connections are refused, no
 * kept-alive connection of the API or the cabinet is closed under a request (the drain: an
 * idle one is answered once more, saying `Connection: close`),
 * every answered request is on the key's counter (and nothing but requests made), and
 * the exit code is 0. (Three instances on PostgreSQL and Redis:
 * test/access/instances.test.ts.) On PostgreSQL, a process that has only read exits at
 * once too, not when its idle connections time out. With Redis, the close moves the
 * usage counted after a flush that was under way when it began.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { pino } from 'pino';
import { RedisRateLimiter } from '../../src/access/ratelimit/redis.js';
import { UsageRecorder } from '../../src/access/usage.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { loadTls } from '../../src/tls.js';
import { httpsClient } from '../helpers/http.js';
import { FaultProxy } from '../helpers/faultproxy.js';
import { pipelinedStatuses, unreadRefusal } from '../helpers/fuzz.js';
import { runCli, startServe, type ServeProcess } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { seedWorld } from '../helpers/world.js';

const embedded = !process.env.DATABASE_URL;
const external = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);

function connectable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A `serve` on the embedded stores (SQLite, the in-memory limiter) over `store`, with `env` added. */
async function startEmbedded(store: TestStore, env: NodeJS.ProcessEnv): Promise<{ server: ServeProcess; port: number; cabinetPort: number; ca: string }> {
  const port = await freePort();
  const cabinetPort = await freePort();
  const { cert } = await loadTls({ dataDir: store.dataDir, tlsCert: null, tlsKey: null });
  const full: NodeJS.ProcessEnv = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, PORT: String(port), SCHOOL_DATA_CABINET_PORT: String(cabinetPort), ...env };
  delete full.DATABASE_URL;
  delete full.REDIS_URL;
  return { server: await startServe(full), port, cabinetPort, ca: cert };
}

describe('SIGTERM under load, one process on SQLite', { skip: embedded ? false : 'the embedded stores only' }, () => {
  let store: TestStore;
  let server: ServeProcess;
  let port: number;
  let cabinetPort: number;
  const clients: ReturnType<typeof httpsClient>[] = [];
  let cabinet: ReturnType<typeof httpsClient>;

  before(async () => {
    store = await createTestStore();
    let ca: string;
    ({ server, port, cabinetPort, ca } = await startEmbedded(store, {
      SCHOOL_DATA_USAGE_FLUSH_MS: '300',
      SCHOOL_DATA_LOG_LEVEL: 'warn',
      // The load is about closing, not limits: a fast machine would use up the default 600/min.
      SCHOOL_DATA_RATE_LIMIT_VIP: '1000000',
    }));
    for (let i = 0; i < 3; i++) clients.push(httpsClient(`https://127.0.0.1:${port}`, ca));
    cabinet = httpsClient(`https://127.0.0.1:${cabinetPort}`, ca);
  });
  after(async () => {
    for (const c of clients) c.close();
    cabinet.close();
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
    await store.close();
  });

  it('finishes what is in flight, refuses new connections, counts every answer, exits 0', async () => {
    const school = await createSchool(store.db, { name: 'Term', plan: 'VIP', id: `term_${randomBytes(5).toString('hex')}` });
    assert.ok(school.ok);
    const key = await createKey(store.db, school.value.id, 'term');
    assert.ok(key.ok);

    let answered = 0;
    // Requests that got no answer: new connections refused once the server stopped listening.
    let unanswered = 0;
    // Requests sent on a kept-alive connection that the server then closed under them.
    const resets: string[] = [];
    let exited = false;
    const unexpected: string[] = [];
    // Three loops per client keep several requests in flight when the signal lands.
    const loop = async (c: ReturnType<typeof httpsClient>, path: string, counted: boolean) => {
      while (!exited) {
        try {
          const res = await c.request(path, { key: counted ? key.value.key : null, retryReset: false });
          if (res.status === 200) answered += counted ? 1 : 0;
          else unexpected.push(`${res.status} ${res.text.slice(0, 200)}`);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code !== 'ECONNREFUSED') resets.push(`${path}: ${String(code ?? err)}`);
          unanswered += counted ? 1 : 0;
          await new Promise((r) => setTimeout(r, 5));
        }
      }
    };
    const loops = [
      ...clients.flatMap((c) => ['/api/public/v1/students?limit=5', '/api/public/v1/vehicles', '/api/public/v1/lessons'].map((path) => loop(c, path, true))),
      // The director's cabinet, drained likewise.
      loop(cabinet, '/login', false),
      loop(cabinet, '/login', false),
    ];
    await new Promise((r) => setTimeout(r, 1500));
    server.child.kill('SIGTERM');
    const code = await server.exited;
    exited = true;
    await Promise.all(loops);

    assert.equal(code, 0, server.output());
    assert.deepEqual(unexpected, [], 'every request answered while closing was served normally');
    // The answers given while it drained said `Connection: close`: no connection was closed under a request.
    assert.deepEqual(resets, [], 'requests lost with their connection');
    assert.ok(answered > 50, `only ${answered} requests answered`);
    assert.equal(await connectable(port), false, 'the port refuses new connections');
    const row = await store.db.selectFrom('api_keys').select('request_count').where('id', '=', key.value.id).executeTakeFirstOrThrow();
    const counted = Number(row.request_count);
    assert.ok(counted >= answered && counted <= answered + unanswered, `the counter holds every answered request: ${counted} counted, ${answered} answered, ${unanswered} unanswered`);
  });
});

describe('SIGTERM with kept-alive connections idle, one process on SQLite', { skip: embedded ? false : 'the embedded stores only' }, () => {
  let store: TestStore;
  let server: ServeProcess;
  let port: number;
  let cabinetPort: number;
  let ca: string;

  before(async () => {
    store = await createTestStore();
    // At info, the server says when its stop begins.
    ({ server, port, cabinetPort, ca } = await startEmbedded(store, { SCHOOL_DATA_LOG_LEVEL: 'info' }));
  });
  after(async () => {
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
    await store.close();
  });

  it('answers a request sent on an idle kept-alive connection during the drain, saying Connection: close, on the API and the cabinet', async () => {
    const school = await createSchool(store.db, { name: 'Idle', plan: 'VIP', id: `idle_${randomBytes(5).toString('hex')}` });
    assert.ok(school.ok);
    const key = await createKey(store.db, school.value.id, 'idle');
    assert.ok(key.ok);
    const api = httpsClient(`https://127.0.0.1:${port}`, ca);
    const cabinet = httpsClient(`https://127.0.0.1:${cabinetPort}`, ca);
    // One request at a time on each: each goes on its client's one kept-alive connection; a reset is not sent again.
    const both = async () => [await api.request('/api/public/v1/vehicles', { key: key.value.key, retryReset: false }), await cabinet.request('/login', { retryReset: false })];
    try {
      const first = await both();
      for (const answer of first) {
        assert.equal(answer.status, 200);
        assert.notEqual(answer.headers.connection, 'close');
      }
      server.child.kill('SIGTERM');
      // The stop has begun: the listeners are closed, the two connections still open and idle.
      while (!server.output().includes('shutting down')) await new Promise((r) => setTimeout(r, 5));
      assert.equal(await connectable(port), false, 'the port refuses new connections');
      // http's own close would have closed them at once, and these requests would fail with their connection.
      const second = await both();
      for (const [i, answer] of second.entries()) {
        assert.equal(answer.status, 200);
        assert.equal(answer.localPort, first[i]!.localPort, 'the same kept-alive connection');
        assert.equal(answer.headers.connection, 'close', 'the client is told to go elsewhere');
      }
      assert.equal(await server.exited, 0, server.output());
    } finally {
      api.close();
      cabinet.close();
    }
  });
});

describe('SIGTERM with connections closing, one process on SQLite', { skip: embedded ? false : 'the embedded stores only' }, () => {
  it('lets a closing connection be read to its end, and closes one whose client reads none of its answers', async () => {
    const store = await createTestStore();
    const { server, port, ca } = await startEmbedded(store, { SCHOOL_DATA_LOG_LEVEL: 'warn' });
    const origin = `https://127.0.0.1:${port}`;
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    let stuck: { stop: () => void } | undefined;
    try {
      // Its refusal waits for a client that reads nothing.
      stuck = await unreadRefusal(port, ca);
      await sleep(100);
      // Answered at once and closed by the server (the client said so), read only after the drain's
      // 1 s, while the client goes on sending: lingering, it is read to its end.
      const late = pipelinedStatuses(origin, ca, 'GET /api/public/v1/students HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n', { readAfterMs: 1600, trickle: 'x'.repeat(512) });
      await sleep(100);
      const signalled = Date.now();
      server.child.kill('SIGTERM');
      assert.deepEqual(await late, [401], 'the closing connection was not read to its end');
      assert.equal(await server.exited, 0, server.output());
      // The stuck connection is closed at the drain's end, not at its idle timeout (30 s).
      assert.ok(Date.now() - signalled < 10_000, `stopped ${Date.now() - signalled} ms after the signal`);
    } finally {
      stuck?.stop();
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
      await store.close();
    }
  });
});

describe('SIGTERM with answers no client reads, one process on SQLite', { skip: embedded ? false : 'the embedded stores only' }, () => {
  it('is not held by a connection whose client reads none of its answers (closed with the idle ones, not at its idle timeout)', async () => {
    const store = await createTestStore();
    const { server, port, ca } = await startEmbedded(store, { SCHOOL_DATA_LOG_LEVEL: 'warn' });
    const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
    socket.on('error', () => undefined);
    try {
      await once(socket, 'secureConnect');
      // Answers it never reads (more than the sockets' buffers hold), and nothing more sent.
      socket.pause();
      socket.write('GET /api/public/v1/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'.repeat(300));
      await new Promise((resolve) => setTimeout(resolve, 500));
      const signalled = Date.now();
      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0, server.output());
      // Its answers are all made, so Node counts it idle once the drain is over; its idle timeout is 30 s.
      assert.ok(Date.now() - signalled < 8_000, `stopped ${Date.now() - signalled} ms after the signal`);
    } finally {
      socket.destroy();
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
      await store.close();
    }
  });
});

describe('SIGTERM after reads only, one process on PostgreSQL', { skip: embedded ? 'PostgreSQL only' : false }, () => {
  let store: TestStore;
  let server: ServeProcess;
  let port: number;

  before(async () => {
    store = await createTestStore();
    port = await freePort();
    server = await startServe({ ...process.env, DATABASE_URL: store.url!, SCHOOL_DATA_DIR: store.dataDir, PORT: String(port), SCHOOL_DATA_LOG_LEVEL: 'warn' });
  });
  after(async () => {
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
    await store.close();
  });

  it('exits at once, without waiting for its idle database connections to time out', async () => {
    const tls = await loadTls({ dataDir: store.dataDir, tlsCert: null, tlsKey: null });
    const client = httpsClient(`https://127.0.0.1:${port}`, tls.cert);
    try {
      // An unknown key: the key lookup is the only query, and nothing is written.
      const res = await client.request('/api/public/v1/students', { key: `service_pk_${'0'.repeat(32)}` });
      assert.equal(res.status, 401);
    } finally {
      client.close();
    }
    server.child.kill('SIGTERM');
    // The pool's idle timeout is 30 s; a clean close takes well under a second.
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([server.exited, new Promise((r) => (timer = setTimeout(r, 10_000, 'still running')))]);
    clearTimeout(timer);
    assert.equal(code, 0, server.output());
  });
});

describe('stopping while PostgreSQL does not answer (a partition)', { skip: embedded ? 'PostgreSQL only' : false }, () => {
  let store: TestStore;
  let proxy: FaultProxy;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    store = await createTestStore();
    let url: string;
    ({ proxy, url } = await FaultProxy.inFrontOf(store.url!));
    env = { ...process.env, DATABASE_URL: url, SCHOOL_DATA_DIR: store.dataDir, SCHOOL_DATA_DB_TIMEOUT_MS: '1000', SCHOOL_DATA_LOG_LEVEL: 'warn' };
    delete env.REDIS_URL;
  });
  after(async () => {
    await proxy.setMode('forward');
    await proxy.close();
    await store.close();
  });

  /** The exit code, or 'still running' after `ms` (the process is then killed). */
  const exitWithin = async (server: ServeProcess, ms: number) => {
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([server.exited, new Promise((r) => (timer = setTimeout(r, ms, 'still running')))]);
    clearTimeout(timer);
    if (code === 'still running') server.child.kill('SIGKILL');
    return code;
  };

  it('a server exits within seconds, its connections to the silent database dropped', async () => {
    // No periodic flush before the stop: what the close itself does is what is tested.
    const server = await startServe({ ...env, PORT: String(await freePort()), SCHOOL_DATA_USAGE_FLUSH_MS: '5000' });
    // Its pool and its key watch hold connections by now; then the database goes silent.
    await new Promise((r) => setTimeout(r, 500));
    await proxy.setMode('blackhole');
    try {
      server.child.kill('SIGTERM');
      // pg waits for the server to close its side of each connection, which it never does.
      assert.equal(await exitWithin(server, 10_000), 0, server.output());
      // Nothing was counted: the close has nothing to write (the hourly prune is not its work), so it does not wait on the store.
      assert.doesNotMatch(server.output(), /usage flush failing|could not be written/);
    } finally {
      await proxy.setMode('forward');
    }
  });

  it('with usage counts to write, a server tries for some seconds, says which it could not write, and exits', async () => {
    const w = await seedWorld(store.db);
    const port = await freePort();
    // The default database timeout: five tries of the usage at 3 s and more each took 22 s in all.
    const server = await startServe({ ...env, PORT: String(port), SCHOOL_DATA_DB_TIMEOUT_MS: '3000' });
    const tls = await loadTls({ dataDir: store.dataDir, tlsCert: null, tlsKey: null });
    const client = httpsClient(`https://127.0.0.1:${port}`, tls.cert);
    try {
      assert.equal((await client.request('/api/public/v1/vehicles', { key: w.a.key })).status, 200);
      await proxy.setMode('blackhole');
      // A stored answer of a key the server keeps is served while the database is silent, and
      // counted: a count no flush can write.
      assert.equal((await client.request('/api/public/v1/vehicles', { key: w.a.key })).status, 200);
    } finally {
      client.close();
    }
    try {
      const started = Date.now();
      server.child.kill('SIGTERM');
      // No try to write them begins 8 s after the stop; each is bounded by the database timeout.
      assert.equal(await exitWithin(server, 30_000), 0, server.output());
      assert.ok(Date.now() - started < 17_000, `exited after ${Date.now() - started} ms`);
      assert.match(server.output(), /"msg":"usage counts could not be written before shutdown"/);
    } finally {
      await proxy.setMode('forward');
    }
  });

  it('a command says the store is unavailable and exits', async () => {
    // Started while the database is silent: its connection never opens (pg drops it at the connect timeout).
    await proxy.setMode('blackhole');
    try {
      const started = Date.now();
      const r = await runCli(['school', 'list'], env);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /^school-data: the data store is unavailable: /);
      assert.ok(Date.now() - started < 10_000, `ended after ${Date.now() - started} ms`);
    } finally {
      await proxy.setMode('forward');
    }
  });
});

describe('closing while a flush of the usage in Redis is under way', { skip: external ? false : 'needs DATABASE_URL and REDIS_URL' }, () => {
  it('moves the requests counted after that flush claimed its batch', async () => {
    const store = await createTestStore();
    const limiter = new RedisRateLimiter(process.env.REDIS_URL!, 2000);
    try {
      const school = await createSchool(store.db, { name: 'Closing', plan: 'VIP', id: `close_${randomBytes(5).toString('hex')}` });
      assert.ok(school.ok);
      const key = await createKey(store.db, school.value.id, 'close');
      assert.ok(key.ok);
      const queue = await store.db.selectFrom('usage_queue').select('id').executeTakeFirstOrThrow();
      const shared = limiter.shareUsage(queue.id, () => undefined);
      // The first flush is held after its claim, so the close begins while it is under way.
      let claimed!: () => void;
      const claimedOnce = new Promise<void>((r) => (claimed = r));
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let claims = 0;
      const recorder = new UsageRecorder(store.db, pino({ level: 'silent' }), 60_000, {
        ...shared,
        claim: async (id, leaseMs) => {
          const ids = await shared.claim(id, leaseMs);
          if (claims++ === 0) {
            claimed();
            await held;
          }
          return ids;
        },
      });
      await shared.record(key.value.id);
      const underWay = recorder.flush();
      await claimedOnce;
      await shared.record(key.value.id);
      const closing = recorder.close();
      release();
      await Promise.all([underWay, closing]);
      const row = await store.db.selectFrom('api_keys').select('request_count').where('id', '=', key.value.id).executeTakeFirstOrThrow();
      assert.equal(Number(row.request_count), 2);
    } finally {
      await limiter.close();
      await store.close();
    }
  });
});
