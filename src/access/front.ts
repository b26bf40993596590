/**
 * The API's first step, in the listener before Fastify: a request that surely reaches an
 * API route (GET or HEAD under the prefix, a plain path that one route matches, none of
 * the edge checks' cases) is answered here whole: its access decided by the access hook's
 * own check, then a refusal, its stored answer, or its endpoint's answer (the endpoint as
 * Fastify's route runs it, src/resources/common/route.ts), each written by the app's one
 * writer with an exchange of this request. Everything else goes to Fastify, which decides
 * and answers it the same way (a request whose check failed, with the failure: nothing is
 * checked or counted twice). Why: docs/performance.md, "One request path".
 */
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import FindMyWay from 'find-my-way';
import type { Tenant } from '../domain/tenant.js';
import { problemAnswer, type Answer, type Exchange, type WriteAnswer } from '../edge/answer.js';
import { headFault } from '../edge/checks.js';
import { API_PREFIX, pathOf } from '../edge/paths.js';
import type { ErrorAnswer } from '../edge/errors.js';
import { beforeQuery, currentTurn } from '../edge/turn-end.js';
import type { ResponseRecorder } from '../ops/metrics.js';
import type { Caller } from '../ops/request-log.js';
import { authorizationOf, type Access, type AccessCheck } from './decide.js';

type Listener = (req: IncomingMessage, res: ServerResponse) => void;

/** An API route as the front knows it: its pattern, its metrics and its endpoint's answer. */
export interface FrontRoute {
  url: string;
  recordAnswer: ResponseRecorder;
  /**
   * The endpoint's answer to an allowed request that has no stored answer (its query
   * decoded from the target), or a failure for the error answer (src/edge/errors.ts).
   */
  answer(request: RouteRequest): Promise<Answer>;
  /**
   * The answer made at once from memory (a page cut from a list kept whole, or its 304),
   * when there is one (a cut is counted when it is written).
   */
  cut(tenant: Tenant, target: string, method: string, headers: IncomingHttpHeaders): Answer | undefined;
  /** Whether `cut` would give one now; nothing counted. */
  cuts(tenant: Tenant, target: string): boolean;
}

/** An allowed request to a route, as its endpoint reads it. */
export interface RouteRequest {
  tenant: Tenant;
  /** The request target as received (the query is in it). */
  target: string;
  method: string;
  headers: IncomingHttpHeaders;
  params: Record<string, string | undefined>;
}

/**
 * The app's GET routes, in a router of the kind and with the options Fastify's own is
 * made with (find-my-way), so a path reaches here the route it reaches there. Every GET
 * route is added; only the API's carry a FrontRoute (a path that reaches another route,
 * or none, goes on to Fastify).
 */
export class RouteTable {
  private readonly router: FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;

  /** `maxParamLength`: as Fastify's router is given (a longer parameter matches no route). */
  constructor(maxParamLength: number) {
    this.router = FindMyWay({ maxParamLength });
  }

  /** `route`: null for a GET route the front does not answer. */
  add(url: string, route: FrontRoute | null): void {
    this.router.on('GET', url, unused, route);
  }

  /** The API route a path reaches and its path parameters, or undefined (another route, or none). */
  find(path: string): { route: FrontRoute; params: Record<string, string | undefined> } | undefined {
    const found = this.router.find('GET', path);
    const route = found?.store as FrontRoute | null | undefined;
    return route ? { route, params: found!.params } : undefined;
  }
}

/** The router's handler: the front reads only a route's store. */
const unused = (): void => undefined;

/** What the front gives Fastify with a request it decided: the arrival and the decision (or the check's failure). */
export type Early = { id: string; startedAt: number; arrivedInTurn: number } & ({ decided: Access } | { failure: unknown });

/** The requests handed to Fastify with their decision, until the access hook takes it. */
const handedOn = new WeakMap<IncomingMessage, Early>();

/** The request id the front gave a request it handed to Fastify (Fastify's genReqId asks). */
export function earlyId(raw: IncomingMessage): string | undefined {
  return handedOn.get(raw)?.id;
}

/** The front's decision of a request, taken once (by the access hook). */
export function takeEarly(raw: IncomingMessage): Early | undefined {
  const early = handedOn.get(raw);
  if (early !== undefined) handedOn.delete(raw);
  return early;
}

/** A request the front answers: what the writer reads of it. */
class FrontExchange implements Exchange {
  caller: Caller | null = null;
  rateLimitHeaders: readonly string[] | null = null;

  readonly raw: IncomingMessage;
  readonly id: string;
  startedAt: number;
  arrivedInTurn: number;
  recordAnswer: ResponseRecorder | null;

  constructor(
    raw: IncomingMessage,
    id: string,
    startedAt: number,
    arrivedInTurn: number,
    recordAnswer: ResponseRecorder | null,
  ) {
    this.raw = raw;
    this.id = id;
    this.startedAt = startedAt;
    this.arrivedInTurn = arrivedInTurn;
    this.recordAnswer = recordAnswer;
  }

  get headers() {
    return this.raw.headers;
  }

  get method(): string {
    return this.raw.method!;
  }

  get url(): string {
    return this.raw.url!;
  }

  /** No proxy is trusted when the front runs: the client is the TCP peer. */
  get ip(): string {
    return this.raw.socket.remoteAddress ?? '';
  }
}

export interface FrontDeps {
  check: AccessCheck;
  write: WriteAnswer;
  routes: RouteTable;
  maxUrlBytes: number;
  /** The stored answer to an allowed request, when there is one (counted as a hit or a miss). */
  stored: (tenant: Tenant, target: string) => Answer | undefined;
  /** Whether an answer is stored, nothing counted ... */
  isStored: (tenant: Tenant, target: string) => boolean;
  /** ... and the miss counted once the request it was asked for is allowed. */
  missed: () => void;
  /** The answer to a request whose endpoint failed (src/edge/errors.ts). */
  answerError: ErrorAnswer;
}

/** The API's listener: the front, then Fastify's (`app`). Only for a listener that trusts no proxy. */
export function frontOf(deps: FrontDeps, app: Listener): Listener {
  const { check, write, routes, maxUrlBytes, stored, isStored, missed, answerError } = deps;

  function handOn(exchange: FrontExchange, res: ServerResponse, outcome: { decided: Access } | { failure: unknown }): void {
    handedOn.set(exchange.raw, { id: exchange.id, startedAt: exchange.startedAt, arrivedInTurn: exchange.arrivedInTurn, ...outcome });
    app(exchange.raw, res);
  }

  /** The endpoint's answer begun (its read sent with the turn's others). */
  function begin(exchange: FrontExchange, tenant: Tenant, route: FrontRoute, params: RouteRequest['params']): Promise<Answer> {
    // The answers held to the turn's end leave now if they have waited long (turn-end.ts).
    beforeQuery();
    return route.answer({ tenant, target: exchange.url, method: exchange.method, headers: exchange.headers, params });
  }

  /** `begun`: the answer begun while the rate limit was checked, used only if the request is allowed. */
  function answer(exchange: FrontExchange, res: ServerResponse, decided: Access, route: FrontRoute, params: RouteRequest['params'], begun?: Promise<Answer>): void {
    exchange.caller = decided.caller;
    exchange.rateLimitHeaders = decided.rateLimit;
    if (!decided.allowed) {
      write(exchange, res, problemAnswer(decided.problem, exchange.id));
      return;
    }
    const tenant = decided.tenant!;
    if (begun !== undefined) {
      // Begun because nothing was stored: its lookup's miss, counted now it is allowed (the
      // answer it stored meanwhile is its own, not a hit).
      missed();
    } else {
      const found = stored(tenant, exchange.url) ?? route.cut(tenant, exchange.url, exchange.method, exchange.headers);
      if (found !== undefined) {
        write(exchange, res, found);
        return;
      }
    }
    (begun ?? begin(exchange, tenant, route, params)).then(
      (made) => write(exchange, res, made),
      (failure: unknown) => write(exchange, res, answerError(failure, exchange)),
    );
  }

  return function front(req, res) {
    const url = req.url ?? '';
    const method = req.method;
    if ((method !== 'GET' && method !== 'HEAD') || !url.startsWith(API_PREFIX) || url.length > maxUrlBytes || url.includes('#') || headFault(req) !== null) {
      app(req, res);
      return;
    }
    const path = pathOf(url);
    const found = path.includes('%') || path.includes(';') ? undefined : routes.find(path);
    if (found === undefined) {
      app(req, res);
      return;
    }
    const { route, params } = found;
    const exchange = new FrontExchange(req, randomUUID(), performance.now(), currentTurn(), route.recordAnswer);
    // While the rate-limit service decides, the answer's read goes out in the same turn as
    // the check rather than a round trip after it; it is written only if the request is allowed.
    let begun: Promise<Answer> | undefined;
    const early = (tenant: Tenant): void => {
      if (isStored(tenant, url) || route.cuts(tenant, url)) return;
      begun = begin(exchange, tenant, route, params);
      // A refused request's answer is dropped, and so is its failure.
      begun.catch(ignore);
    };
    let decided: Access | Promise<Access>;
    try {
      decided = check(method, authorizationOf(req), route.url, false, exchange, early);
    } catch (failure) {
      handOn(exchange, res, { failure });
      return;
    }
    if (decided instanceof Promise) {
      decided.then(
        (d) => answer(exchange, res, d, route, params, begun),
        (failure: unknown) => handOn(exchange, res, { failure }),
      );
    } else answer(exchange, res, decided, route, params);
  };
}

const ignore = (): void => undefined;
