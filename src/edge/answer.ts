/**
 * The one writer of the API's answers. Every answer (a refusal, a stored answer, a fresh
 * answer, a problem) is built as an `Answer` value and written by the app's `SendAnswer`,
 * which also does what every answer needs: the common headers, compression, the entity
 * tag and the 304 for a matching If-None-Match, the end-of-turn holding (turn-end.ts),
 * the metrics of its route and its access line. Hooks, routes and error handlers are
 * given it; nothing else writes to an API response. The docs page's files, outside the
 * API, are sent by their plugin and noted by the writer (`written`): metrics, access line.
 */
import { transcode } from 'node:buffer';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { ResponseRecorder } from '../ops/metrics.js';
import { withoutPort } from '../domain/addresses.js';
import type { AccessLog, Caller, KeyRequest } from '../ops/request-log.js';
import { PROBLEM_CONTENT_TYPE, type Problem } from '../problems/index.js';
import { answeringBeforeBody, bodyState } from './bodies.js';
import { chosenEncoding, COMPRESS_FROM_BYTES, encoded, type KeptBody } from './encoding.js';
import { currentTurn, holdUntilTurnEnd, isRead } from './turn-end.js';

/** An answer, whole, before it is written. */
export interface Answer {
  status: number;
  /** Headers of this answer beyond the common ones, as name, value, name, value ... */
  headers: readonly string[];
  contentType: string;
  /** A data body, or a problem's text (sent as text, in one write with the headers, never compressed). */
  body: KeptBody | string;
  /** Data answers may be compressed; problems never are. */
  compressible: boolean;
  cacheControl: string;
  /**
   * What identifies the answer's content (validatorOf): with it, the answer carries a strong
   * ETag per representation and a matching If-None-Match is answered 304.
   */
  validator?: string;
  /** The connection is closed after it (as it is for every answer while the server closes). */
  close?: boolean;
  /** A page cut from a list kept whole (src/resources/cache.ts): counted when it is written. */
  cut?: boolean;
}

/** Cache-Control of problems (and of answers without a validator): never stored anywhere. */
const NO_STORE = 'no-store';
/** Cache-Control of data answers: a private cache may keep them, and asks again (If-None-Match) before each use. */
const REVALIDATE = 'private, no-cache';
const EMPTY: Buffer = Buffer.alloc(0);

/** Headers every answer of the API carries. */
export const COMMON_HEADERS: Readonly<Record<string, string>> = {
  'Strict-Transport-Security': 'max-age=31536000',
  'X-Content-Type-Options': 'nosniff',
};
const COMMON = Object.entries(COMMON_HEADERS).flat();

/** The headers of an answer written on the socket (src/edge/raw.ts): a problem's. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = { ...COMMON_HEADERS, 'Cache-Control': NO_STORE };

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

/**
 * The strong entity tag of one representation: the answer's validator and the content
 * coding the client negotiated (identity for none), so a gzip and a plain answer never
 * share a tag. (A small body is sent plain whatever was negotiated: two tags for one byte
 * string is allowed, one tag for two is not.)
 */
export function entityTag(validator: string, encoding: string | undefined): string {
  return `"${validator}-${encoding ?? 'identity'}"`;
}

/**
 * Whether an If-None-Match header matches `tag` (weak comparison, as RFC 9110 asks for this
 * header: a W/ prefix is ignored). `*` matches any current representation, when `star`; it is
 * the whole field or nothing (`*, "x"` is no valid field, and its `*` matches nothing).
 */
export function ifNoneMatch(header: string | undefined, tag: string, star: boolean): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return star;
  for (const part of header.split(',')) {
    const candidate = part.trim();
    if ((candidate.startsWith('W/') ? candidate.slice(2) : candidate) === tag) return true;
  }
  return false;
}

/** Whether a request's If-None-Match names the current tag of the answer with this validator (not `*`). */
export function unchanged(method: string | undefined, headers: IncomingHttpHeaders, validator: string): boolean {
  const header = headers['if-none-match'];
  return header !== undefined && ifNoneMatch(header, entityTag(validator, chosenEncoding(method, headers)), false);
}

/** A character beyond Latin-1: V8 then holds the whole string in two bytes a character. */
const WIDE = /[\u0100-\uffff]/;
/** transcode needs Node's ICU, which the official builds have. */
const CAN_TRANSCODE = process.versions.icu !== undefined;

/**
 * The UTF-8 bytes of a body made as text (a page from PostgreSQL, whose driver reads text
 * into a string). A string with characters beyond Latin-1 (names in Cyrillic) is held by V8
 * in two bytes a character, which Buffer.from encodes one character at a time, at three
 * times the cost of copying those bytes out and transcoding them in bulk; a Latin-1
 * string Buffer.from encodes fast (docs/performance.md, "A list's body from PostgreSQL").
 */
export function utf8(text: string): Buffer {
  if (CAN_TRANSCODE && WIDE.test(text)) {
    try {
      return transcode(Buffer.from(text, 'utf16le'), 'utf16le', 'utf8');
    } catch {
      // ICU refuses a lone surrogate; Buffer.from writes U+FFFD for it.
    }
  }
  return Buffer.from(text);
}

/** A body as it is sent without compression. */
export function plain(body: Buffer | string): KeptBody {
  const bytes = typeof body === 'string' ? utf8(body) : body;
  return { body: bytes, gzipped: false, plainLength: bytes.length };
}

/** The answer carrying a JSON body (stored or just made), which may be compressed; with a validator, it may be 304; `cut`: a page cut from a list kept whole. */
export function dataAnswer(body: KeptBody, contentType: string, validator?: string, cut = false): Answer {
  return { status: 200, headers: [], contentType, body, compressible: true, cacheControl: validator === undefined ? NO_STORE : REVALIDATE, validator, cut };
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
  return { status: problem.status, headers, contentType: PROBLEM_CONTENT_TYPE, body: problem.json(requestId), compressible: false, cacheControl: NO_STORE };
}

export interface WriterDeps {
  accessLog: AccessLog;
  /** The recorder of answers on no route. */
  unmatched: ResponseRecorder;
  /** True once the server stopped listening: answers then close their connection. */
  closing: () => boolean;
  /** Takes each answered request made with a key, for the key's request log. */
  keyRequests?: (request: KeyRequest) => void;
  /** Told of each page cut from a list kept whole that is written (a request refused after its page was begun is not). */
  cutWritten?: () => void;
}

/** Writes `answer` as the answer to the reply's request. */
export type SendAnswer = (reply: FastifyReply, answer: Answer) => void;

/**
 * What the writer reads of a request: Fastify's request has all of it, and so has the
 * exchange of a request answered before Fastify saw it (src/access/front.ts).
 */
export interface Exchange {
  readonly id: string;
  readonly raw: IncomingMessage;
  readonly headers: IncomingHttpHeaders;
  /** The client's address (trusted proxies applied); read only for a request made with a key. */
  readonly ip: string;
  startedAt: number;
  arrivedInTurn: number;
  caller: Caller | null;
  rateLimitHeaders: readonly string[] | null;
  recordAnswer: ResponseRecorder | null;
}

/** The writer itself: `answer` to the exchange's request, on `res`. */
export type WriteAnswer = (exchange: Exchange, res: ServerResponse, answer: Answer) => void;

/** The app's writer: the one for Fastify's replies, and the one it calls for every answer. */
export interface Writer {
  send: SendAnswer;
  write: WriteAnswer;
  /** Notes an answer Fastify wrote itself (the docs page's files, from their plugin): its metrics and access line, as the writer's own. */
  written: (request: FastifyRequest, status: number) => void;
}

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

/**
 * The client's address as Fastify sees it (the trusted proxies' setting applied); '' when the
 * connection is already gone. A trusted proxy may pass on what a client wrote itself in
 * X-Forwarded-For: text that is no address (it could be anything, a key too) is neither logged
 * nor kept in the key's request log; the TCP peer is (an allowlist refuses such a request).
 */
function clientAddress(request: Exchange): string {
  try {
    const ip = request.ip ?? '';
    const peer = request.raw.socket.remoteAddress;
    // Only a forwarded address can be something else: the peer's is taken as it is.
    if (ip === peer) return withoutPort(ip);
    const address = withoutPort(ip);
    return address === '' || isIP(address) !== 0 ? address : withoutPort(peer ?? '');
  } catch {
    return '';
  }
}

/**
 * Whether a request asks to switch protocols (`Upgrade` with `Connection: upgrade`), which no
 * route takes: Node's parser reads nothing more on its connection, so a next request there would
 * wait for the idle timeout; its answer closes the connection.
 */
export function asksUpgrade(raw: IncomingMessage): boolean {
  return raw.headers.upgrade !== undefined && /(?:^|[\s,])upgrade(?:$|[\s,])/i.test(raw.headers.connection ?? '');
}

/** The app's writer, bound to its access log, metrics and listener. */
export function answerWriter(deps: WriterDeps): Writer {
  const { accessLog, unmatched, closing, keyRequests, cutWritten } = deps;

  function write(request: Exchange, res: ServerResponse, status: number, headers: string[], bytes: Buffer | string, closes: boolean, cut: boolean): void {
    const raw = request.raw;
    // A body still arriving closes the connection after the answer; one the parser refused gets its refusal alone (bodies.ts).
    const body = bodyState(raw);
    if (body === 'refused') return;
    if (cut) cutWritten?.();
    if (body === 'arriving') answeringBeforeBody(raw.socket);
    if (closes || body === 'arriving' || asksUpgrade(raw)) headers.push('Connection', 'close');
    // Read before the answer is written: once the connection is gone, Node detaches its socket.
    const address = clientAddress(request);
    const port = raw.socket.remotePort;
    res.writeHead(status, headers);
    // A HEAD request gets the headers only: Node leaves the body out by itself.
    res.end(bytes);
    noteWritten(request, status, address, port);
  }

  /** An answer written: its metrics, its access line, and its line in its key's request log. */
  function noteWritten(request: Exchange, status: number, address: string, port: number | undefined): void {
    const raw = request.raw;
    const caller = request.caller ?? null;
    const responseTime = performance.now() - request.startedAt;
    (request.recordAnswer ?? unmatched)(status, responseTime);
    accessLog.write({
      requestId: request.id, method: raw.method ?? '', url: raw.url ?? '', remoteAddress: address === '' ? undefined : address, remotePort: port,
      status, responseTime, caller,
    });
    if (caller !== null && keyRequests !== undefined) {
      keyRequests({ keyId: caller.keyId, at: Date.now() - responseTime, method: raw.method ?? '', target: raw.url ?? '', status, requestId: request.id, address, durationMs: responseTime });
    }
  }

  function writeAnswer(request: Exchange, res: ServerResponse, answer: Answer): void {
    const method = request.raw.method;
    const body = answer.body;
    const negotiated = answer.compressible ? chosenEncoding(method, request.headers) : undefined;
    const encoding = typeof body !== 'string' && body.plainLength >= COMPRESS_FROM_BYTES ? negotiated : undefined;
    const headers = [...COMMON, 'X-Request-Id', request.id, 'Cache-Control', answer.cacheControl];
    if (request.rateLimitHeaders) headers.push(...request.rateLimitHeaders);
    // The tag names the coding asked for, whatever the body's length: every answer that may
    // be compressed varies with the two headers that choose it, its 304 too.
    if (answer.compressible) headers.push('Vary', 'accept-encoding, x-no-compression');
    let status = answer.status;
    let bytes: Buffer | string = EMPTY;
    if (answer.validator !== undefined) {
      const tag = entityTag(answer.validator, negotiated);
      headers.push('ETag', tag);
      if (status === 200 && ifNoneMatch(request.headers['if-none-match'], tag, true)) status = 304;
    }
    // A 304 has no body, and no header that describes one.
    if (status !== 304) {
      // A HEAD answer sent plain has its GET's length, known without unzipping a stored body.
      const plainHead = method === 'HEAD' && encoding === undefined && typeof body !== 'string';
      bytes = typeof body === 'string' ? body : plainHead ? EMPTY : encoded(body, encoding);
      headers.push(...answer.headers, 'Content-Type', answer.contentType);
      if (encoding !== undefined) headers.push('Content-Encoding', encoding);
      headers.push('Content-Length', String(plainHead ? body.plainLength : typeof bytes === 'string' ? Buffer.byteLength(bytes) : bytes.length));
    }
    const closes = answer.close === true || closing();
    // A cut page sent as a 304 (If-None-Match: *) is not counted as one.
    const cut = answer.cut === true && status !== 304;
    if (isRead(method) && request.arrivedInTurn === currentTurn()) holdUntilTurnEnd(() => write(request, res, status, headers, bytes, closes, cut));
    else write(request, res, status, headers, bytes, closes, cut);
  }

  return {
    write: writeAnswer,
    written: (request, status) => noteWritten(request, status, clientAddress(request), request.raw.socket?.remotePort),
    send(reply, answer) {
      const request = reply.request;
      // A request no hook has seen (a method no router knows: Fastify makes it a 404 with none
      // of the app's decorations) is noted here.
      if (!request.recordAnswer) noteArrival(request, unmatched);
      reply.hijack();
      writeAnswer(request, reply.raw, answer);
    },
  };
}
