/**
 * Tools for the fuzz tests (test/fuzz/): how many cases to run, a raw HTTP/1.1 client
 * over TLS for input Node's own client refuses to send, an HTTPS client with a hard
 * deadline per request, and the check every error answer must pass.
 *
 *   SCHOOL_DATA_FUZZ_SCALE  multiplies every property's number of cases (default 1;
 *                           `npm run fuzz` uses 20)
 *   SCHOOL_DATA_FUZZ_SEED   replays a run (the seed is printed with every summary)
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import https from 'node:https';
import tls from 'node:tls';
import zlib from 'node:zlib';
import type { TestContext } from 'node:test';
import fc from 'fast-check';
import { Value } from 'typebox/value';
import { ProblemSchema, problemTypes, type ProblemCode } from '../../src/problems/index.js';
import { ROUTES } from './routes.js';

/** The number of cases for a property: `base` in CI, scaled up on demand. */
export function fuzzRuns(base: number): number {
  const scale = Number(process.env.SCHOOL_DATA_FUZZ_SCALE ?? '1');
  return Math.max(1, Math.round(base * (Number.isFinite(scale) && scale > 0 ? scale : 1)));
}

/**
 * Runs an async property and reports "fuzz <name>: N cases, F failures, seed S" as a
 * test diagnostic (scripts/fuzz.mjs adds these up), then fails the test with the
 * shrunk counterexample, its error and the seed that replays the run, if a case failed.
 */
export async function checkProperty<Ts>(t: TestContext, name: string, base: number, property: fc.IAsyncProperty<Ts>): Promise<void> {
  const seed = process.env.SCHOOL_DATA_FUZZ_SEED;
  const details = await fc.check(property, { numRuns: fuzzRuns(base), ...(seed ? { seed: Number(seed) } : {}) });
  t.diagnostic(`fuzz ${name}: ${details.numRuns} cases, ${details.failed ? 1 : 0} failures, seed ${details.seed}`);
  if (details.failed) {
    // Long generated runs of one character are shortened: the seed replays the exact case.
    const example = JSON.stringify(details.counterexample).replace(/(.)\1{40,}/g, (run) => `${run.slice(0, 10)}...(${run.length} chars)`);
    const error = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
    assert.fail(`fuzz ${name} failed after ${details.numRuns} cases (replay with SCHOOL_DATA_FUZZ_SEED=${details.seed})\ncounterexample: ${example.slice(0, 3000)}\nerror: ${error.slice(0, 3000)}`);
  }
}

export interface WireResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** Rejects if `promise` has not settled within `ms`: a request that hangs is a failure. */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

function decode(body: Buffer, encoding: string | undefined): string {
  if (encoding === 'gzip') return zlib.gunzipSync(body).toString('utf8');
  if (encoding === 'br') return zlib.brotliDecompressSync(body).toString('utf8');
  if (encoding === 'deflate') return zlib.inflateSync(body).toString('utf8');
  return body.toString('utf8');
}

export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[]>;
}

/** An HTTPS client that sends what Node's client accepts, decompresses answers, and never waits forever. */
export function fuzzClient(origin: string, ca: string) {
  const agent = new https.Agent({ keepAlive: true, ca, maxSockets: 8, servername: 'localhost' });
  const url = new URL(origin);
  return {
    send(req: FuzzRequest, deadlineMs = 10_000): Promise<WireResponse> {
      const exchange = new Promise<WireResponse>((resolve, reject) => {
        // Host, port and path given apart: a URL string would be normalised (dot segments
        // resolved, fragments dropped) before the request is sent.
        const r = https.request({ hostname: url.hostname, port: url.port, path: req.path, method: req.method, headers: req.headers, agent }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            try {
              // A HEAD answer names the coding its GET's body would have, and has no body.
              const body = req.method === 'HEAD' ? '' : decode(Buffer.concat(chunks), res.headers['content-encoding']);
              resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
            } catch (err) {
              reject(err instanceof Error ? err : new Error(String(err)));
            }
          });
          res.on('error', reject);
        });
        r.on('error', reject);
        r.end();
      });
      return withDeadline(exchange, deadlineMs, `${req.method} ${req.path.slice(0, 200)}`);
    },
    close: () => agent.destroy(),
  };
}

export type RawOutcome = { kind: 'response'; response: WireResponse } | { kind: 'closed'; bytes: number } | { kind: 'timeout' };

/** Parses the first HTTP/1.1 response in `data`, or returns null while it is incomplete. */
export function parseFirstResponse(data: Buffer, headOnly: boolean): WireResponse | null {
  const end = data.indexOf('\r\n\r\n');
  if (end === -1) return null;
  const [statusLine, ...lines] = data.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? NaN);
  if (!Number.isInteger(status)) throw new Error(`not an HTTP status line: ${JSON.stringify(statusLine)}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = data.subarray(end + 4);
  if (status === 100) return parseFirstResponse(rest, headOnly);
  if (headOnly || status === 204 || status === 304) return { status, headers, body: '' };
  if (headers['transfer-encoding'] === 'chunked') {
    const text = rest.toString('latin1');
    if (!text.includes('\r\n0\r\n\r\n') && !text.startsWith('0\r\n\r\n')) return null;
    let body = '';
    let at = 0;
    for (;;) {
      const lineEnd = text.indexOf('\r\n', at);
      const size = parseInt(text.slice(at, lineEnd), 16);
      if (!size) break;
      body += text.slice(lineEnd + 2, lineEnd + 2 + size);
      at = lineEnd + 2 + size + 2;
    }
    return { status, headers, body: Buffer.from(body, 'latin1').toString('utf8') };
  }
  const length = Number(headers['content-length'] ?? '0');
  if (rest.length < length) return null;
  return { status, headers, body: decode(rest.subarray(0, length), headers['content-encoding']) };
}

/**
 * Writes `bytes` on a fresh TLS connection and returns the first response, or how the
 * connection ended without one. For requests Node's own client refuses to send:
 * malformed request lines, bad header names, raw non-ASCII bytes, NUL bytes.
 */
export function rawExchange(origin: string, ca: string, bytes: Buffer | string, opts: { headOnly?: boolean; timeoutMs?: number } = {}): Promise<RawOutcome> {
  const url = new URL(origin);
  return new Promise((resolve, reject) => {
    let data = Buffer.alloc(0);
    let settled = false;
    const finish = (outcome: RawOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const socket = tls.connect({ host: url.hostname, port: Number(url.port), ca, servername: 'localhost' }, () => socket.write(bytes));
    const timer = setTimeout(() => finish({ kind: 'timeout' }), opts.timeoutMs ?? 5000);
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      try {
        const response = parseFirstResponse(data, opts.headOnly ?? false);
        if (response) finish({ kind: 'response', response });
      } catch (err) {
        settled = true;
        clearTimeout(timer);
        socket.destroy();
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
    // A reset after the answer was read, or while the server closes, is how the peer ends.
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (settled) return;
      const response = data.length > 0 ? parseFirstResponse(data, opts.headOnly ?? false) : null;
      finish(response ? { kind: 'response', response } : { kind: 'closed', bytes: data.length });
    });
  });
}

/**
 * A client whose refusal waits behind answers it never reads: on a fresh TLS connection,
 * answers larger than the connection's buffers, then bytes that are not HTTP, then a byte
 * every 200 ms. `stop` ends the client.
 */
export async function unreadRefusal(port: number, ca: string): Promise<{ socket: tls.TLSSocket; stop: () => void }> {
  const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
  socket.on('error', () => undefined);
  const drip = setInterval(() => socket.writable && socket.write('x'), 200);
  const stop = () => {
    clearInterval(drip);
    socket.destroy();
  };
  try {
    await once(socket, 'secureConnect');
  } catch (error) {
    stop();
    throw error;
  }
  socket.pause();
  socket.write(`${'GET /api/public/v1/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'.repeat(100)}\u0001not http\r\n\r\n`);
  return { socket, stop };
}

/**
 * Writes `bytes` (pipelined requests) on a fresh TLS connection, then closes its side with
 * `halfClose`, reads until the server closes, and returns the status of every answer read,
 * in order. `readAfterMs`: reads nothing until then (a client that reads late), while
 * writing `trickle` every 50 ms (what a client still sends after its requests). A reset rejects.
 */
export function pipelinedStatuses(origin: string, ca: string, bytes: string, { halfClose = false, readAfterMs = 0, trickle = '' } = {}): Promise<number[]> {
  const url = new URL(origin);
  return new Promise<number[]>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let dripping: NodeJS.Timeout | undefined;
    const socket = tls.connect({ host: url.hostname, port: Number(url.port), ca, servername: 'localhost' }, () => {
      if (readAfterMs > 0) {
        socket.pause();
        if (trickle !== '') dripping = setInterval(() => socket.writable && socket.write(trickle), 50);
        setTimeout(() => {
          clearInterval(dripping);
          socket.resume();
        }, readAfterMs);
      }
      socket.write(bytes);
      if (halfClose) socket.end();
    });
    socket.setTimeout(5000 + readAfterMs, () => socket.destroy(new Error(`no end within ${5000 + readAfterMs} ms: ${JSON.stringify(Buffer.concat(chunks).toString('utf8').slice(0, 200))}`)));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (error: Error) => {
      clearInterval(dripping);
      reject(error);
    });
    socket.on('close', () => {
      clearInterval(dripping);
      resolve([...Buffer.concat(chunks).toString('latin1').matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])));
    });
  });
}

const STATUS_OF_CODE = new Map(Object.entries(problemTypes).map(([code, { status }]) => [code as ProblemCode, status]));

/**
 * The contract for every error answer: never a 500, problem+json with a body that
 * matches the Problem schema, the body's status and code agree with the HTTP status,
 * the request id is the X-Request-Id header, and the status-specific headers are there.
 * A HEAD answer has no body to check.
 */
export function assertErrorAnswer(res: WireResponse, context: string, method = 'GET'): void {
  assert.notEqual(res.status, 500, `500 for ${context}: ${res.body.slice(0, 300)}`);
  if (res.status < 400) return;
  assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8', `${res.status} without problem+json for ${context}`);
  assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/, `no request id for ${context}`);
  if (res.status === 401) assert.equal(res.headers['www-authenticate'], 'Bearer realm="school-data"', context);
  if (res.status === 405) assert.equal(res.headers.allow, 'GET, HEAD', context);
  if (res.status === 429) assert.equal(res.headers['retry-after'], '60', context);
  if (method === 'HEAD') return;
  let body: unknown;
  try {
    body = JSON.parse(res.body);
  } catch {
    assert.fail(`${res.status} body is not JSON for ${context}: ${res.body.slice(0, 200)}`);
  }
  assert.ok(Value.Check(ProblemSchema, body), `body does not match the Problem schema for ${context}: ${res.body.slice(0, 300)}`);
  const problem = body as { status: number; code: ProblemCode; type: string; request_id: string };
  assert.equal(problem.status, res.status, context);
  assert.equal(STATUS_OF_CODE.get(problem.code), res.status, `code ${problem.code} with status ${res.status} for ${context}`);
  assert.equal(problem.type, `urn:school-data:problem:${problem.code}`, context);
  assert.equal(problem.request_id, res.headers['x-request-id'], context);
}

// ---------------------------------------------------------------------------------
// Arbitraries for requests that Node's HTTPS client can send.

export const QUERY_NAMES = ['limit', 'offset', 'status', 'category', 'group_id', 'is_active', 'period_from', 'period_to', 'instructor_id', 'student_id'] as const;

/** Percent-encodes what Node's client refuses in a path (outside 0x21-0xFF), keeping `%` raw so broken escapes get through. */
export function clientSafe(text: string): string {
  return [...text].map((ch) => (/^[\u0021-\u007e]$/u.test(ch) ? ch : encodeURIComponent(ch))).join('');
}

const hostileText = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 8 }),
  fc.constantFrom('%zz', '%', '%0', '%00', '%2e%2e', '%2F', '%C3%A9', '%E2%80%AE', '%FF%FE', '..', '.', '\u0000', '🚗', 'Ярослав', '٣', 'a\nb'),
  fc.constantFrom('1e309', '99999999999999999999', '-1', '+5', '0x10', '1.5', 'NaN', 'Infinity', ' 5', '05', '0'),
  fc.nat({ max: 6000 }).map((n) => 'x'.repeat(n)),
);

const validValue = fc.oneof(
  fc.integer({ min: -5, max: 1_000_010 }).map(String),
  fc.constantFrom('learning_practice', 'graduated', 'B', 'C1E', 'Tm', 'true', 'false', 's1', 'i1', 'g1', 'only-here', 'nobody'),
  fc.constantFrom('2026-01-01', '2026-12-31', '2026-02-30', '2026-03-01T09:00:00Z', '2026-03-01T12:00:00+03:00', '9999-12-31', '0000-01-01', '2026-03-01T25:00:00Z'),
);

const paramName = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...QUERY_NAMES) },
  { weight: 1, arbitrary: fc.constantFrom('a[]', 'a[b]', 'limit[]', 'limit[0]', '__proto__', 'constructor', 'hasOwnProperty', 'Limit', '', '%6c%69mit', 'li%00mit') },
  { weight: 1, arbitrary: hostileText },
);

const param = fc
  .tuple(paramName, fc.oneof({ weight: 3, arbitrary: validValue }, { weight: 2, arbitrary: hostileText }), fc.constantFrom('=', '=', '=', '', '=='))
  .map(([name, value, eq]) => `${clientSafe(name)}${eq}${clientSafe(value)}`);

/** A query string: none, `?` alone, or parameters (repeated and empty ones included). */
export const queryArb = fc.oneof(
  { weight: 1, arbitrary: fc.constant('') },
  { weight: 1, arbitrary: fc.constantFrom('?', '?&', '?&&', '?=', '?;', '?#') },
  { weight: 8, arbitrary: fc.array(param, { minLength: 1, maxLength: 6 }).chain((ps) => fc.constantFrom('&', '&&', ';').map((sep) => `?${ps.join(sep)}`)) },
);

// The public routes without their query strings: the fuzzer makes its own.
const ROUTE_PATHS = ROUTES.map((route) => route.split('?')[0]!);

const segment = fc.oneof(
  fc.constantFrom('..', '%2e%2e', '.', '%2E', '', 'students', 's1', 'only-here', '%2F', '%2f..%2f', '%5c', '\\', 'v2', 'openapi.json', '%zz', '%', '%00', ';x', '*'),
  fc.stringMatching(/^[A-Za-z0-9_-]{1,80}$/),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 }).map(encodeURIComponent),
  fc.nat({ max: 6000 }).map((n) => 'a'.repeat(n)),
);

/** Paths: real routes, and routes bent by dot segments, encodings, long and unicode ids, extra or doubled slashes. */
export const pathArb = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...ROUTE_PATHS) },
  {
    weight: 4,
    arbitrary: fc.tuple(fc.constantFrom(...ROUTE_PATHS), fc.array(segment, { minLength: 1, maxLength: 3 }), fc.boolean()).map(([base, extra, trailing]) => `${base}/${extra.join('/')}${trailing ? '/' : ''}`),
  },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom('/api/public/v1/students/', '/api/public/v1/'), segment).map(([base, s]) => clientSafe(base + s)) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '/', '//', '/api', '/api/public/v1', '/api/public/v1/', '/api/public/v1//students', '//api/public/v1/students', '/api/public/v1/students/', '/API/public/v1/students',
      '/api/public/v2/students', '/%61pi/public/v1/students', '/api/public/v1/%73tudents', '/api%2Fpublic%2Fv1%2Fstudents', '/api/public/v1/students%2Fs1', '/api/public/v1/./students',
      '/api/public/v1/../v1/students', '/api/public/v1/%2e%2e/v1/students', '/api/public/v1/students/..', '/api/public/v1/students/%2e%2e', '/api/public/v1/reports/', '/api/public/v1/reports/finance-summary/',
    ),
  },
);

export const methodArb = fc.oneof(
  { weight: 8, arbitrary: fc.constant('GET') },
  { weight: 2, arbitrary: fc.constant('HEAD') },
  { weight: 2, arbitrary: fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'PROPFIND', 'SEARCH', 'QUERY') },
);

export interface Keys {
  /** Active keys of schools whose plan allows API access. */
  valid: string[];
  /** Revoked keys, and keys of schools below Profi. */
  refused: string[];
}

/** Authorization header values: valid keys in every spelling, refused keys, and junk. */
export function authArb(keys: Keys): fc.Arbitrary<string | string[] | undefined> {
  const key = fc.constantFrom(...keys.valid, ...keys.refused);
  const scheme = fc.constantFrom('Bearer', 'bearer', 'BEARER', 'bEaReR', 'Basic', 'Token', 'Bearer:', '');
  const space = fc.constantFrom(' ', '  ', '\t', ' \t', '');
  const spelled = fc.tuple(scheme, space, key, fc.constantFrom('', ' ', '  ', '\t', 'x', '0', ',')).map(([s, sp, k, tail]) => `${s}${sp}${k}${tail}`);
  const junk = fc.oneof(
    fc.string({ maxLength: 40 }).map((s) => s.replace(/[^\t\u0020-\u007e]/g, '?')),
    fc.constantFrom('Bearer service_pk_', `Bearer service_pk_${'0'.repeat(32)}`, `Bearer service_pk_${'G'.repeat(32)}`, 'Bearer ÿÿÿ', 'Bearer é'),
    fc.nat({ max: 20_000 }).map((n) => `Bearer ${'k'.repeat(n)}`),
  );
  return fc.oneof(
    { weight: 5, arbitrary: key.map((k) => `Bearer ${k}`) },
    { weight: 4, arbitrary: spelled },
    { weight: 2, arbitrary: junk },
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.array(fc.oneof(key.map((k) => `Bearer ${k}`), spelled), { minLength: 2, maxLength: 3 }) },
  );
}

/** Other headers a hostile or careless client sends. */
export const extraHeadersArb: fc.Arbitrary<Record<string, string>> = fc
  .record(
    {
      'accept-encoding': fc.constantFrom('gzip', 'br', 'deflate', 'identity', 'gzip;q=0, br', '*', 'x-unknown'),
      accept: fc.constantFrom('application/json', 'text/html', '*/*', 'application/problem+json', ''),
      'x-forwarded-for': fc.constantFrom('1.2.3.4', '::1, 10.0.0.1', 'not an ip'),
      'x-request-id': fc.constantFrom('attacker-chosen', 'x'.repeat(500)),
      'if-none-match': fc.constantFrom('*', '"abc"', 'W/"x"'),
      range: fc.constantFrom('bytes=0-10', 'bytes=-1', 'items=1-2'),
      'x-big': fc.nat({ max: 24_000 }).map((n) => 'b'.repeat(n)),
      'x-latin': fc.constantFrom('\u00e9\u00ff', 'caf\u00e9'),
      origin: fc.constantFrom('https://evil.example', 'null'),
    },
    { requiredKeys: [] },
  );

/** Total size of a request's request line and headers, as the server counts it. */
export function headerBytes(req: FuzzRequest): number {
  let n = req.method.length + req.path.length + 12;
  for (const [name, value] of Object.entries(req.headers)) {
    for (const v of Array.isArray(value) ? value : [value]) n += name.length + Buffer.byteLength(v, 'latin1') + 4;
  }
  return n + 64;
}
