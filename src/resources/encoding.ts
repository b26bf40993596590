/**
 * Response compression: what @fastify/compress does with the app's answers (registered in
 * src/app.ts with these settings), told here too for the stored answers (cache.ts), which
 * are kept gzipped and sent as they are to a client that would get gzip anyway.
 */
import type { IncomingHttpHeaders } from 'node:http';
import negotiate from '@fastify/accept-negotiator';

/** Bodies from this size on are compressed when the client accepts it (smaller ones gain nothing). */
export const COMPRESS_FROM_BYTES = 1024;

/** The encodings offered, in the server's order of preference. */
export const ENCODINGS: ('br' | 'gzip' | 'deflate')[] = ['br', 'gzip', 'deflate'];

const GZIP_ALIASES = /\*|x-gzip/gu;

/**
 * The encoding the app's answer to this request gets from @fastify/compress, by its own
 * rules: none for a request with `x-no-compression` or without Accept-Encoding, and `*`
 * and `x-gzip` read as gzip; and none for HEAD, whose routes (made by Fastify from the
 * GET ones) it does not compress. Undefined for none.
 */
export function chosenEncoding(method: string | undefined, headers: IncomingHttpHeaders): string | undefined {
  const accepted = headers['accept-encoding'];
  if (method === 'HEAD' || accepted === undefined || headers['x-no-compression'] !== undefined) return undefined;
  return negotiate(accepted.toLowerCase().replace(GZIP_ALIASES, 'gzip'), ENCODINGS) ?? undefined;
}
