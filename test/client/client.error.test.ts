/**
 * The built client's errors and retries against the real server: typed errors for
 * every problem, no retry of an answer that says the request is wrong, a retry after
 * Retry-After on 503 (Redis stopped, then back), and retries of connections that are
 * refused, reset or never answered. A stand-in server gives the answers the service never
 * does (another server's page, a body too large, a list without its total).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import zlib from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { RedisRateLimiter } from '../../src/access/ratelimit/redis.js';
import { selfSignedPaths } from '../../src/tls.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { freePort, PrivateRedis, REDIS_ONLY } from '../helpers/redis.js';
import { createTestStore } from '../helpers/store.js';
import { seedWorld, type World } from '../helpers/world.js';
import { createKey } from '../../src/management/keys.js';
import {
  AddressNotAllowedError,
  AuthenticationError,
  ForbiddenError,
  InsufficientScopeError,
  InvalidParameterError,
  NotFoundError,
  PlanRequiredError,
  RateLimitError,
  SchoolDataClient,
  SchoolDataConnectionError,
  SchoolDataError,
  ServiceUnavailableError,
  type AttemptEvent,
  type ClientOptions,
  type RetryEvent,
} from './built.js';

interface Recorder {
  attempts: AttemptEvent[];
  retries: RetryEvent[];
}

function recorder(): Recorder & Pick<ClientOptions, 'onResponse' | 'onRetry'> {
  const r: Recorder = { attempts: [], retries: [] };
  return { ...r, onResponse: (e) => r.attempts.push(e), onRetry: (e) => r.retries.push(e) };
}

/** A TCP server on a free port that handles each connection with `onConnection`. */
async function tcpServer(onConnection: (socket: net.Socket, n: number) => void): Promise<{ port: number; close: () => Promise<void> }> {
  let n = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    onConnection(socket, n++);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('client: errors and retries', () => {
  let t: TestApp;
  let w: World;
  let ca: string;
  const make = (options: Partial<ClientOptions> = {}) =>
    new SchoolDataClient({ baseUrl: t.origin, apiKey: w.a.key, ca, retryBaseDelay: 10, retryMaxDelay: 50, ...options });

  before(async () => {
    t = await startTestApp();
    w = await seedWorld(t.store.db);
    ca = fs.readFileSync(selfSignedPaths(t.store.dataDir).cert, 'utf8');
  });
  after(() => t.close());

  it('throws InvalidParameterError with each bad parameter, once, without retrying', async () => {
    const rec = recorder();
    const client = make(rec);
    const err = await client.students
      .list({ limit: 500, status: 'nope' as 'enrolled' })
      .page()
      .catch((e: unknown) => e);
    assert.ok(err instanceof InvalidParameterError);
    assert.ok(err instanceof SchoolDataError);
    assert.equal(err.status, 400);
    assert.equal(err.code, 'invalid_parameter');
    assert.deepEqual(err.invalidParams.map((p) => p.name).sort(), ['limit', 'status']);
    assert.match(err.requestId ?? '', /^[0-9a-f-]{36}$/);
    assert.equal(rec.attempts.length, 1);
    assert.equal(rec.retries.length, 0);
    client.close();
  });

  it('throws AuthenticationError for a revoked or unknown key, PlanRequiredError below Profi; never retried', async () => {
    const cases: [string, typeof SchoolDataError, number][] = [
      [w.revokedKey, AuthenticationError, 401],
      [`service_pk_${'0'.repeat(32)}`, AuthenticationError, 401],
      [w.downgradedKey, PlanRequiredError, 402],
    ];
    for (const [apiKey, Class, status] of cases) {
      const rec = recorder();
      const client = make({ apiKey, ...rec });
      const err = await client.vehicles.list().page().catch((e: unknown) => e);
      assert.ok(err instanceof Class, String(err));
      assert.equal(err.status, status);
      assert.equal(rec.attempts.length, 1);
      client.close();
    }
  });

  it('throws InsufficientScopeError and AddressNotAllowedError (both ForbiddenError) for a key\'s limits; never retried', async () => {
    const scoped = await createKey(t.store.db, w.a.id, 'students only', { scopes: ['students'] });
    const elsewhere = await createKey(t.store.db, w.a.id, 'from elsewhere', { allow: ['203.0.113.0/24'] });
    assert.ok(scoped.ok && elsewhere.ok);
    const cases: [string, typeof SchoolDataError, string][] = [
      [scoped.value.key, InsufficientScopeError, 'insufficient_scope'],
      [elsewhere.value.key, AddressNotAllowedError, 'address_not_allowed'],
    ];
    for (const [apiKey, Class, code] of cases) {
      const rec = recorder();
      const client = make({ apiKey, ...rec });
      const err = await client.payments.list().page().catch((e: unknown) => e);
      assert.ok(err instanceof Class, String(err));
      assert.ok(err instanceof ForbiddenError);
      assert.equal(err.status, 403);
      assert.equal(err.code, code);
      assert.equal(rec.attempts.length, 1);
      client.close();
    }
  });

  it('throws NotFoundError for an unknown student, another school\'s, or a malformed id; never retried', async () => {
    const rec = recorder();
    const client = make(rec);
    for (const id of ['no-such-student', 'only-here', 'bad id/..']) {
      const err = await client.students.get(id).catch((e: unknown) => e);
      assert.ok(err instanceof NotFoundError, `${id}: ${String(err)}`);
      assert.equal(err.code, 'not_found');
    }
    assert.equal(rec.attempts.length, 3);
    client.close();
  });

  it('retries a refused connection with backoff, then gives up with SchoolDataConnectionError', async () => {
    const rec = recorder();
    const client = make({ baseUrl: `https://127.0.0.1:${await freePort()}`, maxRetries: 2, ...rec });
    const err = await client.students.list().page().catch((e: unknown) => e);
    assert.ok(err instanceof SchoolDataConnectionError);
    assert.equal(err.code, 'ECONNREFUSED');
    assert.equal(rec.attempts.length, 3);
    assert.deepEqual(rec.retries.map((r) => r.reason), ['ECONNREFUSED', 'ECONNREFUSED']);
    assert.ok(rec.retries.every((r) => r.delayMs <= 50));
    client.close();
  });

  it('retries a connection reset and then gets the answer', async () => {
    const appPort = Number(new URL(t.origin).port);
    const proxy = await tcpServer((socket, n) => {
      if (n === 0) {
        socket.destroy();
        return;
      }
      const upstream = net.connect(appPort, '127.0.0.1');
      upstream.on('error', () => socket.destroy());
      socket.pipe(upstream).pipe(socket);
    });
    const rec = recorder();
    const client = make({ baseUrl: `https://127.0.0.1:${proxy.port}`, ...rec });
    try {
      assert.equal((await client.students.list()).meta.total, 5);
      assert.equal(rec.retries.length, 1);
      assert.equal(rec.retries[0]?.status, null);
      assert.equal(rec.attempts.at(-1)?.status, 200);
    } finally {
      client.close();
      await proxy.close();
    }
  });

  it('gives up on an answer that never comes after `timeout`, retrying first', async () => {
    const silent = await tcpServer(() => undefined);
    const rec = recorder();
    const client = make({ baseUrl: `https://127.0.0.1:${silent.port}`, timeout: 200, maxRetries: 1, ...rec });
    try {
      const err = await client.students.list().page().catch((e: unknown) => e);
      assert.ok(err instanceof SchoolDataConnectionError);
      assert.equal(err.code, 'timeout');
      assert.deepEqual(rec.retries.map((r) => r.reason), ['timeout']);
    } finally {
      client.close();
      await silent.close();
    }
  });
  /** An HTTPS server with the test app's certificate, answering request `n` with `answer`. */
  async function stub(answer: (req: http.IncomingMessage, res: http.ServerResponse, n: number) => void, options: Partial<ClientOptions> = {}): Promise<{ client: InstanceType<typeof SchoolDataClient>; close: () => Promise<void> }> {
    const paths = selfSignedPaths(t.store.dataDir);
    let n = 0;
    const server = https.createServer({ cert: fs.readFileSync(paths.cert), key: fs.readFileSync(paths.key) }, (req, res) => answer(req, res, n++));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    const client = make({ baseUrl: `https://127.0.0.1:${port}`, ...options });
    return {
      client,
      close: async () => {
        client.close();
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      },
    };
  }
  const problem = (res: http.ServerResponse, status: number, code: string, headers: Record<string, string>) => {
    res.writeHead(status, { 'content-type': 'application/problem+json', ...headers });
    res.end(JSON.stringify({ type: 'about:blank', title: code, status, code, detail: code }));
  };

  it('gives a Retry-After past ten minutes back to the caller at once, rather than wait hours (or, past 24.8 days, not at all)', async () => {
    for (const wait of ['99999999999', '86400']) {
      const { client, close } = await stub((_req, res) => problem(res, 429, 'rate_limit_exceeded', { 'retry-after': wait }));
      try {
        const started = Date.now();
        const err = await client.students.list().then(() => null, (e: unknown) => e);
        assert.ok(err instanceof RateLimitError, String(err));
        assert.equal(err.retryAfter, Number(wait));
        assert.ok(Date.now() - started < 2000, `waited ${Date.now() - started} ms`);
      } finally {
        await close();
      }
    }
  });

  it('waits a Retry-After given as an HTTP-date', async () => {
    const rec = recorder();
    const { client, close } = await stub((_req, res, n) => {
      if (n === 0) return problem(res, 503, 'rate_limit_unavailable', { 'retry-after': new Date(Date.now() + 2000).toUTCString() });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ items: [], meta: { total: 0, limit: 50, offset: 0 } }));
    }, rec);
    try {
      await client.students.list();
      assert.equal(rec.retries.length, 1);
      // A date has whole seconds: 1-2 s from now, and the jitter of up to half a second.
      const { delayMs } = rec.retries[0]!;
      assert.ok(delayMs >= 1000 && delayMs <= 2500, `waited ${delayMs} ms`);
    } finally {
      await close();
    }
  });

  it('takes an answer that is not the service\'s (an HTML page) for SchoolDataError itself, whatever its status, on one line', async () => {
    const page = '<!DOCTYPE html>\n<html>\n<head><title>404 Not Found</title></head>\r\n<body>\n\t<h1>Not Found</h1>\n</body>\n</html>\n';
    const { client, close } = await stub((_req, res) => {
      res.writeHead(404, { 'content-type': 'text/html' });
      res.end(page);
    });
    try {
      const err = await client.students.get('s1').then(() => null, (e: unknown) => e);
      assert.ok(err instanceof SchoolDataError, String(err));
      assert.equal(err.constructor, SchoolDataError, 'not NotFoundError: no student is missing, the address is wrong');
      assert.ok(!(err instanceof NotFoundError));
      assert.equal(err.status, 404);
      assert.equal(err.code, 'unexpected_response');
      assert.ok(!/[\r\n\t]/.test(err.message), err.message);
      assert.match(err.detail, /\(HTTP 404, text\/html\): <!DOCTYPE html> <html> <head><title>404 Not Found<\/title><\/head> <body> <h1>Not Found<\/h1>/);
    } finally {
      await close();
    }
  });

  it('retries a 503 that is not the service\'s as any 503, then throws SchoolDataError itself', async () => {
    const rec = recorder();
    const { client, close } = await stub((_req, res) => {
      res.writeHead(503, { 'content-type': 'text/html' });
      res.end('<html>\n<body>Service Unavailable</body>\n</html>');
    }, { maxRetries: 1, ...rec });
    try {
      const err = await client.students.list().then(() => null, (e: unknown) => e);
      assert.ok(err instanceof SchoolDataError && err.constructor === SchoolDataError, String(err));
      assert.ok(!(err instanceof ServiceUnavailableError));
      assert.equal(err.code, 'unexpected_response');
      assert.deepEqual(rec.retries.map((r) => r.reason), ['http_503']);
    } finally {
      await close();
    }
  });

  it('refuses an answer whose body inflates past maxResponseBytes, unread and not retried (a gzip bomb)', async () => {
    // 80 MiB of zeros, gzipped to about 80 KB: over the default 64 MiB once inflated.
    const bomb = zlib.gzipSync(Buffer.alloc(80 * 2 ** 20), { level: 9 });
    const plain = JSON.stringify({ items: [{ id: 'st-1', notes: 'x'.repeat(2000) }], meta: { total: 1, limit: 50, offset: 0 } });
    for (const [options, headers, body] of [
      [{}, { 'content-encoding': 'gzip' }, bomb],
      [{ maxResponseBytes: 1000 }, {}, plain],
    ] as const) {
      const rec = recorder();
      const { client, close } = await stub((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', ...headers });
        res.end(body);
      }, { ...options, ...rec });
      try {
        const err = await client.students.list().then(() => null, (e: unknown) => e);
        assert.ok(err instanceof SchoolDataError && err.code === 'unexpected_response' && /maxResponseBytes/.test(err.message), String(err));
        assert.equal(rec.attempts.length, 1, 'not retried');
      } finally {
        await close();
      }
    }
  });

  it('stops walking a list whose pages come without their total, rather than ask for the next page forever', async () => {
    const { client, close } = await stub((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ items: [{ id: 'st-1' }], meta: { limit: 50, offset: 0 } }));
    });
    try {
      const err = await client.students.list().toArray({ max: Infinity }).then(() => null, (e: unknown) => e);
      assert.ok(err instanceof SchoolDataError && err.code === 'unexpected_response', String(err));
    } finally {
      await close();
    }
  });

  it('stops a changes feed that gives no cursor, or more to come with no change and the same cursor, rather than read it forever', async () => {
    for (const meta of [{ next_cursor: 'c1', has_more: true }, { has_more: false }, { next_cursor: null, has_more: true }]) {
      const { client, close } = await stub((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ items: [], meta }));
      });
      try {
        const err = await (async () => {
          for await (const change of client.changes.list()) void change;
        })().then(() => null, (e: unknown) => e);
        assert.ok(err instanceof SchoolDataError && err.code === 'unexpected_response', `${JSON.stringify(meta)}: ${String(err)}`);
      } finally {
        await close();
      }
    }
  });
});

describe('client: retry on 503 while the rate-limit service is down', { skip: REDIS_ONLY }, () => {
  let redis: PrivateRedis;
  let t: TestApp;
  let w: World;
  let ca: string;

  before(async () => {
    redis = await PrivateRedis.start();
    t = await startTestApp({ store: await createTestStore(), limiter: new RedisRateLimiter(redis.url, 250) });
    w = await seedWorld(t.store.db);
    ca = fs.readFileSync(selfSignedPaths(t.store.dataDir).cert, 'utf8');
  });
  after(async () => {
    await t.close();
    await t.store.close();
    await redis.stop();
  });

  it('throws ServiceUnavailableError at once with retries off', async () => {
    await redis.stop();
    try {
      const client = new SchoolDataClient({ baseUrl: t.origin, apiKey: w.a.key, ca, maxRetries: 0 });
      const err = await client.students.list().page().catch((e: unknown) => e);
      assert.ok(err instanceof ServiceUnavailableError, String(err));
      assert.equal(err.code, 'rate_limit_unavailable');
      assert.equal(err.retryAfter, 5);
      client.close();
    } finally {
      await redis.start();
    }
  });

  it('waits Retry-After and retries until Redis is back', async () => {
    await redis.stop();
    const rec = recorder();
    const client = new SchoolDataClient({ baseUrl: t.origin, apiKey: w.a.key, ca, ...rec });
    const listing = client.students.list().page();
    // Redis comes back while the client waits out the 503's Retry-After.
    const restarted = (async () => {
      while (rec.retries.length === 0) await new Promise((r) => setTimeout(r, 50));
      await redis.start();
    })();
    const page = await listing;
    await restarted;
    assert.equal(page.meta.total, 5);
    assert.equal(rec.retries[0]?.reason, 'http_503');
    assert.ok((rec.retries[0]?.delayMs ?? 0) >= 5000, 'waits the Retry-After of the 503');
    assert.equal(rec.attempts.at(-1)?.status, 200);
    client.close();
  });

});

