/**
 * The one error handler and the one not-found handler of the API app. Expected failures
 * arrive as a Problem; data-store outages become 503; errors Fastify raises for the
 * client's request become their 4xx; anything else is a bug: 500 with a generic body, the
 * detail only in the log line that carries the same request id. Each is written by the
 * one writer (answer.ts).
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { isStoreUnavailable } from '../db/index.js';
import type { DependencyState } from '../ops/dependency.js';
import { callerFields } from '../ops/request-log.js';
import { methodNotAllowed, Problem } from '../problems/index.js';
import { problemAnswer, type SendAnswer } from './answer.js';
import { underPrefix } from './paths.js';

export const NOT_FOUND = new Problem('not_found', 'No resource at this path.');
const DATA_UNAVAILABLE = new Problem('data_unavailable', 'The data store is unavailable; try again shortly.', { headers: { 'Retry-After': '5' } });
const INTERNAL = new Problem('internal_error', 'An internal error occurred; the request id identifies it in our logs.');

/** Framework errors that are the client's fault, by Fastify error code. */
function clientProblem(error: FastifyError, request: FastifyRequest): Problem | null {
  const status = error.statusCode ?? 500;
  if (status >= 500) return null;
  // A method no router knows (PRI, the start of HTTP/2's preface) skips every hook: under
  // the prefix it gets the 405 the access hook gives any other method.
  if (error.code === 'FST_ERR_NOT_FOUND' && underPrefix(request.url)) return methodNotAllowed(request.method);
  if (status === 404 || error.code === 'FST_ERR_BAD_URL') return NOT_FOUND;
  if (status === 414) return new Problem('uri_too_long', 'The request URI is too long.');
  if (status === 431) return new Problem('header_too_large', 'The request headers are too large.');
  if (status === 405) return new Problem('method_not_allowed', 'This method is not supported.', { headers: { Allow: 'GET, HEAD' } });
  return new Problem('invalid_parameter', 'The request is malformed.');
}

/** The problem that answers `error`, logging what an operator must see. */
function problemFor(error: FastifyError, request: FastifyRequest, logger: Logger, database: DependencyState): Problem {
  const fields = () => ({ requestId: request.id, ...callerFields(request.caller) });
  if (error instanceof Problem) {
    if (error.status >= 500) logger.warn({ code: error.code, ...fields() }, error.detail);
    return error;
  }
  if (isStoreUnavailable(error)) {
    // Logged by the store's state, once per outage: the request's own line is its access line.
    database.refused(error);
    return DATA_UNAVAILABLE;
  }
  const client = clientProblem(error, request);
  if (client) return client;
  logger.error({ err: error, ...fields() }, 'unhandled error');
  return INTERNAL;
}

/** `database`: the data store's state, which logs and counts its outages (src/ops/dependency.ts). */
export function errorHandler(logger: Logger, send: SendAnswer, database: DependencyState) {
  return function onError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
    send(reply, problemAnswer(problemFor(error, request, logger, database), request.id));
  };
}

export function notFoundHandler(send: SendAnswer) {
  return function onNotFound(request: FastifyRequest, reply: FastifyReply): void {
    send(reply, problemAnswer(NOT_FOUND, request.id));
  };
}
