/**
 * Access to the public API, in the contract's order: method -> key -> plan -> rate
 * limit. Runs as the first hook of every request under the API prefix, before
 * routing decides whether the path exists, so an unknown path with a bad key is 401.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import { prepared, type Reader } from '../db/index.js';
import { Problem } from '../problems/index.js';
import { bearerKey, hashKey } from './keys.js';
import { planLimit } from './plans.js';
import { RateLimiterUnavailable, WINDOW_SECONDS, type RateLimiter } from './ratelimit/index.js';
import type { UsageRecorder } from './usage.js';

export const API_PREFIX = '/api/public/v1/';

/** The school a request acts for, fixed by its key. Every query is scoped by it. */
export interface Tenant {
  id: string;
  timezone: string;
  currency: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    tenant: Tenant | null;
  }
}

export interface AccessDeps {
  config: Pick<Config, 'rateLimitProfi' | 'rateLimitVip'>;
  reads: Reader;
  limiter: RateLimiter;
  usage: UsageRecorder;
  /** Paths under the prefix that are public (the OpenAPI document). */
  publicPaths: ReadonlySet<string>;
}

// The refusals a flood repeats are made once (a Problem is never changed after it is
// made), so each refused request does not pay for a new error and its stack trace.
const UNAUTHORIZED = new Problem('unauthorized', 'A valid API key is required: send the header "Authorization: Bearer <key>".', {
  headers: { 'WWW-Authenticate': 'Bearer realm="school-data"' },
});
const rateLimitedByLimit = new Map<number, Problem>();

function rateLimited(limit: number): Problem {
  let problem = rateLimitedByLimit.get(limit);
  if (problem === undefined) {
    problem = new Problem('rate_limited', `The school's limit of ${limit} requests per minute is used up; retry after the time in Retry-After.`, {
      headers: { 'Retry-After': String(WINDOW_SECONDS) },
    });
    rateLimitedByLimit.set(limit, problem);
  }
  return problem;
}

// One indexed lookup by hash yields the key's state and its school's plan. Prepared:
// every request runs it, a flood of unknown keys included.
const findKey = prepared((db, p: { hash: string }) =>
  db
    .selectFrom('api_keys')
    .innerJoin('schools', 'schools.id', 'api_keys.school_id')
    .select(['api_keys.id as keyId', 'api_keys.revoked_at as revokedAt', 'schools.id as schoolId', 'schools.plan', 'schools.timezone', 'schools.currency'])
    .where('api_keys.key_hash', '=', p.hash),
);

export function accessHook(deps: AccessDeps) {
  const { reads, limiter, usage, config, publicPaths } = deps;

  return async function access(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    // The matched route decides, not only the raw URL: the router also accepts an
    // absolute-form target (https://host/api/...) and percent-encoded letters
    // (/%61pi/...), and a request it routes to an API handler must never skip this check.
    const url = request.url;
    const route = request.routeOptions.url;
    if (!url.startsWith(API_PREFIX) && !route?.startsWith(API_PREFIX)) return;

    // Before the public-path exemption: the OpenAPI document is read-only like the rest.
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      throw new Problem('method_not_allowed', `${request.method} is not supported: this API is read-only (GET and HEAD).`, {
        headers: { Allow: 'GET, HEAD' },
      });
    }
    const queryAt = url.indexOf('?');
    if (publicPaths.has(route ?? (queryAt === -1 ? url : url.slice(0, queryAt)))) return;

    const key = bearerKey(request.headers.authorization);
    if (key === null) throw UNAUTHORIZED;
    const [found] = await findKey(reads, { hash: hashKey(key) });
    if (!found || found.revokedAt !== null) throw UNAUTHORIZED;
    // Bound on the request's own child logger (a pino one: the app is built on pino) rather
    // than on a new child of it: one logger fewer per request, and every later line of the
    // request, the access-log line included, carries the key and the school.
    (request.log as Logger).setBindings({ keyId: found.keyId, schoolId: found.schoolId });

    // Counted whatever the answer turns out to be (402, 429, 404 ...).
    usage.record(found.keyId);

    const limit = planLimit(config, found.plan);
    if (limit === null) {
      throw new Problem('plan_required', 'The school\'s plan does not include API access; the Profi and VIP plans do.');
    }

    let decision;
    try {
      decision = await limiter.consume(found.schoolId, limit);
    } catch (err) {
      if (!(err instanceof RateLimiterUnavailable)) throw err;
      request.log.error({ err }, 'rate-limit service unavailable');
      throw new Problem('rate_limit_unavailable', 'The rate-limit service is unavailable; try again shortly.', {
        headers: { 'Retry-After': '5' },
      });
    }
    reply.header('RateLimit-Policy', `"default";q=${limit};w=${WINDOW_SECONDS}`);
    reply.header('RateLimit', `"default";r=${decision.remaining};t=${decision.resetSeconds}`);
    if (!decision.allowed) throw rateLimited(limit);

    request.tenant = { id: found.schoolId, timezone: found.timezone, currency: found.currency };
  };
}
