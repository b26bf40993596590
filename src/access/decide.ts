/**
 * Deciding access to the public API, in the documented order (docs/decisions.md, "Public API"): method ->
 * key -> plan -> rate limit. The decision is a value (`Access`); the access hook (hook.ts)
 * acts on it. Usage is counted for every request with an active key, whatever the answer.
 */
import type { Config } from '../config/index.js';
import type { Reader } from '../db/index.js';
import type { Tenant } from '../domain/tenant.js';
import type { DependencyState } from '../ops/dependency.js';
import type { Caller } from '../ops/request-log.js';
import { methodNotAllowed, Problem } from '../problems/index.js';
import { bearerKey, hashKey } from './keys.js';
import { KeyFinder, type KeyRow } from './lookup.js';
import { planLimit } from './plans.js';
import { RateLimiterUnavailable, WINDOW_SECONDS, type RateLimitDecision, type RateLimiter } from './ratelimit/index.js';
import type { UsageRecorder } from './usage.js';

export interface AccessDeps {
  config: Pick<Config, 'rateLimitProfi' | 'rateLimitVip'>;
  reads: Reader;
  limiter: RateLimiter;
  usage: UsageRecorder;
  /** The states of the data store and the rate-limit service: their outages are logged by them, once. */
  database: DependencyState;
  rateLimiter: DependencyState;
}

/** The answer to "may this request go on?". */
export type Access =
  | { allowed: true; tenant: Tenant; caller: Caller; rateLimit: RateLimitHeaders }
  /** A public path (the OpenAPI document): no key needed, nothing counted. */
  | { allowed: true; tenant: null; caller: null; rateLimit: null }
  | { allowed: false; problem: Problem; caller: Caller | null; rateLimit: RateLimitHeaders | null };

/** The IETF draft headers every answer to a rate-limited school carries: RateLimit-Policy, value, RateLimit, value. */
type RateLimitHeaders = readonly string[];

// The refusals a flood repeats are made once (a Problem is never changed after it is
// made), so each refused request does not pay for a new error and its stack trace.
const UNAUTHORIZED = new Problem('unauthorized', 'A valid API key is required: send the header "Authorization: Bearer <key>".', {
  headers: { 'WWW-Authenticate': 'Bearer realm="school-data"' },
});
const PLAN_REQUIRED = new Problem('plan_required', 'The school\'s plan does not include API access; the Profi and VIP plans do.');
const RATE_LIMIT_UNAVAILABLE = new Problem('rate_limit_unavailable', 'The rate-limit service is unavailable; try again shortly.', {
  headers: { 'Retry-After': '5' },
});
const PUBLIC: Access = { allowed: true, tenant: null, caller: null, rateLimit: null };
const REFUSED_NO_KEY: Access = { allowed: false, problem: UNAUTHORIZED, caller: null, rateLimit: null };

/** Per limit: the 429 problem and the RateLimit-Policy value, made once. */
interface LimitTexts {
  rateLimited: Problem;
  policy: string;
}
const limitTexts = new Map<number, LimitTexts>();

function textsFor(limit: number): LimitTexts {
  let texts = limitTexts.get(limit);
  if (texts === undefined) {
    texts = {
      rateLimited: new Problem('rate_limited', `The school's limit of ${limit} requests per minute is used up; retry after the time in Retry-After.`, {
        headers: { 'Retry-After': String(WINDOW_SECONDS) },
      }),
      policy: `"default";q=${limit};w=${WINDOW_SECONDS}`,
    };
    limitTexts.set(limit, texts);
  }
  return texts;
}

/** Per method: the 405 refusal, made once. */
const notAllowed = new Map<string, Access>();

function refusedMethod(method: string): Access {
  let refused = notAllowed.get(method);
  if (refused === undefined) {
    refused = { allowed: false, problem: methodNotAllowed(method), caller: null, rateLimit: null };
    notAllowed.set(method, refused);
  }
  return refused;
}

/** The decision, at once where every store answered at once (SQLite, the in-memory limiter), else a promise of it. */
export type AccessCheck = (method: string, authorization: string | string[] | undefined, isPublic: boolean) => Access | Promise<Access>;

/**
 * Decides a request under the API prefix. `isPublic`: the path is one of the public ones
 * (the OpenAPI document), which only the method check applies to.
 *
 * It waits only for what has to be waited for: with the embedded stores (a read of the
 * SQLite file, the limiter's counter in memory) the decision is made synchronously, and
 * a promise is made only when PostgreSQL or Redis answers later. Every request runs this,
 * a refused one included.
 */
export function accessCheck(deps: AccessDeps): AccessCheck {
  const { limiter, usage, config, database, rateLimiter } = deps;
  // Usage goes to Redis with the check only when the recorder moves it from there.
  const shared = usage.shared;
  const keys = new KeyFinder(deps.reads);

  function unavailable(error: unknown, caller: Caller): Access {
    if (!(error instanceof RateLimiterUnavailable)) throw error;
    rateLimiter.refused(error);
    // Not recorded in Redis (as far as this process knows): counted here instead.
    if (shared !== null) usage.record(caller.keyId);
    return { allowed: false, problem: RATE_LIMIT_UNAVAILABLE, caller, rateLimit: null };
  }

  function limited(found: KeyRow, caller: Caller, limit: number, decision: RateLimitDecision): Access {
    rateLimiter.answered();
    const texts = textsFor(limit);
    const rateLimit = ['RateLimit-Policy', texts.policy, 'RateLimit', `"default";r=${decision.remaining};t=${decision.resetSeconds}`];
    if (!decision.allowed) return { allowed: false, problem: texts.rateLimited, caller, rateLimit };
    return { allowed: true, tenant: { id: found.schoolId, timezone: found.timezone, currency: found.currency, dataVersion: found.dataVersion }, caller, rateLimit };
  }

  function withKey(found: KeyRow | undefined): Access | Promise<Access> {
    // The key lookup was answered: the data store is up.
    database.answered();
    if (found === undefined || found.revokedAt !== null) return REFUSED_NO_KEY;
    const caller: Caller = { keyId: found.keyId, schoolId: found.schoolId };
    // Counted whatever the answer turns out to be (402, 429, 404 ...): with a shared
    // limiter (Redis) in its round trip, else in this process (usage.ts).
    const limit = planLimit(config, found.plan);
    if (limit === null) {
      const refused: Access = { allowed: false, problem: PLAN_REQUIRED, caller, rateLimit: null };
      if (shared === null) {
        usage.record(found.keyId);
        return refused;
      }
      return shared.record(found.keyId).then(
        () => refused,
        () => {
          usage.record(found.keyId);
          return refused;
        },
      );
    }
    let decision: RateLimitDecision | Promise<RateLimitDecision>;
    try {
      if (shared === null) {
        usage.record(found.keyId);
        decision = limiter.consume(found.schoolId, limit);
      } else decision = limiter.consume(found.schoolId, limit, found.keyId);
    } catch (error) {
      return unavailable(error, caller);
    }
    if (decision instanceof Promise) {
      return decision.then(
        (d) => limited(found, caller, limit, d),
        (error: unknown) => unavailable(error, caller),
      );
    }
    return limited(found, caller, limit, decision);
  }

  return function check(method, authorization, isPublic) {
    // Before the public-path exemption: the OpenAPI document is read-only like the rest.
    if (method !== 'GET' && method !== 'HEAD') return refusedMethod(method);
    if (isPublic) return PUBLIC;
    const key = bearerKey(authorization);
    if (key === null) return REFUSED_NO_KEY;
    const found = keys.find(hashKey(key));
    return found instanceof Promise ? found.then(withKey) : withKey(found);
  };
}
