/**
 * Sign-in throttling, on the same rate limiter as the API (memory, or Redis shared by
 * every instance) under bucket names of its own. Every attempt counts, right or wrong:
 * per client address, so one machine cannot try many accounts, and per account, so
 * many machines cannot try one. The account bucket is named by a hash of the email,
 * known or not, so neither the bucket nor the answer tells whether an account exists.
 */
import { createHash } from 'node:crypto';
import type { RateLimiter } from '../access/ratelimit/index.js';
import { normaliseEmail } from '../management/directors.js';

export const LOGIN_ATTEMPTS_PER_ACCOUNT = 5;
export const LOGIN_ATTEMPTS_PER_ADDRESS = 20;

/** A short, stable, non-reversible name for an email, for buckets and log lines. */
export function accountTag(email: string): string {
  return createHash('sha256').update(normaliseEmail(email)).digest('hex').slice(0, 32);
}

export type ThrottleVerdict = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/**
 * Counts one sign-in attempt. Throws RateLimiterUnavailable when the limiter cannot
 * answer (the caller refuses the sign-in: fail closed, as the API does).
 */
export async function countLoginAttempt(limiter: RateLimiter, email: string, address: string): Promise<ThrottleVerdict> {
  const byAddress = await limiter.consume(`login-ip:${address}`, LOGIN_ATTEMPTS_PER_ADDRESS);
  if (!byAddress.allowed) return { allowed: false, retryAfterSeconds: byAddress.resetSeconds };
  const byAccount = await limiter.consume(`login-acct:${accountTag(email)}`, LOGIN_ATTEMPTS_PER_ACCOUNT);
  if (!byAccount.allowed) return { allowed: false, retryAfterSeconds: byAccount.resetSeconds };
  return { allowed: true };
}
