/**
 * Response compression for every API answer. Rules:
 * - only bodies of COMPRESS_FROM_BYTES or more, to GET and HEAD alike (a HEAD answer has
 *   the headers its GET would: the encoding, the tag and the encoded length);
 * - the encoding is negotiated from Accept-Encoding (`x-gzip` is gzip; `*` is gzip, or the
 *   encodings the header does not name when it names gzip; none with `x-no-compression`),
 *   br first, then gzip, then deflate;
 * - the same body always compresses to the same bytes (zlib's fastest level for gzip and
 *   deflate, brotli quality 4), whether it was just made or stored gzipped, so one
 *   representation is one byte string (docs/decisions.md, "Compression").
 */
import type { IncomingHttpHeaders } from 'node:http';
import { brotliCompressSync, constants, deflateSync, gunzipSync, gzipSync } from 'node:zlib';
import negotiate from '@fastify/accept-negotiator';

/** Bodies from this size on are compressed when the client accepts it (smaller ones gain nothing). */
export const COMPRESS_FROM_BYTES = 1024;

export type Encoding = 'br' | 'gzip' | 'deflate';

/** The encodings offered, in the server's order of preference. */
const ENCODINGS: Encoding[] = ['br', 'gzip', 'deflate'];

/**
 * The header with `x-gzip` read as gzip and `*` spelled out: gzip (what the stored answers
 * keep) unless gzip is named, else the encodings it does not name, each with the `*`'s
 * weight. The negotiator would read `*` as br even where br is refused (`br;q=0, *`).
 */
function spelledOut(accepted: string): string {
  const lower = accepted.toLowerCase();
  if (!lower.includes('*') && !lower.includes('x-gzip')) return lower;
  const parts = lower.split(',').map((part) => {
    const [token = '', ...params] = part.split(';');
    return { token: token.trim() === 'x-gzip' ? 'gzip' : token.trim(), params: params.length === 0 ? '' : `;${params.join(';')}` };
  });
  const named = new Set(parts.map((p) => p.token));
  const wild = named.has('gzip') ? ENCODINGS.filter((e) => !named.has(e)) : ['gzip'];
  return parts.flatMap(({ token, params }) => (token === '*' ? wild : [token]).map((t) => `${t}${params}`)).join(',');
}

/** The encoding a GET's (or HEAD's) answer gets, or undefined for none. */
export function chosenEncoding(method: string | undefined, headers: IncomingHttpHeaders): Encoding | undefined {
  const accepted = headers['accept-encoding'];
  if ((method !== 'GET' && method !== 'HEAD') || accepted === undefined || headers['x-no-compression'] !== undefined) return undefined;
  return negotiate<Encoding>(spelledOut(accepted), ENCODINGS) ?? undefined;
}

/** A body as the stored answers keep it: as sent, or gzipped when room was needed. */
export interface KeptBody {
  body: Buffer;
  gzipped: boolean;
  /** The length of the body as sent without compression. */
  plainLength: number;
  /** Told when a gzipped body is unzipped for a client that takes no compression (the stored answers keep a hot one as sent again). */
  unzipped?: (kept: KeptBody, plain: Buffer) => void;
}

/** gzip at zlib's fastest level: what the stored answers and fresh answers both use. */
export function gzip(plain: Buffer): Buffer {
  return gzipSync(plain, { level: constants.Z_BEST_SPEED });
}

/** The body as sent without compression. */
export function plainBody(kept: KeptBody): Buffer {
  if (!kept.gzipped) return kept.body;
  // Sized to the body, zlib makes it in one buffer instead of 16 KiB pieces joined.
  return gunzipSync(kept.body, { chunkSize: kept.plainLength + 64 });
}

/** The bytes to send for a body in `encoding` (none: the plain body). */
export function encoded(kept: KeptBody, encoding: Encoding | undefined): Buffer {
  if (encoding === 'gzip' && kept.gzipped) return kept.body;
  const plain = plainBody(kept);
  if (encoding === undefined) {
    if (kept.gzipped) kept.unzipped?.(kept, plain);
    return plain;
  }
  if (encoding === 'gzip') return gzip(plain);
  if (encoding === 'br') return brotliCompressSync(plain, { params: { [constants.BROTLI_PARAM_QUALITY]: 4, [constants.BROTLI_PARAM_SIZE_HINT]: plain.length } });
  return deflateSync(plain, { level: constants.Z_BEST_SPEED });
}
