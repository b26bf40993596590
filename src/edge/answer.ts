/**
 * The one writer of the API's answers. Every answer (a refusal, a stored answer, a fresh
 * answer, a problem) is built as an `Answer` value and written by the app's `SendAnswer`,
 * which also does what every answer needs: the common headers, compression, the
 * end-of-turn holding (turn-end.ts), the metrics of its route and its access line. Hooks,
 * routes and error handlers are given it; nothing else writes to an API response.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { performance } from 'node:perf_hooks';
import type { ResponseRecorder } from '../ops/metrics.js';
import type { AccessLog, Caller } from '../ops/request-log.js';
import { PROBLEM_CONTENT_TYPE, type Problem } from '../problems/index.js';
import { chosenEncoding, COMPRESS_FROM_BYTES, encoded, type KeptBody } from './encoding.js';
import { currentTurn, holdUntilTurnEnd, isRead } from './turn-end.js';

/** An answer, whole, before it is written. */
export interface Answer {
  status: number;
  /** Headers of this answer beyond the common ones, as name, value, name, value ... */
  headers: readonly string[];
  contentType: string;
  body: KeptBody;
  /** Data answers may be compressed; problems never are. */
  compressible: boolean;
}

/** Headers every answer of the API carries. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Strict-Transport-Security': 'max-age=31536000',
  'X-Content-Type-Options': 'nosniff',
  'Cache-Control': 'no-store',
};
const COMMON = Object.entries(SECURITY_HEADERS).flat();

declare module 'fastify' {
  interface FastifyRequest {
    /** When the request reached the app (performance.now()), for its response time. */
    startedAt: number;
    /** The turn of the event loop it arrived in (turn-end.ts). */
    arrivedInTurn: number;
    /** The key and school, once the key is known: the access line and error lines carry them. */
    caller: Caller | null;
    /** RateLimit-Policy and RateLimit (name, value ...), once the school's limit was checked. */
    rateLimitHeaders: readonly string[] | null;
    /** The pattern of the route the router matched (undefined: none), read once on arrival. */
    route: string | undefined;
    /** Records the answer in the metrics of that route (or of unmatched paths); null until noted. */
    recordAnswer: ResponseRecorder | null;
  }
  interface FastifyContextConfig {
    /** The metrics recorder of the route's pattern, bound when the route is added. */
    recordAnswer?: ResponseRecorder;
  }
}

/** A body as it is sent without compression. */
export function plain(body: Buffer | string): KeptBody {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  return { body: bytes, gzipped: false, plainLength: bytes.length };
}

/** The answer carrying a JSON body (stored or just made), which may be compressed. */
export function dataAnswer(body: KeptBody, contentType: string): Answer {
  return { status: 200, headers: [], contentType, body, compressible: true };
}

/** Per Problem (a Problem is never changed): its own headers, flattened once. */
const problemHeaders = new WeakMap<Problem, string[]>();

/** The answer for a problem: its status, its headers and its problem+json body. */
export function problemAnswer(problem: Problem, requestId: string): Answer {
  let headers = problemHeaders.get(problem);
  if (headers === undefined) {
    headers = Object.entries(problem.options.headers ?? {}).flat();
    problemHeaders.set(problem, headers);
  }
  return { status: problem.status, headers, contentType: PROBLEM_CONTENT_TYPE, body: plain(problem.json(requestId)), compressible: false };
}

export interface WriterDeps {
  accessLog: AccessLog;
  /** The recorder of answers on no route. */
  unmatched: ResponseRecorder;
  /** True once the server stopped listening: answers then close their connection. */
  closing: () => boolean;
}

/** Writes `answer` as the answer to the reply's request. */
export type SendAnswer = (reply: FastifyReply, answer: Answer) => void;

/**
 * Notes a request's arrival, the first thing the app does with every request: the time,
 * the turn, and its route's pattern and recorder (`unmatched` when it has none).
 */
export function noteArrival(request: FastifyRequest, unmatched: ResponseRecorder): void {
  request.startedAt = performance.now();
  request.arrivedInTurn = currentTurn();
  const route = request.routeOptions;
  request.route = route.url;
  request.recordAnswer = route.url === undefined ? unmatched : (route.config.recordAnswer ?? unmatched);
}

/** The app's writer, bound to its access log, metrics and listener. */
export function answerWriter(deps: WriterDeps): SendAnswer {
  const { accessLog, unmatched, closing } = deps;

  function write(request: FastifyRequest, reply: FastifyReply, status: number, headers: string[], bytes: Buffer): void {
    const res = reply.raw;
    res.writeHead(status, headers);
    // A HEAD request gets the headers only: Node leaves the body out by itself.
    res.end(bytes);
    const responseTime = performance.now() - request.startedAt;
    (request.recordAnswer ?? unmatched)(status, responseTime);
    const raw = request.raw;
    accessLog.write({
      requestId: request.id, method: raw.method ?? '', url: raw.url ?? '', remoteAddress: raw.socket.remoteAddress, remotePort: raw.socket.remotePort,
      status, responseTime, caller: request.caller ?? null,
    });
  }

  return function sendAnswer(reply, answer) {
    const request = reply.request;
    // A request no hook has seen (a method no router knows: Fastify makes it a 404 with none
    // of the app's decorations) is noted here.
    if (!request.recordAnswer) noteArrival(request, unmatched);
    reply.hijack();
    const method = request.raw.method;
    const encoding = answer.compressible && answer.body.plainLength >= COMPRESS_FROM_BYTES ? chosenEncoding(method, request.headers) : undefined;
    const bytes = encoded(answer.body, encoding);
    const headers = [...COMMON, 'X-Request-Id', request.id];
    if (request.rateLimitHeaders) headers.push(...request.rateLimitHeaders);
    headers.push(...answer.headers, 'Content-Type', answer.contentType);
    if (encoding !== undefined) headers.push('Vary', 'accept-encoding', 'Content-Encoding', encoding);
    headers.push('Content-Length', String(bytes.length));
    if (closing()) headers.push('Connection', 'close');
    if (isRead(method) && request.arrivedInTurn === currentTurn()) holdUntilTurnEnd(() => write(request, reply, answer.status, headers, bytes));
    else write(request, reply, answer.status, headers, bytes);
  };
}
