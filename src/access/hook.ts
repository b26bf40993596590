/**
 * The access hook: for every request addressed under the API prefix (in origin or absolute
 * form, or with a path the router cannot decode) and every request the router took to an
 * API route another way (a percent-encoded path), decides access before the route runs,
 * so an unknown path with a bad key is 401. A
 * refusal is answered here; an allowed request goes on with its tenant. A decision that
 * could not be made (the data store did not answer) goes to the error handler. A request
 * the front (front.ts) decided comes with its decision.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Tenant } from '../domain/tenant.js';
import { problemAnswer, type SendAnswer } from '../edge/answer.js';
import { API_PREFIX, targetPath, underPrefix } from '../edge/paths.js';
import { authorizationOf, type Access, type AccessCheck } from './decide.js';
import { takeEarly } from './front.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The school the request acts for, once access is decided (null on public paths). */
    tenant: Tenant | null;
  }
}

export interface AccessHookOptions {
  check: AccessCheck;
  /** Paths under the prefix that need no key (the OpenAPI document). */
  publicPaths: ReadonlySet<string>;
  send: SendAnswer;
}

export function accessHook({ check, publicPaths, send }: AccessHookOptions) {
  function apply(request: FastifyRequest, reply: FastifyReply, decided: Access, done: (err?: Error) => void): void {
    request.caller = decided.caller;
    request.rateLimitHeaders = decided.rateLimit;
    if (decided.allowed) {
      request.tenant = decided.tenant;
      done();
      return;
    }
    send(reply, problemAnswer(decided.problem, request.id));
  }

  return function access(request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void {
    // Decided by the front (front.ts) before Fastify saw it: applied as decided there.
    const early = takeEarly(request.raw);
    if (early !== undefined) {
      request.startedAt = early.startedAt;
      request.arrivedInTurn = early.arrivedInTurn;
      if ('failure' in early) done(early.failure as Error);
      else apply(request, reply, early.decided, done);
      return;
    }
    const route = request.route;
    if (!underPrefix(request.url) && !route?.startsWith(API_PREFIX)) {
      done();
      return;
    }
    let decided: Access | Promise<Access>;
    try {
      decided = check(request.method, authorizationOf(request.raw), route, publicPaths.has(route ?? targetPath(request.url)), request);
    } catch (failure) {
      done(failure as Error);
      return;
    }
    if (decided instanceof Promise) decided.then((d) => apply(request, reply, d, done), (failure: unknown) => done(failure as Error));
    else apply(request, reply, decided, done);
  };
}
