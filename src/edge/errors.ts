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
import { callerFields, type Caller } from '../ops/request-log.js';
import { methodNotAllowed, Problem } from '../problems/index.js';
import { problemAnswer, type Answer, type SendAnswer } from './answer.js';
import { underPrefix } from './paths.js';

export const NOT_FOUND = new Problem('not_found', 'No resource at this path.');
/** 431, whether the parser or Fastify finds it. */
export const HEADER_TOO_LARGE = new Problem('header_too_large', 'The request line and headers are over the size limit.');
const DATA_UNAVAILABLE = new Problem('data_unavailable', 'The data store is unavailable; try again shortly.', { headers: { 'Retry-After': '5' } });
const INTERNAL = new Problem('internal_error', 'An internal error occurred; the request id identifies it in our logs.');

/** What an error's answer reads of its request: Fastify's request has it, and so has the front's exchange. */
export interface FailedRequest {
  readonly id: string;
  readonly caller: Caller | null;
  readonly method: string;
  readonly url: string;
}

/** Framework errors that are the client's fault, by Fastify error code. */
function clientProblem(error: FastifyError, request: FailedRequest): Problem | null {
  const status = error.statusCode ?? 500;
  if (status >= 500) return null;
  // A method no router knows (PRI, the start of HTTP/2's preface) skips every hook: under
  // the prefix it gets the 405 the access hook gives any other method.
  if (error.code === 'FST_ERR_NOT_FOUND' && underPrefix(request.url)) return methodNotAllowed(request.method);
  // A body is read only for a method no route takes (under the prefix it is 405 before that):
  // one that cannot be read (malformed, too large, of an unknown type) is still no such path.
  if (error.code?.startsWith('FST_ERR_CTP_') === true) return underPrefix(request.url) ? methodNotAllowed(request.method) : NOT_FOUND;
  if (status === 404 || error.code === 'FST_ERR_BAD_URL') return NOT_FOUND;
  if (status === 414) return new Problem('uri_too_long', 'The request URI is too long.');
  if (status === 431) return HEADER_TOO_LARGE;
  if (status === 405) return methodNotAllowed(request.method);
  return new Problem('invalid_parameter', 'The request is malformed.');
}

/** The problem that answers `error`, logging what an operator must see. */
function problemFor(error: FastifyError, request: FailedRequest, logger: Logger, database: DependencyState): Problem {
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

/** The answer to a request that failed with `error`. */
export type ErrorAnswer = (error: unknown, request: FailedRequest) => Answer;

/** `database`: the data store's state, which logs and counts its outages (src/ops/dependency.ts). */
export function errorAnswer(logger: Logger, database: DependencyState): ErrorAnswer {
  return (error, request) => problemAnswer(problemFor(error as FastifyError, request, logger, database), request.id);
}

/** The app's error handler: every error of a request Fastify runs is answered by `answerError`. */
export function errorHandler(answerError: ErrorAnswer, send: SendAnswer) {
  return function onError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
    send(reply, answerError(error, request));
  };
}

export function notFoundHandler(send: SendAnswer) {
  return function onNotFound(request: FastifyRequest, reply: FastifyReply): void {
    send(reply, problemAnswer(NOT_FOUND, request.id));
  };
}
