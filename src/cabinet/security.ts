/**
 * What protects every cabinet page: response headers, and the two checks every form
 * submission passes before it may change anything - the request comes from a cabinet
 * page of this very origin, and it carries the form's secret token. A refusal names
 * the check that failed, so the director knows what to do; that tells a forger nothing
 * (the tokens are random, and a cross-site page cannot read the answer anyway).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

export const CABINET_HEADERS: Readonly<Record<string, string>> = {
  // Scripts, styles, images and form targets from this origin only; no inline script or style.
  'Content-Security-Policy': "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'",
  'X-Frame-Options': 'DENY',
  'Strict-Transport-Security': 'max-age=31536000',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  // Pages carry key cards and, once, a key: no cache (browser or proxy) may keep them.
  'Cache-Control': 'no-store',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

/** 32 random bytes as base64url: session tokens and form tokens. */
export function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

export const TOKEN_FORMAT = /^[A-Za-z0-9_-]{43}$/;

/** Constant-time comparison of a submitted token with the expected one. */
export function tokensMatch(given: string | null | undefined, expected: string): boolean {
  if (typeof given !== 'string' || given.length !== expected.length) return false;
  return timingSafeEqual(Buffer.from(given), Buffer.from(expected));
}

function originOf(url: string): string | null {
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}

/**
 * False when the browser says the request comes from another site: by its fetch
 * metadata (Sec-Fetch-Site), its Origin, or its Referer. The expected origin is the
 * one the browser addressed (its Host header), which a cross-site page cannot choose.
 *
 * `Origin: null` passes this check: browsers send it for same-origin form posts under
 * `Referrer-Policy: no-referrer`. Such a request still needs the form token, which
 * only a cabinet page of this origin can have.
 */
export function fromSameOrigin(request: FastifyRequest): boolean {
  const expected = originOf(`https://${request.host}`);
  if (expected === null) return false;
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') return false;
  const origin = request.headers.origin;
  if (origin !== undefined && origin !== 'null' && origin !== expected) return false;
  const referer = request.headers.referer;
  if (referer !== undefined && originOf(referer) !== expected) return false;
  return true;
}

/** Which check a refused form failed. */
export type FormRefusal = 'other_origin' | 'missing_token' | 'wrong_token' | 'expired_page';

/**
 * Why a form must be refused, or null when it passes both checks. `given` is the form's
 * token field (null when absent or repeated); `expected` the token the form must carry,
 * undefined when the browser no longer holds one (the sign-in page's cookie ran out).
 * A well-formed token that is not the expected one comes from a page of an earlier
 * session or sign-in page: an out-of-date page. A malformed one was altered on the way.
 */
export function formRefusal(request: FastifyRequest, given: string | null, expected: string | undefined): FormRefusal | null {
  if (!fromSameOrigin(request)) return 'other_origin';
  if (given === null || given === '') return 'missing_token';
  if (!TOKEN_FORMAT.test(given)) return 'wrong_token';
  if (expected === undefined || !tokensMatch(given, expected)) return 'expired_page';
  return null;
}
