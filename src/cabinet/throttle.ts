/**
 * Throttling of password attempts (a sign-in, or the current password of a password
 * change), on the same rate limiter as the API (memory, or Redis shared by every
 * instance) under bucket names of its own. Every attempt counts, right or wrong: per
 * client address (an IPv6 one by its /64), so one machine cannot try many accounts, and
 * per account (a password change: per session), so many machines cannot try one. The
 * account bucket is named by a hash of the email, known or not, so neither the bucket nor
 * the answer tells whether an account exists.
 */
import { hash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { RateLimiterUnavailable, type RateLimiter } from '../access/ratelimit/index.js';
import { throttledAddress } from '../domain/addresses.js';
import { normaliseEmail } from '../management/directors.js';
import { causeOf } from '../ops/dependency.js';

export const LOGIN_ATTEMPTS_PER_ACCOUNT = 5;
export const LOGIN_ATTEMPTS_PER_ADDRESS = 20;

/** A short, stable, non-reversible name for an email, for buckets and log lines. */
export function accountTag(email: string): string {
  return hash('sha256', normaliseEmail(email), 'hex').slice(0, 32);
}

export type ThrottleVerdict = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/**
 * Whose attempts share a bucket besides the address's: a sign-in's account, or the session
 * a password change is made from (its current password is tried only by whoever holds that
 * session, and a director whose account bucket someone else keeps full can still change it).
 */
export type AttemptBucket = { account: string } | { session: string };

/** Counts one attempt; throws RateLimiterUnavailable when the limiter cannot answer. */
async function countAttempt(limiter: RateLimiter, bucket: AttemptBucket, address: string): Promise<ThrottleVerdict> {
  const byAddress = await limiter.consume(`login-ip:${throttledAddress(address)}`, LOGIN_ATTEMPTS_PER_ADDRESS);
  if (!byAddress.allowed) return { allowed: false, retryAfterSeconds: byAddress.resetSeconds };
  const name = 'account' in bucket ? `login-acct:${accountTag(bucket.account)}` : `login-session:${bucket.session}`;
  const byAccount = await limiter.consume(name, LOGIN_ATTEMPTS_PER_ACCOUNT);
  if (!byAccount.allowed) return { allowed: false, retryAfterSeconds: byAccount.resetSeconds };
  return { allowed: true };
}

/** What a form that checks a password does with the attempt. */
export type Admission = { admitted: true; attempt: AttemptLog } | { admitted: false; status: 429 | 503 };
type AttemptLog = { event: string; account: string; address: string };

/**
 * Counts one attempt at an account's password (a sign-in, or the current password of a
 * password change): admitted, or refused with 429 (throttled) or 503 (limiter unreachable:
 * fail closed), Retry-After set and the refusal logged. `attempt` is the log line's fields.
 */
export async function admitPasswordAttempt(limiter: RateLimiter, request: FastifyRequest, reply: FastifyReply, email: string, event: string, bucket: AttemptBucket = { account: email }): Promise<Admission> {
  const attempt = { event, account: accountTag(email), address: request.ip };
  let verdict;
  try {
    verdict = await countAttempt(limiter, bucket, request.ip);
  } catch (err) {
    if (!(err instanceof RateLimiterUnavailable)) throw err;
    request.log.error({ ...attempt, outcome: 'unavailable', cause: causeOf(err) }, 'password attempt refused: rate-limit service unavailable');
    reply.header('Retry-After', '5');
    return { admitted: false, status: 503 };
  }
  if (!verdict.allowed) {
    request.log.warn({ ...attempt, outcome: 'throttled' }, 'password attempt throttled');
    reply.header('Retry-After', String(verdict.retryAfterSeconds));
    return { admitted: false, status: 429 };
  }
  return { admitted: true, attempt };
}
