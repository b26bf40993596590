/**
 * Deciding access to the public API, in the documented order (docs/decisions.md, "Public API"): method ->
 * key (revoked, expired, past a roll's overlap, unused too long: 401) -> the key's address
 * allowlist (403) -> plan -> rate limit -> the key's scopes (403; an unknown path has none
 * and goes on to its 404). The decision is a value (`Access`); the access hook (hook.ts)
 * acts on it. Usage is counted for every request with an active key, whatever the answer.
 */
import type { Config } from '../config/index.js';
import type { KeyWatch, Reader } from '../db/index.js';
import type { IncomingMessage } from 'node:http';
import type { BlockList } from 'node:net';
import { addressAllowed, blockListOf } from '../domain/addresses.js';
import { scopeSetOfStored, scopesIn, type ScopeSet } from '../domain/scopes.js';
import type { Tenant } from '../domain/tenant.js';
import type { DependencyState } from '../ops/dependency.js';
import { formatTimestamp } from '../domain/time.js';
import { headerRepeated } from '../edge/checks.js';
import type { Caller } from '../ops/request-log.js';
import { methodNotAllowed, Problem } from '../problems/index.js';
import { bearerKey, hashKey, unusedBeforeMs } from './keys.js';
import { KeyFinder, type KeyRow } from './lookup.js';
import { planLimit } from './plans.js';
import { RateLimiterUnavailable, WINDOW_SECONDS, windowDecision, type LimitWindow, type RateLimitDecision, type RateLimiter } from './ratelimit/index.js';
import type { UsageRecorder } from './usage.js';

export interface AccessDeps {
  config: Pick<Config, 'rateLimitProfi' | 'rateLimitVip' | 'keyUnusedDays'>;
  /** The scopes each API route needs (all of them), by route URL; a route not listed needs none. */
  routeScopes: ReadonlyMap<string, ScopeSet>;
  reads: Reader;
  /** PostgreSQL's key watch, started: with it, keys found are kept across turns (lookup.ts). */
  keyWatch?: KeyWatch | null;
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

/** A refusal. */
type Refused = Extract<Access, { allowed: false }>;

/** The IETF draft headers every answer to a rate-limited school carries: RateLimit-Policy, value, RateLimit, value. */
type RateLimitHeaders = readonly string[];

// The refusals a flood repeats are made once (a Problem is never changed after it is
// made), so each refused request does not pay for a new error and its stack trace.
const BEARER_CHALLENGE = { 'WWW-Authenticate': 'Bearer realm="school-data"' };
const UNAUTHORIZED = new Problem('unauthorized', 'A valid API key is required: send the header "Authorization: Bearer <key>".', { headers: BEARER_CHALLENGE });
const PLAN_REQUIRED = new Problem('plan_required', 'The school\'s plan does not include API access; the Profi and VIP plans do.');
const RATE_LIMIT_UNAVAILABLE = new Problem('rate_limit_unavailable', 'The rate-limit service is unavailable; try again shortly.', {
  headers: { 'Retry-After': '5' },
});
const ADDRESS_NOT_ALLOWED = new Problem('address_not_allowed', 'This key may not be used from this address; the school\'s director can change the key\'s address list.');
const PUBLIC: Access = { allowed: true, tenant: null, caller: null, rateLimit: null };
const REFUSED_NO_KEY: Access = { allowed: false, problem: UNAUTHORIZED, caller: null, rateLimit: null };
const SEVERAL_KEYS = new Problem('unauthorized', 'A request may carry one Authorization header, not more: send one, "Authorization: Bearer <key>".', { headers: BEARER_CHALLENGE });
const REFUSED_SEVERAL_KEYS: Access = { allowed: false, problem: SEVERAL_KEYS, caller: null, rateLimit: null };

/** What `authorizationOf` gives for a request with more than one Authorization line. */
export const SEVERAL_AUTHORIZATIONS = Symbol('several Authorization lines');

/**
 * The request's Authorization header for `check`, or SEVERAL_AUTHORIZATIONS when it has
 * more than one line of it (refused: a proxy before us may have read another line than
 * the first, which Node keeps).
 */
export function authorizationOf(req: IncomingMessage): string | typeof SEVERAL_AUTHORIZATIONS | undefined {
  const header = req.headers.authorization;
  return header !== undefined && headerRepeated(req, 'authorization') ? SEVERAL_AUTHORIZATIONS : header;
}

/** `make` once per distinct argument; at `bound` entries the cache starts again (a backstop against floods of distinct values). */
function madeOnce<K, V>(make: (key: K) => V, bound = Number.POSITIVE_INFINITY): (key: K) => V {
  const made = new Map<K, V>();
  return (key) => {
    let value = made.get(key);
    if (value === undefined) {
      if (made.size >= bound) made.clear();
      value = make(key);
      made.set(key, value);
    }
    return value;
  };
}

/** Per limit: the 429 problem and the RateLimit-Policy value. */
const textsFor = madeOnce((limit: number) => ({
  rateLimited: new Problem('rate_limited', `The school's limit of ${limit} requests per minute is used up; retry after the time in Retry-After.`, {
    headers: { 'Retry-After': String(WINDOW_SECONDS) },
  }),
  policy: `"default";q=${limit};w=${WINDOW_SECONDS}`,
}));

/** The rate limit's headers of an answer: the quota, and what is left of the window. */
function rateLimitHeaders(limit: number, decision: RateLimitDecision): string[] {
  return ['RateLimit-Policy', textsFor(limit).policy, 'RateLimit', `"default";r=${decision.remaining};t=${decision.resetSeconds}`];
}

/** Per set of needed scopes: the 403. */
const insufficientScope = madeOnce(
  (need: ScopeSet) =>
    new Problem('insufficient_scope', `This key's scopes do not cover this endpoint; it needs: ${scopesIn(need).join(', ')}.`, {
      headers: { 'WWW-Authenticate': 'Bearer error="insufficient_scope"' },
    }),
);

/** Per distinct stored allowlist: its BlockList. */
const allowListOf = madeOnce((text: string): BlockList => blockListOf(text.split(',')), 10_000);

/**
 * "Now" and "unused since" as stored timestamps (UTC whole seconds), made once a second:
 * keys' ends are compared as text, as they are stored.
 */
class KeyClock {
  private second = -1;
  now = '';
  /** A key last used (or, never used, created) at or before this is unused too long (its period and UNUSED_GRACE_MS ago); null: never. */
  unusedBefore: string | null = null;
  /** Whether keys unused too long are refused (SCHOOL_DATA_KEY_UNUSED_DAYS is not 0). */
  readonly judgesUnused: boolean;

  private readonly unusedDays: number;

  constructor(unusedDays: number) {
    this.unusedDays = unusedDays;
    this.judgesUnused = unusedDays > 0;
  }

  tick(): void {
    const second = Math.floor(Date.now() / 1000);
    if (second === this.second) return;
    this.second = second;
    this.now = formatTimestamp(second * 1000);
    this.unusedBefore = this.unusedDays > 0 ? formatTimestamp(unusedBeforeMs(second * 1000, this.unusedDays)) : null;
  }
}

/**
 * Per key row found: its Caller, one object for all its requests, so that what is made of
 * it once (the access line's fields: src/ops/request-log.ts) is not made again per request.
 */
const callers = new WeakMap<KeyRow, Caller>();

function callerOf(found: KeyRow): Caller {
  let caller = callers.get(found);
  if (caller === undefined) {
    caller = { keyId: found.keyId, schoolId: found.schoolId };
    callers.set(found, caller);
  }
  return caller;
}

/** Whether a key no longer works: revoked, expired, past its roll's overlap, or unused too long. */
function ended(found: KeyRow, clock: KeyClock): boolean {
  if (found.revokedAt !== null) return true;
  if (found.expiresAt === null && found.retiresAt === null && !clock.judgesUnused) return false;
  clock.tick();
  if (found.expiresAt !== null && found.expiresAt <= clock.now) return true;
  if (found.retiresAt !== null && found.retiresAt <= clock.now) return true;
  return clock.unusedBefore !== null && (found.lastUsedAt ?? found.createdAt) <= clock.unusedBefore;
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
export type AccessCheck = (
  method: string,
  authorization: string | typeof SEVERAL_AUTHORIZATIONS | undefined,
  route: string | undefined,
  isPublic: boolean,
  /** The client: its address (request.ip, trusted proxies applied) is read only for a key with an allowlist. */
  client: { readonly ip: string },
  /**
   * Called at most once, in the turn the rate-limit check is sent, when the decision waits
   * only for the rate-limit service and all else allows the request: the school it will act
   * for if the limit does. The caller may begin the request's work then, beside the check,
   * and answers only once the decision is back. Not called for a school whose latest check
   * here was refused in a window not yet ended, nor while the service is down, nor while an
   * earlier check is still unanswered: under load the reads wait for their decisions and go
   * out together, in fewer statements.
   */
  early?: (tenant: Tenant) => void,
) => Access | Promise<Access>;

/**
 * The schools whose latest rate-limit decision in this process refused, with the end of
 * that window (epoch ms): their requests' work waits for the decision, so a flood over the
 * limit costs no reads.
 */
class Refusing {
  private readonly until = new Map<string, number>();

  note(schoolId: string, decision: RateLimitDecision): void {
    if (decision.allowed) {
      this.until.delete(schoolId);
      return;
    }
    // A backstop against a flood of schools: forgetting costs only a read begun early.
    if (this.until.size >= 10_000) this.until.clear();
    this.until.set(schoolId, Date.now() + decision.resetSeconds * 1000);
  }

  has(schoolId: string): boolean {
    const until = this.until.get(schoolId);
    if (until === undefined) return false;
    if (until > Date.now()) return true;
    this.until.delete(schoolId);
    return false;
  }
}

/**
 * Decides a request under the API prefix. `route`: the API route it matched (undefined: an
 * unknown path); `isPublic`: the path is one of the public ones (the OpenAPI document),
 * which only the method check applies to.
 *
 * It waits only for what has to be waited for: with the embedded stores (a read of the
 * SQLite file, the limiter's counter in memory) the decision is made synchronously, and
 * a promise is made only when PostgreSQL or Redis answers later. Every request runs this,
 * a refused one included.
 */
export function accessCheck(deps: AccessDeps): AccessCheck {
  const { limiter, usage, config, database, rateLimiter, routeScopes } = deps;
  // Usage goes to Redis with the check only when the recorder moves it from there.
  const shared = usage.shared;
  const keys = new KeyFinder(deps.reads, deps.keyWatch ?? null, () => database.answered());
  const clock = new KeyClock(config.keyUnusedDays);

  function unavailable(error: unknown, caller: Caller): Access {
    if (!(error instanceof RateLimiterUnavailable)) throw error;
    rateLimiter.refused(error);
    // Its usage counts all the same: recorded in Redis, or here by the limiter (consume).
    return { allowed: false, problem: RATE_LIMIT_UNAVAILABLE, caller, rateLimit: null };
  }

  const refusing = new Refusing();

  function limited(found: KeyRow, caller: Caller, limit: number, need: ScopeSet, decision: RateLimitDecision): Access {
    rateLimiter.answered();
    const rateLimit = rateLimitHeaders(limit, decision);
    if (!decision.allowed) return { allowed: false, problem: textsFor(limit).rateLimited, caller, rateLimit };
    const tenant = tenantOf(found);
    if ((need & tenant.scopes) !== need) return { allowed: false, problem: insufficientScope(need), caller, rateLimit };
    return { allowed: true, tenant, caller, rateLimit };
  }

  /**
   * Counts a refusal decided before the rate limit: in Redis with a shared limiter (here if
   * Redis fails), else here. With `school` (a school whose plan has a limit), the answer
   * carries the limit's headers, the window read without counting (none when Redis fails).
   */
  function countedRefusal(keyId: string, refused: Refused, school?: { id: string; limit: number }): Access | Promise<Access> {
    const withWindow = (window: LimitWindow | null): Access =>
      window === null || school === undefined ? refused : { ...refused, rateLimit: rateLimitHeaders(school.limit, windowDecision(window, school.limit)) };
    if (shared === null) {
      usage.record(keyId);
      return school === undefined ? refused : withWindow(limiter.peek(school.id));
    }
    // Counted once either way: where Redis did not record it, the limiter counts it here.
    return shared.record(keyId, school?.id).then(withWindow, () => refused);
  }

  function withKey(found: KeyRow | undefined, route: string | undefined, client: { readonly ip: string }, early?: (tenant: Tenant) => void): Access | Promise<Access> {
    if (found === undefined || ended(found, clock)) return REFUSED_NO_KEY;
    const caller = callerOf(found);
    // Counted whatever the answer turns out to be (403, 402, 429, 404 ...): with a shared
    // limiter (Redis) in its round trip, else in this process (usage.ts).
    // Before the plan and the limit: a request from elsewhere spends none of the school's minute.
    const limit = planLimit(config, found.plan);
    if (found.allow !== null && !addressAllowed(allowListOf(found.allow), client.ip)) {
      const refused: Refused = { allowed: false, problem: ADDRESS_NOT_ALLOWED, caller, rateLimit: null };
      return countedRefusal(found.keyId, refused, limit === null ? undefined : { id: found.schoolId, limit });
    }
    if (limit === null) return countedRefusal(found.keyId, { allowed: false, problem: PLAN_REQUIRED, caller, rateLimit: null });
    let decision: RateLimitDecision | Promise<RateLimitDecision>;
    try {
      if (shared === null) {
        usage.record(found.keyId);
        decision = limiter.consume(found.schoolId, limit);
      } else decision = limiter.consume(found.schoolId, limit, found.keyId);
    } catch (error) {
      return unavailable(error, caller);
    }
    const need = route === undefined ? 0 : (routeScopes.get(route) ?? 0);
    if (decision instanceof Promise) {
      if (early !== undefined && !limiter.checking && !rateLimiter.down && !refusing.has(found.schoolId)) {
        const tenant = tenantOf(found);
        if ((need & tenant.scopes) === need) early(tenant);
      }
      return decision.then(
        (d) => {
          refusing.note(found.schoolId, d);
          return limited(found, caller, limit, need, d);
        },
        (error: unknown) => unavailable(error, caller),
      );
    }
    return limited(found, caller, limit, need, decision);
  }

  return function check(method, authorization, route, isPublic, client, early) {
    // Before the public-path exemption: the OpenAPI document is read-only like the rest.
    if (method !== 'GET' && method !== 'HEAD') return refusedMethod(method);
    if (isPublic) return PUBLIC;
    if (authorization === SEVERAL_AUTHORIZATIONS) return REFUSED_SEVERAL_KEYS;
    const key = bearerKey(authorization);
    if (key === null) return REFUSED_NO_KEY;
    const found = keys.find(hashKey(key));
    return found instanceof Promise ? found.then((f) => withKey(f, route, client, early)) : withKey(found, route, client, early);
  };
}

/**
 * Per key row found: the school its requests act for, one object for all of them (never
 * changed), so what is made of it once (the stored answers' key: src/resources/cache.ts) is
 * not made again per request.
 */
const tenants = new WeakMap<KeyRow, Tenant>();

/** The school a request with this key acts for, with the key's scopes. */
function tenantOf(found: KeyRow): Tenant {
  let tenant = tenants.get(found);
  if (tenant === undefined) {
    tenant = { id: found.schoolId, timezone: found.timezone, currency: found.currency, dataVersion: found.dataVersion, dataStamp: found.dataStamp, scopes: scopeSetOfStored(found.scopes) };
    tenants.set(found, tenant);
  }
  return tenant;
}
