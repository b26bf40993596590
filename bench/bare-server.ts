/**
 * The baselines: a bare node:https server with the service's certificate and TLS
 * settings and keep-alive, answering every request with one fixed JSON body. It is
 * what one Node process can do with TLS on this machine when the application does
 * nothing, so each scenario is reported as a fraction of it.
 *
 * Started with `floor` (and a file for its access lines), it is instead the floor of a
 * stored answer: what the contract asks of every answer to a request with a key, written as
 * plainly as Node allows and nothing more (the key hashed and looked up, the school's
 * request counted, a request id, the answer's headers, the body kept for that school and
 * target, the key's request log, one access line a request, written once a turn as the
 * service writes its own). It has no database, no plans or limits to refuse with, no
 * metrics: a reference for what the service's answers cost beyond the contract's own work,
 * measured by `npm run bench:compare -- --floor` beside the bare server. Given a Redis URL as
 * well, it counts each school's requests in Redis, as the service must when several instances
 * share a limit: the requests of a turn are held until one script call has counted them all,
 * and answered with the counts it returns, or 503 when the call fails (the least any exact
 * shared limit can do; the keys' usage, which the service records in the same call, it keeps
 * in its memory).
 *
 * Run by the benchmark as a child process (fork, with an IPC channel): it prints
 * nothing, reports its port as { port }, and takes { size } to change the body's
 * size in bytes, answering { size } once the new body is in place.
 */
import { hash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import type http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { WaitingRequests } from '../src/access/usage.js';
import { TLS12_CIPHERS } from '../src/edge/listener.js';
import { floorCounter } from './floor-count.js';

const [certFile, keyFile, kind = 'bare', logFile, redisUrl] = process.argv.slice(2);
if (!certFile || !keyFile || !process.send || !(kind === 'bare' || (kind === 'floor' && logFile))) {
  throw new Error('usage: fork bare-server.ts CERT_FILE KEY_FILE [bare | floor LOG_FILE [REDIS_URL]] (with an IPC channel)');
}
const send = process.send.bind(process);

/** A JSON body of exactly `size` bytes (at least 13). */
function bodyOf(size: number): Buffer {
  const frame = '{"padding":""}';
  return Buffer.from(`{"padding":"${'x'.repeat(Math.max(0, size - frame.length))}"}`);
}

let body = bodyOf(1024);
let headers = { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(body.length) };

function bare(_request: http.IncomingMessage, response: http.ServerResponse): void {
  response.writeHead(200, headers);
  response.end(body);
}

/** A key as the floor knows it: its school, its requests this minute and its last requests (the service's own ring). */
interface FloorKey {
  keyId: string;
  schoolId: string;
  windowStart: number;
  used: number;
  log: WaitingRequests;
}

const LIMIT = 10_000_000;
const keys = new Map<string, FloorKey>();
/** Stored bodies by school and target, each its own copy of the current body, as the service keeps one per answer. */
const stored = new Map<string, Buffer>();
const log = logFile === undefined ? -1 : fs.openSync(logFile, 'w');
let lines = '';

/** The turn's access lines, written once it ends, in one synchronous write (as the service's logger does). */
function writeLines(): void {
  const data = Buffer.from(lines);
  lines = '';
  for (let at = 0; at < data.length; ) at += fs.writeSync(log, data, at);
}

/** A key seen for the first time is taken as valid: the floor measures a found key's cost. */
function keyOf(hashed: string): FloorKey {
  let key = keys.get(hashed);
  if (key === undefined) {
    const n = keys.size;
    key = { keyId: `key-${n}`, schoolId: `school-${n}`, windowStart: 0, used: 0, log: new WaitingRequests() };
    keys.set(hashed, key);
  }
  return key;
}

/** The answer to a request with a key, its school's count taken (`used` of the window, `reset` seconds left). */
function answerWithKey(request: http.IncomingMessage, response: http.ServerResponse, key: FloorKey, startedAt: number, now: number, used: number, reset: number): void {
  const target = request.url ?? '';
  const id = randomUUID();
  const storedKey = `${key.schoolId} ${target}`;
  let answer = stored.get(storedKey);
  if (answer === undefined) {
    answer = Buffer.from(body);
    stored.set(storedKey, answer);
  }
  response.writeHead(200, [
    'Strict-Transport-Security', 'max-age=31536000', 'X-Content-Type-Options', 'nosniff', 'X-Request-Id', id, 'Cache-Control', 'private, no-cache',
    'RateLimit-Policy', `"default";q=${LIMIT};w=60`, 'RateLimit', `"default";r=${LIMIT - used};t=${reset}`,
    'Vary', 'accept-encoding, x-no-compression', 'ETag', '"0123456789abcdef-identity"',
    'Content-Type', 'application/json; charset=utf-8', 'Content-Length', String(answer.length),
  ]);
  response.end(answer);
  const responseTime = performance.now() - startedAt;
  const address = request.socket.remoteAddress ?? '';
  key.log.add({ at: now, method: request.method ?? '', target, status: 200, requestId: id, address, durationMs: responseTime });
  if (lines === '') setImmediate(writeLines);
  lines +=
    `{"level":30,"time":${now},"pid":${process.pid},"requestId":"${id}","keyId":"${key.keyId}","schoolId":"${key.schoolId}",` +
    `"req":{"method":"${request.method}","url":${JSON.stringify(target)},"remoteAddress":"${address}","remotePort":${request.socket.remotePort ?? 0}},` +
    `"res":{"statusCode":200},"responseTime":${responseTime},"msg":"request completed"}\n`;
}

const redis = redisUrl === undefined ? null : floorCounter(redisUrl);
/** Each key prefix is this process's own, so runs never share counts. */
const redisPrefix = `school-data:floor:${process.pid}:${Date.now()}:`;

interface Held {
  request: http.IncomingMessage;
  response: http.ServerResponse;
  key: FloorKey;
  startedAt: number;
  /** Its place among its school's requests of the turn (1-based). */
  place: number;
}

/** The turn's requests waiting for their count, and each school's count in the turn. */
let held: Held[] = [];
let inTurn = new Map<FloorKey, number>();

/** One script call counts the turn's requests; each is answered with its own place in its school's count. */
function countTurn(): void {
  const waiting = held;
  const counts = inTurn;
  held = [];
  inTurn = new Map();
  const schools = [...counts.keys()];
  redis!.count(schools.map((k) => redisPrefix + k.schoolId), schools.map((k) => counts.get(k)!)).then(
    (reply) => {
      const index = new Map(schools.map((k, i) => [k, i]));
      const now = Date.now();
      for (const h of waiting) {
        const i = index.get(h.key)!;
        const used = reply[2 * i]! - counts.get(h.key)! + h.place;
        answerWithKey(h.request, h.response, h.key, h.startedAt, now, used, Math.ceil(reply[2 * i + 1]! / 1000));
      }
    },
    () => {
      for (const h of waiting) {
        h.response.writeHead(503, ['Content-Length', '0']);
        h.response.end();
      }
    },
  );
}

function floor(request: http.IncomingMessage, response: http.ServerResponse): void {
  const startedAt = performance.now();
  const authorization = request.headers.authorization;
  if (authorization === undefined || !authorization.startsWith('Bearer ')) {
    response.writeHead(401, ['Content-Length', '0']);
    response.end();
    return;
  }
  const key = keyOf(hash('sha256', authorization.slice(7), 'hex'));
  if (redis !== null) {
    if (held.length === 0) setImmediate(countTurn);
    const place = (inTurn.get(key) ?? 0) + 1;
    inTurn.set(key, place);
    held.push({ request, response, key, startedAt, place });
    return;
  }
  const now = Date.now();
  if (now - key.windowStart >= 60_000) {
    key.windowStart = now;
    key.used = 0;
  }
  key.used++;
  answerWithKey(request, response, key, startedAt, now, key.used, 60 - Math.floor((now - key.windowStart) / 1000));
}

const server = https.createServer(
  {
    cert: fs.readFileSync(certFile),
    key: fs.readFileSync(keyFile),
    minVersion: 'TLSv1.2',
    ciphers: TLS12_CIPHERS,
    honorCipherOrder: true,
    keepAliveTimeout: 5_000,
  },
  kind === 'floor' ? floor : bare,
);

process.on('message', (message: { size?: number }) => {
  if (typeof message.size !== 'number') return;
  body = bodyOf(message.size);
  headers = { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(body.length) };
  stored.clear();
  send({ size: body.length });
});
process.on('disconnect', () => {
  redis?.disconnect();
  server.close(() => process.exit(0));
});

server.listen(0, '127.0.0.1', () => {
  const port = (server.address() as AddressInfo).port;
  void (redis === null ? Promise.resolve() : redis.ready()).then(() => send({ port }));
});
