/**
 * Request bodies. No endpoint reads one, but a request may carry one (a GET may), and Node's
 * parser reads it after the request's handler has run, so an answer can be ready while its
 * request's body is still arriving. Rules (docs/decisions.md, "A body still arriving"):
 * - such an answer closes the connection, and what the parser reports after it (a malformed
 *   rest, the client's end, the request timeout) is neither answered nor counted (src/edge/raw.ts),
 *   so one request gets one answer, and no answer waits for an upload;
 * - a request whose body the parser refused before its answer was written gets none: the
 *   parser's answer is the one answer (RFC 9112 section 6.3).
 */
import type { IncomingMessage } from 'node:http';

/** The connections whose parser failed (the raw answers' handler notes them before writing the held answers). */
const failed = new WeakSet<object>();

export function parserFailed(socket: object): void {
  failed.add(socket);
}

/** The connections on which an answer was written while its request's body was still arriving. */
const answeredEarly = new WeakSet<object>();

/** Notes an answer written while its request's body is still arriving (it closes the connection). */
export function answeringBeforeBody(socket: object): void {
  answeredEarly.add(socket);
}

/** Whether an answer went before its request's body on this connection: what the parser reports after it is no request. */
export function answeredBeforeBody(socket: object): boolean {
  return answeredEarly.has(socket);
}

/** Where a request's body stands as its answer is written. */
export type BodyState = 'whole' | 'arriving' | 'refused';

export function bodyState(raw: IncomingMessage): BodyState {
  // Node marks a request without a body complete only after its handler returned (a PRI request never).
  if (raw.complete || !declaresBody(raw)) return 'whole';
  return failed.has(raw.socket) ? 'refused' : 'arriving';
}

/** A length the parser took (digits only) is no body when it is zero however written (`00`). */
function declaresBody(raw: IncomingMessage): boolean {
  const length = raw.headers['content-length'];
  return raw.headers['transfer-encoding'] !== undefined || (length !== undefined && Number(length) !== 0);
}
