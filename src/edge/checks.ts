/**
 * The edge's first hook, run for every request of the API app before anything else:
 * notes its arrival (answer.ts) and refuses what the HTTP layer must refuse before any
 * key is looked at: a target over SCHOOL_DATA_MAX_URL_BYTES (414), an HTTP/1.1 request
 * without Host or any request with more than one (400, RFC 9112: which would name the
 * server?), a target with a '#' (400: a fragment is never sent) and a target that is neither
 * a path, an absolute URL nor '*' (400: Node's parser lets `*api/...` through).
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ResponseRecorder } from '../ops/metrics.js';
import { Problem } from '../problems/index.js';
import { noteArrival, problemAnswer, type SendAnswer } from './answer.js';
import { wellFormedTarget } from './paths.js';

const NO_HOST = new Problem('invalid_parameter', 'An HTTP/1.1 request needs a Host header.');
const HOSTS = new Problem('invalid_parameter', 'A request may have one Host header, not more.');
const TARGET_FORM = new Problem('invalid_parameter', 'The request target must be a path that begins with "/" (or an absolute URL, https://host/...).');
const FRAGMENT = new Problem('invalid_parameter', 'The request target contains "#": a URL\'s fragment is not sent to the server. Leave it out, or write "#" inside a value as %23.');

export function edgeChecks(options: { maxUrlBytes: number; unmatched: ResponseRecorder; send: SendAnswer }) {
  const { maxUrlBytes, unmatched, send } = options;
  const refusal = edgeRefusal(maxUrlBytes);
  return function checkRequest(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    noteArrival(request, unmatched);
    // The target's form is checked here, not in edgeRefusal: CONNECT's target (host:port) is no path.
    const problem = refusal(request.raw) ?? (wellFormedTarget(request.raw.url ?? '') ? null : TARGET_FORM);
    if (problem === null) done();
    else send(reply, problemAnswer(problem, request.id));
  };
}

/** What the HTTP layer refuses of a request before anything else is looked at, or null (for CONNECT too: src/edge/raw.ts). */
export function edgeRefusal(maxUrlBytes: number): (req: IncomingMessage) => Problem | null {
  const uriTooLong = new Problem('uri_too_long', `The request URI is over ${maxUrlBytes} bytes.`);
  return (req) => {
    const url = req.url ?? '';
    const host = hostFault(req);
    return url.length > maxUrlBytes ? uriTooLong
      : host === 'missing' ? NO_HOST
      : host === 'repeated' ? HOSTS
      : url.includes('#') ? FRAGMENT
      : null;
  };
}

/**
 * What RFC 9112 refuses in a request's Host: missing from an HTTP/1.1 request, or given
 * on more than one line (which would name the server?); null when neither. Both listeners
 * answer it 400.
 */
export function hostFault(req: IncomingMessage): 'missing' | 'repeated' | null {
  if (req.headers.host === undefined) return req.httpVersion === '1.1' ? 'missing' : null;
  return headerRepeated(req, 'host') ? 'repeated' : null;
}

/**
 * Whether `req` has more than one line of the header `name` (lower case): Node keeps only
 * the first Host or Authorization in `headers`. Only worth asking when it has one.
 */
export function headerRepeated(req: IncomingMessage, name: string): boolean {
  const raw = req.rawHeaders;
  let seen = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const line = raw[i]!;
    if (line.length === name.length && line.toLowerCase() === name && ++seen > 1) return true;
  }
  return false;
}
