/**
 * What a request looks like in a log line. The Authorization header is never logged
 * (src/logger.ts redacts it), but a client may also paste its key into the URL
 * (`?api_key=service_pk_...`), and the URL is logged with every request: anything
 * shaped like a key is masked there before it reaches a log line.
 */
import type { FastifyRequest } from 'fastify';

// Also matches a percent-encoded or upper-cased prefix and a truncated value: whatever
// follows the prefix up to the next delimiter is masked.
const KEY_IN_TEXT = /service(?:_|%5f)pk(?:_|%5f)[^&/?#\s"]*/gi;

export const REDACTED_KEY = '[redacted-key]';

export function redactKeys(text: string): string {
  return text.replace(KEY_IN_TEXT, REDACTED_KEY);
}

export interface LoggedRequest {
  method: string;
  url: string;
  remoteAddress: string | undefined;
  remotePort: number | undefined;
}

/** The `req` serializer of the API's logger (replaces Fastify's, which logs the raw URL). */
export function requestForLog(request: FastifyRequest): LoggedRequest {
  return {
    method: request.method,
    url: redactKeys(request.url),
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}
