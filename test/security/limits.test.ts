/**
 * The server's limits (docs/operations.md, "Server limits"): timeouts that cut off a
 * slowloris client, an idle connection, an unfinished TLS handshake; size limits that
 * answer 431 and 414 as problem+json; TLS 1.2+ with strong suites only; and a flood of
 * idle connections that does not keep other clients from being served.
 *
 * Timeouts are set short here and checked against generous bounds (a multiple of the
 * setting): what is tested is that a connection is cut, not how fast.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { ApiMetrics } from '../../src/ops/metrics.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { assertErrorAnswer, pipelinedStatuses, rawExchange, unreadRefusal } from '../helpers/fuzz.js';
import { seedWorld, type World } from '../helpers/world.js';

// The idle timeout is past the header timeout plus Node's 1 s between its checks of it, so a
// connection that sends nothing gets its 408 before the idle timeout closes it.
const LIMITS = { headersTimeoutMs: 1500, requestTimeoutMs: 3000, keepAliveTimeoutMs: 1000, tlsHandshakeTimeoutMs: 1000, idleTimeoutMs: 3000 };

/** Resolves with how long until the server closed `socket` (and what it wrote), or null if it stays open past `boundMs`. */
function closedWithin(socket: net.Socket, boundMs: number): Promise<{ ms: number; received: string } | null> {
  const started = Date.now();
  let received = '';
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(null);
    }, boundMs);
    socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ ms: Date.now() - started, received });
    });
  });
}

describe('server limits', () => {
  let t: TestApp;
  let w: World;
  let port: number;

  before(async () => {
    t = await startTestApp({ config: LIMITS });
    w = await seedWorld(t.store.db);
    port = Number(new URL(t.origin).port);
  });
  after(() => t.close());

  const secure = (opts: tls.ConnectionOptions = {}) =>
    new Promise<tls.TLSSocket>((resolve, reject) => {
      const socket = tls.connect({ host: '127.0.0.1', port, ca: t.ca, servername: 'localhost', ...opts }, () => resolve(socket));
      socket.once('error', reject);
    });

  describe('timeouts', () => {
    it('cuts off a slowloris client sending its headers byte by byte (408)', async () => {
      const socket = await secure();
      socket.write('GET /api/public/v1/students HTTP/1.1\r\nHost: 127.0.0.1\r\n');
      const drip = setInterval(() => socket.writable && socket.write('X'), 200);
      const closed = await closedWithin(socket, 8 * LIMITS.headersTimeoutMs);
      clearInterval(drip);
      assert.ok(closed, 'still open long after the header timeout');
      assert.match(closed.received, /^HTTP\/1\.1 408 /);
      assert.match(closed.received, /Content-Type: application\/problem\+json/);
      const body = JSON.parse(closed.received.slice(closed.received.indexOf('\r\n\r\n') + 4)) as { status: number; code: string; request_id: string };
      assert.equal(body.status, 408);
      assert.equal(body.code, 'request_timeout');
      assert.match(closed.received, new RegExp(`X-Request-Id: ${body.request_id}`));
      assert.ok(t.logs.join('').includes(`"requestId":"${body.request_id}"`), 'no log line holds the 408\'s request id');
    });

    it('closes an idle kept-alive connection after the keep-alive timeout', async () => {
      const socket = await secure();
      socket.write(`GET /api/public/v1/students?limit=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${w.a.key}\r\n\r\n`);
      const closed = await closedWithin(socket, 5 * LIMITS.keepAliveTimeoutMs);
      assert.ok(closed, 'kept open long after the keep-alive timeout');
      assert.match(closed.received, /^HTTP\/1\.1 200 /);
      assert.match(closed.received, /Keep-Alive: timeout=1/);
    });

    it('closes a refused connection whose client reads nothing and goes on sending, at its timeout', async () => {
      const { socket, stop } = await unreadRefusal(port, t.ca);
      const started = Date.now();
      const closed = await new Promise<number | null>((resolve) => {
        const bound = setTimeout(() => resolve(null), 5 * LIMITS.idleTimeoutMs);
        socket.once('close', () => {
          clearTimeout(bound);
          resolve(Date.now() - started);
        });
      });
      stop();
      assert.ok(closed !== null, 'kept open while the client went on sending');
    });

    it('closes a connection that never starts its TLS handshake', async () => {
      const socket = net.connect(port, '127.0.0.1');
      const closed = await closedWithin(socket, 5 * LIMITS.tlsHandshakeTimeoutMs);
      assert.ok(closed, 'a silent TCP connection was kept open');
    });

    it('closes a TLS connection that never sends a request (408 at the header timeout)', async () => {
      const socket = await secure();
      const closed = await closedWithin(socket, 8 * LIMITS.headersTimeoutMs);
      assert.ok(closed, 'an idle TLS connection was kept open');
      assert.match(closed.received, /^HTTP\/1\.1 408 /);
    });
  });

  describe('request bodies', () => {
    const head = (extra: string, method = 'GET') => `${method} /api/public/v1/students?limit=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${w.a.key}\r\n${extra}\r\n`;
    const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

    /** Everything the server sends on a fresh connection given `bytes`, until it closes. */
    const rawExchangeAll = (bytes: string) =>
      new Promise<string>((resolve, reject) => {
        const url = new URL(t.origin);
        const socket = tls.connect({ host: url.hostname, port: Number(url.port), ca: t.ca, servername: 'localhost' }, () => socket.write(bytes));
        let text = '';
        socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
        socket.on('error', reject);
        socket.on('close', () => resolve(text));
      });

    it('sends the headers alone to a HEAD the parser refuses, behind requests pipelined before it too', async () => {
      const get = head('');
      for (const [what, bytes] of [
        ['alone', 'HEAD /api/public/v1/stu dents HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
        ['after a GET', `${get}HEAD /api/public/v1/stu dents HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`],
        ['with a malformed body', `${head('Transfer-Encoding: chunked\r\n', 'HEAD')}zz\r\nabc\r\n0\r\n\r\n`],
      ] as const) {
        const received = await rawExchangeAll(bytes);
        const refusal = received.slice(received.lastIndexOf('HTTP/1.1 400 '));
        assert.match(refusal, /^HTTP\/1\.1 400 [^]*\r\nContent-Length: \d+\r\n/, what);
        assert.ok(refusal.endsWith('\r\n\r\n'), `${what}: a body after the head: ${JSON.stringify(refusal.slice(-80))}`);
      }
      // Bytes that are no request after a HEAD (which declared no body) are not that HEAD: their 400 has its body.
      const afterHead = await rawExchangeAll(`${head('', 'HEAD')}\u0001junk /x HTTP/1.1\r\n\r\n`);
      assert.match(afterHead.slice(afterHead.lastIndexOf('HTTP/1.1 400 ')), /\r\n\r\n\{"type":"urn:school-data:problem:invalid_parameter"/);
    });

    it('answers a GET whose chunked body is malformed with the 400 alone, stored answer or not (RFC 9112 section 6.3)', async () => {
      for (let round = 0; round < 2; round++) {
        assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, `${head('Transfer-Encoding: chunked\r\n')}zz\r\nabc\r\n0\r\n\r\n`), [400], `round ${round}`);
      }
      assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, `${head('Connection: close\r\n')}`), [200]);
    });

    it('closes the connection after answering a request that asks for another protocol: a request after it is not left waiting', async () => {
      const upgrade = head('Connection: Upgrade\r\nUpgrade: websocket\r\n');
      for (const method of ['GET', 'HEAD']) {
        const bytes = `${upgrade.replace(/^GET/, method)}${head('')}`;
        const first = await rawExchange(t.origin, t.ca, bytes, { headOnly: method === 'HEAD' });
        assert.ok(first.kind === 'response' && first.response.status === 200, `${method}: ${JSON.stringify(first)}`);
        assert.equal(first.response.headers.connection, 'close', `${method}: the client is told to send the next request on a new connection`);
        assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, bytes), [200], method);
      }
      // Upgrade without Connection: upgrade asks for nothing (Node reads on): the connection stays.
      assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, `${head('Upgrade: h2c\r\n')}${head('Connection: close\r\n')}`), [200, 200]);
    });

    it('keeps the connection of a request whose declared body is empty, however its length is written, answered at once or not', async () => {
      for (const length of ['0', '00', '000']) {
        for (const [method, status] of [['GET', 200], ['POST', 405]] as const) {
          const request = head(`Content-Length: ${length}\r\n`, method);
          const last = head(`Content-Length: ${length}\r\nConnection: close\r\n`, method);
          assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, `${request}${request}${last}`), [status, status, status], `${method}, ${length}`);
        }
      }
    });

    it('answers a request whose body is malformed in the packet of its head with one answer, whatever its method', async () => {
      assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, `${head('Transfer-Encoding: chunked\r\n', 'POST')}zz\r\nabc\r\n0\r\n\r\n`), [405]);
      assert.deepEqual(await pipelinedStatuses(t.origin, t.ca, `${head('Transfer-Encoding: chunked\r\n', 'HEAD')}zz\r\nabc\r\n0\r\n\r\n`), [400]);
    });

    it('gives a request whose malformed rest follows its head at once one answer, and counts no client error for an end after its answer', async () => {
      const malformed = async () => /kind="malformed",listener="api"\} (\d+)/.exec(await ApiMetrics.forProcess().exposition())?.[1] ?? '0';
      for (let round = 0; round < 10; round++) {
        const socket = await secure();
        const closed = once(socket, 'close');
        let received = '';
        socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
        socket.on('error', () => undefined);
        // The rest is sent as soon as the head is on its way: it may reach the parser before the answer has left.
        socket.write(`${head('Transfer-Encoding: chunked\r\n')}5\r\nhel`, () => socket.write('lo\r\nzz\r\n\r\n'));
        await closed;
        assert.equal(statuses(received).length, 1, `round ${round}: ${statuses(received).join(', ')}`);
      }
      const before = await malformed();
      const socket = await secure();
      const closed = once(socket, 'close');
      let received = '';
      socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
      socket.write(head('Content-Length: 100\r\n'));
      while (!received.includes('\r\n\r\n')) await new Promise((resolve) => setTimeout(resolve, 10));
      socket.end();
      await closed;
      assert.deepEqual(statuses(received), [200]);
      assert.equal(await malformed(), before, 'the end of a body after its answer was counted as a client error');
    });

    it('neither answers nor counts what the parser reports after an early answer still queued behind others', async () => {
      const malformed = async () => /kind="malformed",listener="api"\} (\d+)/.exec(await ApiMetrics.forProcess().exposition())?.[1] ?? '0';
      const before = await malformed();
      const socket = await secure();
      const closed = once(socket, 'close');
      socket.on('error', () => undefined);
      // A client that reads late: the early answer waits behind 300 others while its malformed rest arrives.
      socket.pause();
      const page = 'GET /api/public/v1/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
      socket.write(`${page.repeat(300)}GET /api/public/v1/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      socket.write('lo\r\nzz\r\n\r\n');
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.resume();
      await closed;
      const received = Buffer.concat(chunks).toString('latin1');
      assert.deepEqual(new Set(statuses(received)), new Set([200]));
      assert.equal(statuses(received).length, 301);
      assert.equal(await malformed(), before, 'a malformed rest after its answer was counted as a client error');
    });

    it('counts no TLS failure on a connection whose request was answered before its body, and counts one on any other', async () => {
      const tlsFailures = async () => Number(/kind="tls",listener="api"\} (\d+)/.exec(await ApiMetrics.forProcess().exposition())?.[1] ?? '0');
      const page = 'GET /api/public/v1/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n';
      // A TLS record no session can open, written under the client's TLS, after the answer.
      const brokenRecord = Buffer.from('170303001000000000000000000000000000000000', 'hex');
      const counted: number[] = [];
      for (const request of [`${page}Content-Length: 10\r\n\r\nhello`, `${page}\r\n`]) {
        const before = await tlsFailures();
        const tcp = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
        tcp.on('error', () => undefined);
        const socket = tls.connect({ socket: tcp, ca: t.ca, servername: 'localhost' });
        socket.on('error', () => undefined);
        await once(socket, 'secureConnect');
        socket.write(request);
        await new Promise((resolve) => setTimeout(resolve, 200));
        tcp.write(brokenRecord);
        await new Promise((resolve) => setTimeout(resolve, 300));
        counted.push((await tlsFailures()) - before);
        tcp.destroy();
      }
      assert.deepEqual(counted, [0, 1]);
    });

    it('answers a request whose body is still arriving at once, closing the connection: the rest is no second answer', async () => {
      const cases = [
        // The rest proves malformed (a bad chunk), or never ends (the request timeout would answer 408).
        { what: 'a malformed rest', first: `${head('Transfer-Encoding: chunked\r\n')}5\r\nhel`, rest: 'lo\r\nzz\r\n\r\n', status: 200 },
        { what: 'a rest that never ends', first: `${head('Content-Length: 1000000\r\n')}x`, rest: 'x'.repeat(1000), status: 200 },
        // A refusal is not kept waiting for an upload.
        { what: 'a POST uploading', first: `${head('Content-Length: 10000000\r\n', 'POST')}${'x'.repeat(1000)}`, rest: 'x'.repeat(64 * 1024), status: 405 },
      ];
      for (const { what, first, rest, status } of cases) {
        const socket = await secure();
        socket.write(first);
        const drip = setInterval(() => socket.writable && socket.write(rest), 200);
        const closed = await closedWithin(socket, 4 * LIMITS.requestTimeoutMs);
        clearInterval(drip);
        assert.ok(closed, `${what}: the connection was not closed`);
        assert.deepEqual(statuses(closed.received), [status], what);
        assert.match(closed.received, /\r\nConnection: close\r\n/i, what);
      }
    });
  });

  describe('sizes', () => {
    it('431 problem+json for headers over the limit; just under it is read', async () => {
      const over = `GET /api/public/v1/students HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(t.config.maxHeaderBytes)}\r\n\r\n`;
      const outcome = await rawExchange(t.origin, t.ca, over);
      assert.equal(outcome.kind, 'response');
      if (outcome.kind !== 'response') return;
      assert.equal(outcome.response.status, 431);
      assertErrorAnswer(outcome.response, 'oversized headers');
      const refused = JSON.parse(outcome.response.body) as { code: string; request_id: string };
      assert.equal(refused.code, 'header_too_large');
      // Its id is in an access line, as every answer's is; nothing of the request was read.
      const line = t.logs.join('').split('\n').find((l) => l.includes(refused.request_id));
      assert.ok(line, 'no log line holds the 431\'s request id');
      const logged = JSON.parse(line) as { res: unknown; msg: string; responseTime?: number };
      assert.deepEqual([logged.res, logged.msg, logged.responseTime], [{ statusCode: 431 }, 'request completed', undefined]);

      const under = await t.request('/api/public/v1/students?limit=1', { key: w.a.key, headers: { 'x-big': 'a'.repeat(t.config.maxHeaderBytes - 1024) } });
      assert.equal(under.status, 200);
    });

    it('414 problem+json for a URL over the limit, also when one path parameter makes it long', async () => {
      for (const path of [`/api/public/v1/students?group_id=${'g'.repeat(t.config.maxUrlBytes)}`, `/api/public/v1/students/${'s'.repeat(t.config.maxUrlBytes)}`]) {
        const res = await t.request(path, { key: w.a.key });
        assert.equal(res.status, 414, path.slice(0, 60));
        assert.equal((res.json() as { code: string }).code, 'uri_too_long');
        assertErrorAnswer({ status: res.status, headers: res.headers, body: res.text }, path.slice(0, 60));
      }
      // Up to the limit the request is read: here a bad parameter and a malformed id.
      const pad = t.config.maxUrlBytes - 100;
      assert.equal((await t.request(`/api/public/v1/students?group_id=${'g'.repeat(pad)}`, { key: w.a.key })).status, 400);
      assert.equal((await t.request(`/api/public/v1/students/${'s'.repeat(pad)}`, { key: w.a.key })).status, 404);
    });
  });

  describe('TLS', () => {
    /**
     * The client's error for an alert the server sent. OpenSSL builds name the record
     * layer differently (ERR_SSL_SSLV3_ALERT_..., ERR_SSL_SSL/TLS_ALERT_...,
     * ERR_SSL_TLSV1_ALERT_...): what is checked is the alert, not one build's wording.
     */
    const SERVER_ALERT = (alert: string) => new RegExp(`^ERR_SSL_.*ALERT_${alert}$`);
    const refusal = (opts: tls.ConnectionOptions) =>
      secure(opts).then(
        (socket) => {
          const accepted = `accepted ${socket.getProtocol()} ${socket.getCipher().name}`;
          socket.destroy();
          return accepted;
        },
        (err: { code?: string }) => err.code ?? 'error',
      );

    it('agrees on HTTP/1.1 or HTTP/1.0 by ALPN (curl --http1.0 offers only the latter), and on nothing else', async () => {
      for (const [offered, agreed] of [[['http/1.0'], 'http/1.0'], [['h2', 'http/1.1'], 'http/1.1'], [['http/1.1', 'http/1.0'], 'http/1.1']] as const) {
        const socket = await secure({ ALPNProtocols: [...offered] });
        assert.equal(socket.alpnProtocol, agreed, offered.join());
        socket.destroy();
      }
      assert.match(await refusal({ ALPNProtocols: ['h2'] }), SERVER_ALERT('NO_APPLICATION_PROTOCOL'));
    });

    it('refuses TLS 1.0 and 1.1 (the server sends the protocol_version alert)', async () => {
      for (const maxVersion of ['TLSv1', 'TLSv1.1'] as const) {
        // The client is willing (security level 0), so the refusal is the server's.
        assert.match(await refusal({ minVersion: 'TLSv1', maxVersion, ciphers: 'DEFAULT@SECLEVEL=0' }), SERVER_ALERT('PROTOCOL_VERSION'), maxVersion);
      }
    });

    it('refuses TLS 1.2 suites without forward secrecy or without AEAD', async () => {
      for (const ciphers of ['ECDHE-ECDSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA', 'ECDHE-ECDSA-AES128-SHA256', 'ECDHE-ECDSA-AES256-SHA384', 'AES128-GCM-SHA256', 'AES256-SHA']) {
        assert.match(await refusal({ maxVersion: 'TLSv1.2', ciphers }), SERVER_ALERT('HANDSHAKE_FAILURE'), ciphers);
      }
    });

    it('accepts TLS 1.2 with ECDHE and AEAD, and TLS 1.3', async () => {
      assert.equal(await refusal({ maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' }), 'accepted TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256');
      assert.equal(await refusal({ maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-CHACHA20-POLY1305' }), 'accepted TLSv1.2 ECDHE-ECDSA-CHACHA20-POLY1305');
      assert.match(await refusal({ minVersion: 'TLSv1.3' }), /^accepted TLSv1\.3 TLS_/);
    });
  });

  describe('connection flood', () => {
    it('serves a normal client while hundreds of idle connections are open', async () => {
      const idle: net.Socket[] = [];
      try {
        // Half never start TLS, half finish the handshake and then send nothing.
        for (let i = 0; i < 200; i++) {
          const s = net.connect(port, '127.0.0.1');
          s.on('error', () => undefined);
          idle.push(s);
        }
        const handshaken = await Promise.all(Array.from({ length: 200 }, () => secure()));
        idle.push(...handshaken);
        for (const s of handshaken) s.on('error', () => undefined);
        const res = await t.request('/api/public/v1/students?limit=1', { key: w.a.key });
        assert.equal(res.status, 200);
      } finally {
        for (const s of idle) s.destroy();
      }
    });

    it('past SCHOOL_DATA_MAX_CONNECTIONS a new connection is closed at once, and served again once others close', async () => {
      const capped = await startTestApp({ config: { ...LIMITS, maxConnections: 20 } });
      const idle: net.Socket[] = [];
      try {
        for (let i = 0; i < 20; i++) {
          const s = net.connect(Number(new URL(capped.origin).port), '127.0.0.1');
          s.on('error', () => undefined);
          await new Promise((r) => s.once('connect', r));
          idle.push(s);
        }
        await new Promise((r) => setTimeout(r, 100));
        await assert.rejects(capped.request('/api/public/v1/students', { key: null }), /ECONNRESET|socket hang up|disconnected/);
        for (const s of idle) s.destroy();
        await new Promise((r) => setTimeout(r, 100));
        assert.equal((await capped.request('/api/public/v1/students', { key: null })).status, 401);
      } finally {
        for (const s of idle) s.destroy();
        await capped.close();
      }
    });
  });
});
