/**
 * The access gate: the first step of every request to the public API, in front of the
 * app (it is the HTTPS server's request listener, see buildApp). For a request whose
 * target starts with the API prefix it runs the access check, answers a refusal (405,
 * 401, 402, 429, 503) itself, and hands an allowed request on to the app with the
 * decision, which the app's access hook applies; or, when the app has stored its answer
 * to the very same request of the same school at the same data version, sends that.
 *
 * Refusals are answered here rather than by the app because they are what a flood is
 * made of (a scraper's unknown keys, a loader past its limit), and the app's work per
 * request (its request and reply objects, hooks, error path and serializer) costs several
 * times the check itself (docs/performance.md); stored answers for the same reason. An
 * answer given here is the one the app gives: the same body, headers, access line and
 * metrics. (A stored answer is sent here as it is stored, gzipped, to a client that the
 * app would send gzip, and unzipped to one that takes no compression; one the app would
 * compress otherwise, with br or deflate, is left to the app.)
 *
 * What the gate is not sure about it leaves to the app, which decides it the same way:
 * targets outside the prefix, percent-encoded paths (the router decodes them; the public
 * path check must see what the router sees), over-long URLs, targets with a '#' and HTTP/1.1
 * requests without Host (answered by the app's own checks first), and a check that threw (the data store
 * did not answer: the app's error handler answers and logs it).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { callerFields, type AccessLog, type Caller } from '../ops/request-log.js';
import type { ResponseRecorder } from '../ops/metrics.js';
import { PROBLEM_CONTENT_TYPE, type Problem } from '../problems/index.js';
import { noteLookup, plainBody, type StoredResponse } from '../resources/cache.js';
import { chosenEncoding } from '../resources/encoding.js';
import { atTurnEnd, mayHold, writeWaiting } from '../turn-end.js';
import { API_PREFIX, passAccess, pathOf, type Access, type AccessCheck, type Tenant } from './index.js';

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

interface GateDeps {
  check: AccessCheck;
  /** Paths under the prefix that need no key (the OpenAPI document). */
  publicPaths: ReadonlySet<string>;
  maxUrlBytes: number;
  /** Headers every answer carries (security headers). */
  headers: Readonly<Record<string, string>>;
  logger: Logger;
  accessLog: AccessLog;
  /** The metrics recorder of the route a path matches (or of unmatched paths). */
  recorderFor: (path: string) => ResponseRecorder;
  /** The stored 200 answer to this request target for this school, if there is one (src/resources/cache.ts). */
  stored: (tenant: Tenant, target: string) => StoredResponse | undefined;
  /** Bodies from this size on are compressed by the app when the client accepts it. */
  compressFrom: number;
  /**
   * True once the server has stopped listening (a graceful shutdown): answers then close
   * their connection, as the app's do, so that kept-alive clients let the shutdown end.
   */
  closing: () => boolean;
}

/** Where the gate leaves the request id it gave a request, for the app to use the same one. */
const REQUEST_ID = Symbol('school-data.request-id');

export function gateRequestId(raw: IncomingMessage): string | undefined {
  return (raw as IncomingMessage & { [REQUEST_ID]?: string })[REQUEST_ID];
}

/** One request the gate is deciding: what its answer and its log line need. */
interface Asked {
  req: IncomingMessage;
  res: ServerResponse;
  url: string;
  path: string;
  requestId: string;
  started: number;
}

export function accessGate(deps: GateDeps, app: RequestListener): RequestListener {
  const { check, publicPaths, maxUrlBytes, logger, accessLog, recorderFor, compressFrom } = deps;
  // Flattened once: writeHead takes [name, value, name, value ...].
  const common = Object.entries(deps.headers).flat();
  // Per refusal (a Problem is never changed): its headers but the request id and the length.
  const refusalHeaders = new WeakMap<Problem, string[]>();
  const headersOf = (problem: Problem): string[] => {
    let headers = refusalHeaders.get(problem);
    if (headers === undefined) {
      headers = [...common, 'Content-Type', PROBLEM_CONTENT_TYPE, ...Object.entries(problem.options.headers ?? {}).flat()];
      refusalHeaders.set(problem, headers);
    }
    return headers;
  };

  /**
   * Sends a whole answer: a read's at the end of the turn when it was decided in the turn
   * that read the request (src/turn-end.ts); at once when it was decided later, by a lookup
   * that came back from PostgreSQL (the lookups of a turn come back together, and so their
   * answers already leave in one burst), or when the request is not a read (mayHold).
   */
  function send(asked: Asked, decidedLater: boolean, status: number, headers: string[], body: string | Buffer, caller: Caller | null): void {
    if (decidedLater || !mayHold(asked.req.method)) write(asked, status, headers, body, caller);
    else atTurnEnd(() => write(asked, status, headers, body, caller));
  }

  /** Writes a whole answer and does its bookkeeping: metrics and the access line. */
  function write(asked: Asked, status: number, headers: string[], body: string | Buffer, caller: Caller | null): void {
    const { req, res } = asked;
    if (deps.closing()) headers.push('Connection', 'close');
    res.writeHead(status, headers);
    // A HEAD request gets the headers only: Node leaves the body out by itself.
    res.end(body);
    const responseTime = performance.now() - asked.started;
    recorderFor(asked.path)(status, responseTime);
    accessLog.write({
      requestId: asked.requestId, method: req.method ?? '', url: asked.url, remoteAddress: req.socket.remoteAddress, remotePort: req.socket.remotePort,
      status, responseTime, caller,
    });
  }

  /** `decidedLater`: by a lookup that came back after the turn that read the request. */
  function answer(asked: Asked, access: Access, decidedLater: boolean): void {
    const { req, res, requestId } = asked;
    if (access.allowed) {
      const stored = access.tenant === null ? undefined : storedFor(asked, access.tenant);
      if (stored === undefined || access.tenant === null) {
        writeWaiting();
        passAccess(req, { access });
        app(req, res);
        return;
      }
      const headers = [...common, 'X-Request-Id', requestId, 'RateLimit-Policy', access.rateLimit['RateLimit-Policy'], 'RateLimit', access.rateLimit.RateLimit];
      headers.push('Content-Type', stored.contentType);
      if (stored.encoding !== undefined) headers.push('Vary', 'accept-encoding', 'Content-Encoding', stored.encoding);
      headers.push('Content-Length', String(stored.body.length));
      send(asked, decidedLater, 200, headers, stored.body, access.caller);
      return;
    }
    const { problem, caller, rateLimit } = access;
    if (access.error !== undefined) logger.error({ err: access.error, requestId, ...callerFields(caller) }, 'rate-limit service unavailable');
    const body = problem.json(requestId);
    const headers = headersOf(problem).slice();
    headers.push('X-Request-Id', requestId, 'Content-Length', String(Buffer.byteLength(body)));
    if (rateLimit !== null) headers.push('RateLimit-Policy', rateLimit['RateLimit-Policy'], 'RateLimit', rateLimit.RateLimit);
    send(asked, decidedLater, problem.status, headers, body, caller);
  }

  /**
   * The stored answer to this request as the gate sends it (its body, and its encoding when
   * gzipped); undefined when there is none, or when the app would compress it for this
   * client otherwise than with gzip (the lookup is left to the app then).
   */
  function storedFor({ req, url }: Asked, tenant: Tenant): { body: Buffer; contentType: string; encoding?: 'gzip' } | undefined {
    if (req.method !== 'GET' && req.method !== 'HEAD') return undefined;
    const stored = deps.stored(tenant, url);
    if (stored !== undefined) {
      const encoding = stored.plainLength < compressFrom ? undefined : chosenEncoding(req.method, req.headers);
      if (encoding === undefined) return { body: plainBody(stored), contentType: stored.contentType };
      if (encoding === 'gzip' && stored.gzipped) return { body: stored.body, contentType: stored.contentType, encoding };
    }
    noteLookup(req, stored);
    return undefined;
  }

  function fail({ req, res }: Asked, failure: unknown): void {
    passAccess(req, { failure });
    app(req, res);
  }

  return function gate(req, res) {
    const url = req.url ?? '';
    if (!url.startsWith(API_PREFIX) || url.length > maxUrlBytes || url.includes('#') || (req.headers.host === undefined && req.httpVersion === '1.1')) {
      app(req, res);
      return;
    }
    const path = pathOf(url);
    if (path.includes('%')) {
      app(req, res);
      return;
    }
    const asked: Asked = { req, res, url, path, requestId: randomUUID(), started: performance.now() };
    (req as IncomingMessage & { [REQUEST_ID]?: string })[REQUEST_ID] = asked.requestId;

    let access: Access | Promise<Access>;
    try {
      access = check(req.method ?? '', req.headers.authorization, publicPaths.has(path));
    } catch (failure) {
      fail(asked, failure);
      return;
    }
    if (access instanceof Promise) {
      access.then(
        (decided) => answer(asked, decided, true),
        (failure: unknown) => fail(asked, failure),
      );
    } else {
      answer(asked, access, false);
    }
  };
}
