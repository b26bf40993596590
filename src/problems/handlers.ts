/**
 * The one error handler and the one not-found handler. Expected failures arrive as
 * Problem; data-store outages become 503; anything else is a bug: 500 with a generic
 * body, and the detail only in the log line that carries the same request id.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isStoreUnavailable } from '../db/index.js';
import { callerFields } from '../ops/request-log.js';
import { writeWaiting } from '../turn-end.js';
import { Problem, PROBLEM_CONTENT_TYPE } from './index.js';

export function sendProblem(request: FastifyRequest, reply: FastifyReply, problem: Problem): FastifyReply {
  reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).header('X-Request-Id', request.id);
  if (problem.options.headers) reply.headers(problem.options.headers);
  return reply.send(problem.body(request.id));
}

/** Framework errors that are the client's fault, by Fastify error code. */
function clientProblem(error: FastifyError): Problem | null {
  const status = error.statusCode ?? 500;
  if (status >= 500) return null;
  if (status === 404 || error.code === 'FST_ERR_BAD_URL') return new Problem('not_found', 'No resource at this path.');
  if (status === 414) return new Problem('uri_too_long', 'The request URI is too long.');
  if (status === 431) return new Problem('header_too_large', 'The request headers are too large.');
  if (status === 405) return new Problem('method_not_allowed', 'This method is not supported.', { headers: { Allow: 'GET, HEAD' } });
  return new Problem('invalid_parameter', 'The request is malformed.');
}

export function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (error instanceof Problem) {
    if (error.status >= 500) request.log.warn({ code: error.code, ...callerFields(request.caller) }, error.detail);
    return sendProblem(request, reply, error);
  }
  if (isStoreUnavailable(error)) {
    request.log.error({ err: error, ...callerFields(request.caller) }, 'data store unavailable');
    return sendProblem(request, reply, new Problem('data_unavailable', 'The data store is unavailable; try again shortly.', { headers: { 'Retry-After': '5' } }));
  }
  const client = clientProblem(error);
  if (client) return sendProblem(request, reply, client);
  request.log.error({ err: error, ...callerFields(request.caller) }, 'unhandled error');
  return sendProblem(request, reply, new Problem('internal_error', 'An internal error occurred; the request id identifies it in our logs.'));
}

export function notFoundHandler(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return sendProblem(request, reply, new Problem('not_found', 'No resource at this path.'));
}

const REQUEST_TIMEOUT = new Problem('request_timeout', 'The request line and headers did not arrive within the time allowed; the connection is closed.');

/** How a connection-level failure is counted (see ops/metrics.ts). */
export type ClientErrorKind = 'tls' | 'header_overflow' | 'timeout' | 'malformed';

/**
 * Writes an answer straight onto a socket that Fastify never got a request from, and
 * closes it. `head` sends the headers of the problem without its body, as an answer
 * to HEAD must.
 */
export function writeRawProblem(socket: Duplex, status: number, problem: Problem, headers: Record<string, string>, head = false): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const requestId = randomUUID();
  const body = problem.json(requestId);
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}`,
    ...Object.entries({ ...headers, ...problem.options.headers }).map(([name, value]) => `${name}: ${value}`),
    `X-Request-Id: ${requestId}`,
    `Content-Type: ${PROBLEM_CONTENT_TYPE}`,
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
  ];
  // Closed once the answer is flushed (destroying at once could drop what is still
  // buffered, such as a 100 Continue written just before).
  socket.end(`${lines.join('\r\n')}\r\n\r\n${head ? '' : body}`, () => socket.destroy());
}

/**
 * Whether the refused request was a HEAD. The parser failed, so the only trace of the
 * method is the chunk it was reading: that finds HEAD when the request line came in
 * the same chunk as the error (it does unless the headers span several TLS records).
 */
function wasHead(error: Error): boolean {
  const packet = (error as { rawPacket?: unknown }).rawPacket;
  return Buffer.isBuffer(packet) && packet.subarray(0, 5).toString('latin1') === 'HEAD ';
}

/**
 * Answers a request that Node's HTTP parser refused before Fastify saw it: a request
 * line or header that is not HTTP, headers over the size limit, a client too slow to
 * send its request. The answer is problem+json like every other error. A connection
 * whose TLS handshake failed or timed out is only closed. Never logged with the raw
 * bytes: they may carry the Authorization header.
 */
export function clientErrorHandler(headers: Record<string, string>, observe: (kind: ClientErrorKind) => void) {
  return function onClientError(error: Error & { code?: string }, socket: Duplex): void {
    // The answers to the requests read before the bad bytes go first (src/turn-end.ts).
    writeWaiting();
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    if (error.code?.startsWith('ERR_TLS_') || error.code?.startsWith('ERR_SSL_')) {
      // No TLS session (a handshake that failed or never finished): nothing can be written.
      observe('tls');
      socket.destroy();
    } else if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      observe('timeout');
      // Answered like every other error, though a client this slow is rarely still reading.
      writeRawProblem(socket, 408, REQUEST_TIMEOUT, headers);
    } else if (error.code === 'HPE_HEADER_OVERFLOW') {
      observe('header_overflow');
      writeRawProblem(socket, 431, new Problem('header_too_large', 'The request line and headers are over the size limit.'), headers, wasHead(error));
    } else {
      observe('malformed');
      writeRawProblem(socket, 400, new Problem('invalid_parameter', 'The request is not valid HTTP/1.1 and could not be read.'), headers, wasHead(error));
    }
  };
}
