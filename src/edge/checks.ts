/**
 * The edge's first hook, run for every request of the API app before anything else:
 * notes its arrival (answer.ts) and refuses what the HTTP layer must refuse before any
 * key is looked at: a target over SCHOOL_DATA_MAX_URL_BYTES (414), a request line of another
 * HTTP version than 1.x, an HTTP/1.1 request without Host, any request with more than one
 * or with a Host that names no host (400, RFC 9112: which would name the server?), a target
 * with a '#' (400: a fragment is never sent) and a target that is neither a path, an
 * absolute URL nor '*' (400: Node's parser lets `*api/...` through).
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ResponseRecorder } from '../ops/metrics.js';
import { Problem } from '../problems/index.js';
import { noteArrival, problemAnswer, type SendAnswer } from './answer.js';
import { wellFormedTarget } from './paths.js';

const VERSION = new Problem('invalid_parameter', 'The request line must name HTTP/1.1 (or HTTP/1.0): this server speaks no other version.');
const NO_HOST = new Problem('invalid_parameter', 'An HTTP/1.1 request needs a Host header.');
const HOSTS = new Problem('invalid_parameter', 'A request may have one Host header, not more.');
const BAD_HOST = new Problem('invalid_parameter', 'The Host header must be a host name or address, optionally with a port (host:port).');
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
    return url.length > maxUrlBytes ? uriTooLong : (headRefusal(req) ?? (url.includes('#') ? FRAGMENT : null));
  };
}

/** The problem of a request's line or Host (headFault), or null. */
export function headRefusal(req: IncomingMessage): Problem | null {
  const fault = headFault(req);
  return fault === null ? null
    : fault === 'version' ? VERSION
    : fault === 'no-host' ? NO_HOST
    : fault === 'hosts' ? HOSTS
    : BAD_HOST;
}

/**
 * A Host value as RFC 9112 allows it: an IP literal in brackets or a registered name (which
 * may be empty, or a dotted IPv4 address), then an optional port.
 */
const HOST_VALUE = /^(?:\[[0-9A-Za-z._~!$&'()*+,;=:-]+\]|(?:[0-9A-Za-z._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*)(?::[0-9]*)?$/;

/**
 * What RFC 9112 refuses in a request's line and Host before anything else, or null: a version
 * other than 1.x (Node's parser lets `HTTP/2.0` and `HTTP/0.9` through), a Host missing from an
 * HTTP/1.1 request, given on more than one line (which would name the server?) or naming no
 * host. Both listeners answer each 400.
 */
export function headFault(req: IncomingMessage): 'version' | 'no-host' | 'hosts' | 'bad-host' | null {
  if (req.httpVersionMajor !== 1) return 'version';
  const host = req.headers.host;
  if (host === undefined) return req.httpVersionMinor === 1 ? 'no-host' : null;
  return headerRepeated(req, 'host') ? 'hosts' : HOST_VALUE.test(host) ? null : 'bad-host';
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
