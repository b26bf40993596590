/**
 * The edge's first hook, run for every request of the API app before anything else:
 * notes its arrival (answer.ts) and refuses what the HTTP layer must refuse before any
 * key is looked at: a target over SCHOOL_DATA_MAX_URL_BYTES (414), the faults of a request's
 * line and Host (headFault: 400, and another HTTP version closes the connection), a target
 * with a '#' (400: a fragment is never sent) and a target that is neither a path, an
 * absolute URL nor '*' (400: Node's parser lets `*api/...` through).
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ResponseRecorder } from '../ops/metrics.js';
import { Problem } from '../problems/index.js';
import { noteArrival, problemAnswer, type SendAnswer } from './answer.js';
import { wellFormedTarget } from './paths.js';

const OTHER_VERSION = new Problem('invalid_parameter', 'The request line must name HTTP/1.1 (or HTTP/1.0): this server speaks no other version.');
const HOST_MISSING = new Problem('invalid_parameter', 'An HTTP/1.1 request needs a Host header.');
const HOST_REPEATED = new Problem('invalid_parameter', 'A request may have one Host header, not more.');
const HOST_MALFORMED = new Problem('invalid_parameter', 'The Host header must be a host name or address, optionally with a port (host:port).');
const TARGET_FORM = new Problem('invalid_parameter', 'The request target must be a path that begins with "/" (or an absolute URL, https://host/...).');
export const FRAGMENT = new Problem('invalid_parameter', 'The request target contains "#": a URL\'s fragment is not sent to the server. Leave it out, or write "#" inside a value as %23.');

export function edgeChecks(options: { maxUrlBytes: number; unmatched: ResponseRecorder; send: SendAnswer }) {
  const { maxUrlBytes, unmatched, send } = options;
  const refusal = edgeRefusal(maxUrlBytes);
  return function checkRequest(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    noteArrival(request, unmatched);
    // The target's form is checked here, not in edgeRefusal: CONNECT's target (host:port) is no path.
    const problem = refusal(request.raw) ?? (wellFormedTarget(request.raw.url ?? '') ? null : TARGET_FORM);
    if (problem === null) done();
    // What follows a request line of another version cannot be read as HTTP/1.1 either.
    else if (problem === OTHER_VERSION) send(reply, { ...problemAnswer(problem, request.id), close: true });
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
    : fault === 'other-version' ? OTHER_VERSION
    : fault === 'host-missing' ? HOST_MISSING
    : fault === 'host-repeated' ? HOST_REPEATED
    : HOST_MALFORMED;
}

/**
 * A Host value as RFC 9112 allows it: an IP literal in brackets (an IPv6 address, with a zone
 * id after '%' as RFC 6874 writes it, or an IPvFuture) or a registered name (which may be
 * empty, or a dotted IPv4 address; a name in other scripts is sent as punycode), then an
 * optional port.
 */
const HOST_VALUE = /^(?:\[[0-9A-Za-z._~!$&'()*+,;=:%-]+\]|(?:[0-9A-Za-z._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*)(?::[0-9]*)?$/;

/**
 * What RFC 9112 refuses in a request's line and Host before anything else, or null: a version
 * other than 1.x (Node's parser lets `HTTP/2.0` and `HTTP/0.9` through), and a Host missing
 * from an HTTP/1.1 request, given on more than one line (which would name the server?) or
 * malformed. Both listeners answer each 400.
 */
export function headFault(req: IncomingMessage): 'other-version' | 'host-missing' | 'host-repeated' | 'host-malformed' | null {
  if (req.httpVersionMajor !== 1) return 'other-version';
  const host = req.headers.host;
  if (host === undefined) return req.httpVersionMinor === 1 ? 'host-missing' : null;
  return headerRepeated(req, 'host') ? 'host-repeated' : HOST_VALUE.test(host) ? null : 'host-malformed';
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
