/**
 * buildApp assembles the public API from its parts; it never listens (src/server.ts does).
 * A request walks: edge checks (src/edge/checks.ts) -> access (src/access/hook.ts) ->
 * stored answer or route (src/resources/) -> the one writer (src/edge/answer.ts).
 * The caller hands in the stores, and the app closes them in onClose (usage counts
 * first, so they reach the database before it goes).
 */
import http from 'node:http';
import Fastify, { type FastifyError, type FastifyServerFactory } from 'fastify';
import type { Logger } from 'pino';
import { accessCheck } from './access/decide.js';
import { earlyId, frontOf, RouteTable } from './access/front.js';
import { accessHook } from './access/hook.js';
import type { RateLimiter } from './access/ratelimit/index.js';
import type { UsageRecorder } from './access/usage.js';
import type { Config } from './config/index.js';
import type { Store } from './db/index.js';
import { answerWriter, dataAnswer, noteArrival, SECURITY_HEADERS, type Answer } from './edge/answer.js';
import { edgeChecks, edgeRefusal } from './edge/checks.js';
import { errorAnswer, errorHandler, notFoundHandler } from './edge/errors.js';
import { COMPRESS_FROM_BYTES } from './edge/encoding.js';
import { API_PREFIX, underPrefix } from './edge/paths.js';
import { clientErrorHandler, connectHandler, socketAnswerRecords } from './edge/raw.js';
import { lineWriter } from './logger.js';
import { causeOf, DependencyState } from './ops/dependency.js';
import { storeAnswers } from './ops/health.js';
import { ApiMetrics, UNMATCHED_ROUTE } from './ops/metrics.js';
import { AccessLog } from './ops/request-log.js';
import { OPENAPI_PATH, registerOpenApi } from './openapi/index.js';
import { ResponseCache } from './resources/cache.js';
import { parseQuery, validatorCompiler } from './resources/common/query.js';
import { ENDPOINTS, publicApi, servedEndpoints } from './resources/index.js';
import { trustedHops } from './domain/addresses.js';
import { scopeSetOf, type ScopeSet } from './domain/scopes.js';
import type { Tenant } from './domain/tenant.js';

export interface AppDeps {
  config: Config;
  store: Store;
  limiter: RateLimiter;
  usage: UsageRecorder;
  logger: Logger;
  /** Makes the HTTPS server (src/edge/listener.ts, apiServerFactory). */
  serverFactory: FastifyServerFactory;
  /** Where request counts and latencies go (default: the process's); the ops plugin serves them. */
  metrics?: ApiMetrics;
  /** The stored answers (default: SCHOOL_DATA_RESPONSE_CACHE_MB of them). */
  cache?: ResponseCache;
}

export async function buildApp(deps: AppDeps) {
  const { config, store, limiter, usage, logger } = deps;
  const metrics = deps.metrics ?? ApiMetrics.forProcess();
  const unmatched = metrics.recorderFor(UNMATCHED_ROUTE);
  const cache = deps.cache ?? new ResponseCache(config.responseCacheMb * 2 ** 20, { compressFrom: COMPRESS_FROM_BYTES });
  metrics.watchStoredAnswers(() => ({ ...cache.lookups, bytes: cache.size.bytes }));
  // The states of the request path's dependencies: each logs its outages once (src/ops/dependency.ts).
  const database = new DependencyState(store.dialect, 'data_unavailable', logger);
  const rateLimiter = new DependencyState('redis', 'rate_limit_unavailable', logger);
  database.probeWith(() => storeAnswers(store.db));
  rateLimiter.probeWith(() => limiter.ping());
  metrics.watchDependencies([database, rateLimiter]);

  const accessLog = new AccessLog(lineWriter(logger), logger.isLevelEnabled('info'));
  const socketAnswers = socketAnswerRecords(accessLog, metrics, 'api', unmatched);
  const writer = answerWriter({ accessLog, unmatched, closing: () => !app.server.listening, keyRequests: (r) => usage.logRequest(r), cutWritten: () => cache.cutWritten() });
  const send = writer.send;
  const answerError = errorAnswer(logger, database);
  const onError = errorHandler(answerError, send);
  const served = servedEndpoints({ reads: store.reads, cache });
  const scopes = routeScopes();
  // On PostgreSQL the keys looked up are kept while the store's watch says nothing changed
  // (src/db/watch.ts); it is started once the app is built (nothing below can then fail and
  // leave it running), before the first request, and stopped with the app.
  const keyWatch = store.watchKeys({
    onState: (listening, err) => (listening ? logger.info('key watch listening: keys looked up are kept') : logger.warn({ cause: causeOf(err) }, 'key watch lost: every request looks its key up until it is back')),
  });
  const check = accessCheck({ config, reads: store.reads, keyWatch, limiter, usage, database, rateLimiter, routeScopes: scopes });
  const checkEdge = edgeChecks({ maxUrlBytes: config.maxUrlBytes, unmatched, send });
  const checkAccess = accessHook({ check, publicPaths: new Set([OPENAPI_PATH]), send });
  // The front (src/access/front.ts) answers refusals and stored answers before Fastify; with
  // trusted proxies the client's address is Fastify's to read, so every request goes there.
  const frontRoutes = new RouteTable(config.maxUrlBytes);
  const serverFactory: FastifyServerFactory =
    config.trustedProxies !== '' ? deps.serverFactory
    : (handler, options) => deps.serverFactory(frontOf({ check, write: writer.write, routes: frontRoutes, maxUrlBytes: config.maxUrlBytes, stored: storedAnswer(cache), isStored: (tenant, target) => cache.has(tenant, target), missed: () => cache.missed(), answerError }, handler), options);
  const app = Fastify({
    serverFactory,
    // request.ip is the TCP peer, or the address a trusted proxy reports (X-Forwarded-For)
    // when the peer is one of SCHOOL_DATA_TRUSTED_PROXIES: key allowlists check it. A hop
    // written with its port is judged by its address, as the client's address is read.
    trustProxy: config.trustedProxies === '' ? false : trustedHops(config.trustedProxies),
    // Every answer is logged by the writer (one access line); errors by the error handler.
    logger: false,
    genReqId: (raw) => earlyId(raw) ?? crypto.randomUUID(),
    requestIdHeader: false,
    bodyLimit: 1024,
    // A path parameter can be as long as the URL limit allows: a longer one is a URL over
    // the limit (414), caught by the router before any hook runs. Query strings are read as
    // the front reads them (parseQuery).
    routerOptions: { maxParamLength: config.maxUrlBytes, querystringParser: parseQuery },
    // Errors the router raises before any hook (an undecodable path or a target that is no
    // path, an over-long parameter) are answered like every other error. A bad URL gets the
    // edge's checks first (a target that is no path is 400 there); under the prefix it is an
    // unknown path, whose 404 comes after the access checks.
    frameworkErrors: (error, request, reply) => {
      if (error.code === 'FST_ERR_BAD_URL') {
        checkEdge(request, reply, () => {
          if (!underPrefix(request.url)) onError(error, request, reply);
          else checkAccess(request, reply, (failure) => onError((failure as FastifyError | undefined) ?? error, request, reply));
        });
        return;
      }
      noteArrival(request, unmatched);
      onError(error, request, reply);
    },
    clientErrorHandler: clientErrorHandler(SECURITY_HEADERS, socketAnswers.clientError),
    // While closing, requests already on open connections are served (and counted) normally;
    // new connections are refused by the closed listener, idle ones are closed.
    return503OnClosing: false,
  });
  // CONNECT, which Node hands to no request handler, is answered as another method is, with its access line.
  app.server.on(
    'connect',
    connectHandler(SECURITY_HEADERS, edgeRefusal(config.maxUrlBytes), socketAnswers.connect),
  );
  // Every method Node's parser takes reaches the hooks (405 under the prefix, before the key).
  for (const method of http.METHODS) if (!app.supportedMethods.includes(method)) app.addHttpMethod(method);

  app.decorateRequest('startedAt', 0);
  app.decorateRequest('arrivedInTurn', 0);
  app.decorateRequest('caller', null);
  app.decorateRequest('rateLimitHeaders', null);
  app.decorateRequest('route', undefined);
  app.decorateRequest('recordAnswer', null);
  app.decorateRequest('tenant', null);

  app.setValidatorCompiler(validatorCompiler);
  // Each route's metrics recorder is bound when the route is added: an answer then costs a
  // few additions; answers on no route share the `unmatched` label.
  app.addHook('onRoute', (route) => {
    const recordAnswer = metrics.recorderFor(route.url);
    route.config = { ...route.config, recordAnswer };
    const endpoint = served.get(route.url);
    if ([route.method].flat().includes('GET')) frontRoutes.add(route.url, endpoint === undefined ? null : { url: route.url, recordAnswer, answer: (request) => endpoint.answerTarget(request), cut: (tenant, target, method, headers) => endpoint.cut(tenant, target, method, headers), cuts: (tenant, target) => endpoint.cuts(tenant, target) });
  });
  app.addHook('onRequest', checkEdge);
  app.addHook('onRequest', checkAccess);
  app.setErrorHandler(onError);
  app.setNotFoundHandler(notFoundHandler(send));

  // Before the API routes: the OpenAPI generator collects them as they are added.
  await registerOpenApi(app, writer);
  await app.register(publicApi, { prefix: API_PREFIX.slice(0, -1), reads: store.reads, cache, send, served });

  app.addHook('onClose', async () => {
    accessLog.reportUnlogged();
    database.close();
    rateLimiter.close();
    // No periodic flush begins while the key watch closes (up to a second with a silent store).
    usage.stopFlushing();
    await keyWatch?.close();
    await usage.close();
    await limiter.close();
    await store.close();
  });
  await keyWatch?.start();
  return app;
}

/** The stored answer to a request allowed by the front, as the route's hook would send it (a hit or a miss counted). */
function storedAnswer(cache: ResponseCache) {
  return (tenant: Tenant, target: string): Answer | undefined => {
    const stored = cache.get(tenant, target);
    return stored === undefined ? undefined : dataAnswer(stored, stored.contentType, stored.validator);
  };
}

/** The key scopes each API route needs, by the route's URL (the access step checks them). */
function routeScopes(): Map<string, ScopeSet> {
  const needs = new Map<string, ScopeSet>();
  for (const spec of ENDPOINTS) needs.set(`${API_PREFIX.slice(0, -1)}${spec.url}`, scopeSetOf(spec.scopes));
  return needs;
}

export type App = Awaited<ReturnType<typeof buildApp>>;
