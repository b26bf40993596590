/**
 * Answers written straight onto a socket, for what never became a request the app could
 * answer: bytes Node's parser refused, headers over the limit, a client too slow to send
 * its request. They are problem+json like every other error, and close the connection.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ApiMetrics, ClientErrorKind, ListenerName, ResponseRecorder } from '../ops/metrics.js';
import type { AccessLog } from '../ops/request-log.js';
import { methodNotAllowed, Problem, PROBLEM_CONTENT_TYPE } from '../problems/index.js';
import { FRAGMENT } from './checks.js';
import { HEADER_TOO_LARGE, NOT_FOUND } from './errors.js';
import { underPrefix } from './paths.js';
import { answeredBeforeBody, parserFailed } from './bodies.js';
import { flushHeldAnswers } from './turn-end.js';

const REQUEST_TIMEOUT = new Problem('request_timeout', 'The request (its line, headers and any body) did not arrive whole within the time allowed; the connection is closed.');
const NOT_HTTP = new Problem('invalid_parameter', 'The request is not valid HTTP/1.1 and could not be read.');

/**
 * Writes an answer straight onto a socket that Fastify never got a request from, and
 * closes it. `head` sends the headers of the problem without its body, as an answer
 * to HEAD must.
 */
export function writeRawProblem(socket: Duplex, status: number, problem: Problem, headers: Record<string, string>, head = false): string | null {
  if (!socket.writable) {
    // Ended already (an answer written before): closed once that is flushed.
    if (!socket.writableEnded) socket.destroy();
    return null;
  }
  const requestId = randomUUID();
  const body = problem.json(requestId);
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}`,
    `Date: ${new Date().toUTCString()}`,
    ...Object.entries({ ...headers, ...problem.options.headers }).map(([name, value]) => `${name}: ${value}`),
    `X-Request-Id: ${requestId}`,
    `Content-Type: ${PROBLEM_CONTENT_TYPE}`,
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
  ];
  socket.write(`${lines.join('\r\n')}\r\n\r\n${head ? '' : body}`);
  // Not destroyed at once, which could drop what is still buffered (such as a 100 Continue
  // written just before).
  closeLingering(socket);
  return requestId;
}

/** How long a connection whose last answer is written is still read, at most, before it is closed. */
const LINGER_MS = 2000;
/** The connections being read before they close (a raw answer's end, then Node's `destroySoon`, may both ask). */
const lingering = new Set<Duplex>();
/** The connections whose end is decided and whose last answer is not yet written whole (its client may be reading nothing). */
const ending = new Set<Duplex>();
/** The connections the server has closed, whose client's bytes are dropped unread (`dropWhatFollows`). */
const dropping = new WeakSet<Duplex>();

/**
 * For a stop, once its drain is over: closes the connections whose end is decided but whose
 * last answer still waits for a client that reads nothing, and resolves once the lingering
 * ones are closed (each within LINGER_MS), before the listeners close the connections they
 * count as idle.
 */
export async function settleClosingConnections(): Promise<void> {
  for (const socket of ending) socket.destroy();
  await Promise.all([...lingering].map((socket) => new Promise((resolve) => socket.once('close', resolve))));
}

/**
 * Ends a connection the server closes: from now on what the client sends is read and
 * dropped (`dropWhatFollows`), and once its last answer is written a while longer
 * (`linger`). It is each connection's `destroySoon` (src/edge/listener.ts), which Node calls
 * after an answer that closes the connection (`Connection: close`, another version, a
 * client's `Connection: close` or HTTP/1.0, the answers while the server stops).
 */
export function closeLingering(socket: Duplex): void {
  if (socket.destroyed) return;
  dropWhatFollows(socket);
  if (socket.writable) socket.end();
  if (socket.writableFinished) {
    linger(socket);
    return;
  }
  // Until its last answer is written: closed at its timeout at the latest, the bytes read and dropped meanwhile notwithstanding.
  endDecided(socket);
  socket.once('finish', () => linger(socket));
}

/**
 * Reads and drops what the client still sends on a connection whose last answer is written,
 * until the client closes its side or LINGER_MS pass: closed with bytes unread, a connection
 * ends with a reset, and the client's system then drops the answers it had not read yet (a
 * client that pipelines and reads late loses them). Node's parser, done with the connection,
 * is not given those bytes.
 */
function linger(socket: Duplex): void {
  if (socket.destroyed || lingering.has(socket)) return;
  ending.delete(socket);
  lingering.add(socket);
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  socket.once('close', () => {
    clearTimeout(timer);
    lingering.delete(socket);
  });
}

/**
 * From the moment the server closes a connection, what the client sends is read and dropped:
 * Node's parser, done with it, is not given it (the rest of a body still arriving included,
 * which could otherwise be refused after the answer: bodies.ts).
 */
function dropWhatFollows(socket: Duplex): void {
  if (dropping.has(socket)) return;
  dropping.add(socket);
  socket.removeAllListeners('data');
  socket.on('data', () => undefined);
  // Once the client's end is read, the connection closes by itself (its side was ended).
  socket.resume();
}

/** A request line's start: a method token and its space, from a given place (`lastIndex`). */
const REQUEST_START = /[!#$%&'*+.^_`|~0-9A-Za-z-]{1,1024} /y;

/**
 * Whether the refused request was a HEAD. The parser failed, so the only trace of the
 * method is the chunk it was reading: the refused request is the last one that starts in it
 * before where the parser stopped (at the chunk's start, or after a blank line, with a
 * method). That finds HEAD when the request line came in the same chunk as the error, behind
 * requests pipelined before it too; headers spanning several TLS records (over the size
 * limit, say), or a request timed out, leave no trace, and the answer has its body.
 */
function wasHead(error: Error): boolean {
  const { rawPacket: packet, bytesParsed } = error as { rawPacket?: unknown; bytesParsed?: unknown };
  if (!Buffer.isBuffer(packet)) return false;
  const stopped = typeof bytesParsed === 'number' ? bytesParsed : packet.length;
  const text = packet.toString('latin1', 0, Math.min(stopped + 1, packet.length));
  let head = false;
  // Whether the request found last declared a body: what follows its head is that body, not a request.
  let bodyFollows = false;
  for (let at = 0; ; ) {
    REQUEST_START.lastIndex = at;
    const blank = text.indexOf('\r\n\r\n', at);
    if (REQUEST_START.test(text)) {
      head = text.startsWith('HEAD ', at);
      bodyFollows = DECLARES_BODY.test(text.slice(at, blank === -1 ? undefined : blank + 2));
    } else if (!bodyFollows) {
      head = false;
    }
    if (blank === -1 || blank + 4 > stopped) return head;
    at = blank + 4;
  }
}

/** A request head that declares a body: a Content-Length other than zero, or a Transfer-Encoding. */
const DECLARES_BODY = /\r\n(?:content-length[ \t]*:[ \t]*0*[1-9]|transfer-encoding[ \t]*:)/i;

/**
 * A request line whose fault is only its method, one Node's parser does not know (`FOO`,
 * a lower-case `get`): a token, a target (from the root, or in absolute form), the version.
 * The parser failed, so the line is read from the chunk it was reading, from the start of the
 * line it stopped in (the chunk may begin with requests it read before).
 */
const UNKNOWN_METHOD_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]{1,1024}) ((?:\/|[a-zA-Z][a-zA-Z0-9+.-]*:\/\/)[\x21-\x7e]{0,4095}) HTTP\/1\.[01]\r\n/;

/**
 * The longest method an answer names: a longer one is not echoed, as it could be a secret
 * pasted there (a key's 32 hex digits, without their prefix, are valid method characters).
 */
const METHOD_NAMED = 16;

/**
 * The answer the app gives any method but GET and HEAD: 405 under the API's prefix, else 404;
 * with the line's method (when short enough to name) and target, for its access line.
 */
function unknownMethodProblem(error: Error & { code?: string }): { problem: Problem; method: string; url: string } | null {
  const { rawPacket: packet, bytesParsed } = error as { rawPacket?: unknown; bytesParsed?: unknown };
  if (error.code !== 'HPE_INVALID_METHOD' || !Buffer.isBuffer(packet) || typeof bytesParsed !== 'number') return null;
  const text = packet.toString('latin1');
  const start = text.lastIndexOf('\n', bytesParsed - 1) + 1;
  const line = UNKNOWN_METHOD_LINE.exec(text.slice(start, start + 5200));
  if (line === null) return null;
  const method = line[1]!.length <= METHOD_NAMED ? line[1]! : '';
  const url = line[2]!;
  // A fragment is refused before the method, as for any request (checks.ts).
  const problem = url.includes('#') ? FRAGMENT : underPrefix(url) ? methodNotAllowed(method === '' ? 'This method' : method) : NOT_FOUND;
  return { problem, method, url };
}

/**
 * Runs `then` once no answer to a request read whole before on the socket is still to be
 * written: Node hands the socket over at CONNECT, and reports bytes it cannot parse, while
 * the requests pipelined before may still be answered, each in its turn (the response
 * holding the socket is Node's `_httpMessage`). The answer to a request cut off midway (its
 * body is what failed) is not waited for: it is not written (bodies.ts).
 */
function afterEarlierAnswers(socket: Duplex, then: () => void): void {
  const current = (socket as { _httpMessage?: (ServerResponse & { _last?: boolean }) | null })._httpMessage;
  if (current == null || socket.destroyed || !current.req.complete) {
    then();
    return;
  }
  // Once a client has closed its side, Node makes the answer it is writing the connection's
  // last (`_last`) and ends the connection as that answer finishes: `then` runs just before,
  // unless that answer closes the connection itself (nothing is answered after it).
  const onFinish = () => {
    if (current._last !== true || !socket.readableEnded || closesConnection(current)) return;
    current.removeListener('close', onClose);
    then();
  };
  // Emitted once the answer is written (or its connection gone), after Node gave the socket to the next.
  const onClose = () => {
    current.removeListener('finish', onFinish);
    afterEarlierAnswers(socket, then);
  };
  current.prependOnceListener('finish', onFinish);
  current.once('close', onClose);
}

/** Whether an answer's head says `Connection: close` (Node's `_header`, the head as written). */
function closesConnection(response: ServerResponse): boolean {
  return /\r\nconnection: *close\r\n/i.test((response as { _header?: string | null })._header ?? '');
}

/**
 * Connections whose end is decided (a refusal on the socket, a close after the last answer,
 * an answer before its request's body): meanwhile Node reports the same connection again (its
 * timeouts, the failed parser given the bytes that follow, a request timeout while it lingers).
 */
const decided = new WeakSet<Duplex>();

/**
 * Notes a connection whose end is decided, false if it already was, and closes it once its
 * timeout (the idle or keep-alive one, from now) passes, if it has not closed by then: a
 * client that reads nothing keeps its last answer from being written, and the bytes it may go
 * on sending, read and dropped, would keep the idle timeout from running out. A stop closes
 * such connections once its drain is over (`settleClosingConnections`).
 */
function endDecided(socket: Duplex): boolean {
  if (decided.has(socket)) return false;
  decided.add(socket);
  ending.add(socket);
  const timer = setTimeout(() => socket.destroy(), (socket as Socket).timeout || FALLBACK_TIMEOUT_MS);
  socket.once('close', () => {
    clearTimeout(timer);
    ending.delete(socket);
  });
  return true;
}

/** The deadline of a decided answer on a socket that has no timeout of its own (the listeners always set one). */
const FALLBACK_TIMEOUT_MS = 30_000;

/** An answer written for a request the parser refused: its id and status, and the socket it went to. */
export interface RawAnswer {
  requestId: string;
  status: number;
  socket: Duplex;
  /** The refused request's method and target, when its line could be read (an unknown method's). */
  request?: { method: string; url: string };
}

/**
 * Answers a request that Node's HTTP parser refused before Fastify saw it: a request
 * line or header that is not HTTP, headers over the size limit, a client too slow to
 * send its request. The answer is problem+json like every other error; `observe` is told
 * of each refusal, with the answer when one was written (for its access line). A
 * connection whose TLS handshake failed or timed out is only closed. Never logged with
 * the raw bytes: they may carry the Authorization header. `apiRules` (the default): the
 * API's own rules apply (its held answers are written first; an unknown method is 405 under
 * its prefix, else 404); without them (the cabinet), an unknown method is a request that is
 * not HTTP.
 */
export function clientErrorHandler(headers: Record<string, string>, observe: (kind: ClientErrorKind, answer: RawAnswer | null) => void, { apiRules = true } = {}) {
  const answer = (kind: ClientErrorKind, socket: Duplex, status: number, problem: Problem, head = false, request?: RawAnswer['request']) => {
    if (!endDecided(socket)) return;
    // The answers to the requests read whole before go first.
    afterEarlierAnswers(socket, () => {
      const requestId = writeRawProblem(socket, status, problem, headers, head);
      observe(kind, requestId === null ? null : { requestId, status, socket, ...(request === undefined ? {} : { request }) });
    });
  };
  return function onClientError(error: Error & { code?: string }, socket: Duplex): void {
    const gone = error.code === 'ECONNRESET' || socket.destroyed;
    const tlsFailure = error.code?.startsWith('ERR_TLS_') === true || error.code?.startsWith('ERR_SSL_') === true;
    // What follows a request answered before its body had all arrived (that answer closes the
    // connection), or a connection the server has closed, is no request (the rest of a body,
    // its end, a timeout): nothing more is answered or counted. A request whose answer is not
    // written yet gets none but this refusal (bodies.ts).
    const over = !gone && (dropping.has(socket) || answeredBeforeBody(socket));
    if (!gone && !tlsFailure && !over) parserFailed(socket);
    // The answers to the requests read before the bad bytes go first (turn-end.ts).
    if (apiRules) flushHeldAnswers();
    if (gone) return;
    if (over && tlsFailure) {
      // Its TLS session is broken: nothing more can be read or written.
      socket.destroy();
      return;
    }
    if (over) {
      // Closed at its timeout from now at the latest, whatever its client goes on sending.
      if (!lingering.has(socket)) endDecided(socket);
      dropWhatFollows(socket);
      return;
    }
    if (tlsFailure) {
      // No TLS session (a handshake that failed or never finished): nothing can be written.
      observe('tls', null);
      socket.destroy();
    } else if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      // Answered like every other error, though a client this slow is rarely still reading.
      answer('timeout', socket, 408, REQUEST_TIMEOUT);
    } else if (error.code === 'HPE_HEADER_OVERFLOW') {
      answer('header_overflow', socket, 431, HEADER_TOO_LARGE, wasHead(error));
    } else {
      const unknownMethod = apiRules ? unknownMethodProblem(error) : null;
      if (unknownMethod !== null) answer('malformed', socket, unknownMethod.problem.status, unknownMethod.problem, false, { method: unknownMethod.method, url: unknownMethod.url });
      else answer('malformed', socket, 400, NOT_HTTP, wasHead(error));
    }
  };
}

/**
 * The records of what a listener answers on the socket, for its handlers' `observe`: each
 * client error counted by kind and listener, each answer's access line (the parser's within
 * the refusals' budget; CONNECT's as any other request's), and `onConnect` told a CONNECT's
 * status and time (the API counts it on its unmatched route).
 */
export function socketAnswerRecords(accessLog: AccessLog, metrics: ApiMetrics, listener: ListenerName, onConnect?: ResponseRecorder) {
  return {
    clientError: (kind: ClientErrorKind, answer: RawAnswer | null): void => {
      metrics.clientError(kind, listener);
      if (answer === null) return;
      const { remoteAddress, remotePort } = answer.socket as Socket;
      accessLog.refusedByParser({ requestId: answer.requestId, method: answer.request?.method ?? '', url: answer.request?.url ?? '', remoteAddress, remotePort, status: answer.status, responseTime: undefined, caller: null });
    },
    connect: (answer: RawAnswer, req: IncomingMessage, startedAt: number): void => {
      const { remoteAddress, remotePort } = answer.socket as Socket;
      const responseTime = performance.now() - startedAt;
      onConnect?.(answer.status, responseTime);
      accessLog.write({ requestId: answer.requestId, method: 'CONNECT', url: req.url ?? '', remoteAddress, remotePort, status: answer.status, responseTime, caller: null });
    },
  };
}

const CONNECT_NOT_ALLOWED = methodNotAllowed('CONNECT');

/**
 * Answers CONNECT, which only a proxy supports and Node hands to no request handler: as
 * the app answers any other method, the HTTP layer's refusals first (`refusal`: the API's
 * edgeRefusal, or a fault of the line or Host alone), then 404 (a proxy's `host:port` target
 * included), or with the API's rules 405 under its prefix, written onto the socket after
 * the answers to the requests before it. `observe` gets the answer and the request (its
 * line was read) for its access line.
 */
export function connectHandler(
  headers: Record<string, string>,
  refusal: (req: IncomingMessage) => Problem | null,
  observe: (answer: RawAnswer, req: IncomingMessage, startedAt: number) => void,
  { apiRules = true } = {},
) {
  return function onConnect(req: IncomingMessage, socket: Duplex): void {
    const startedAt = performance.now();
    // The answers to the requests read before it go first (turn-end.ts).
    if (apiRules) flushHeldAnswers();
    const problem = refusal(req) ?? (apiRules && underPrefix(req.url ?? '') ? CONNECT_NOT_ALLOWED : NOT_FOUND);
    // Node took its idle timeout's listener away with the socket: a client that reads nothing is still let go.
    if (!endDecided(socket)) return;
    afterEarlierAnswers(socket, () => {
      const requestId = writeRawProblem(socket, problem.status, problem, headers);
      if (requestId !== null) observe({ requestId, status: problem.status, socket }, req, startedAt);
    });
  };
}
