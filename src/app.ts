/**
 * buildApp assembles the public API from its parts; it never listens. The caller
 * hands in the stores, and the app closes them in onClose (usage counts first, so
 * they reach the database before it goes).
 */
import https from 'node:https';
import querystring from 'node:querystring';
import zlib from 'node:zlib';
import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import compress from '@fastify/compress';
import Fastify, { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { accessGate, gateRequestId } from './access/gate.js';
import { accessCheck, accessHook, API_PREFIX, methodNotAllowed } from './access/index.js';
import type { RateLimiter } from './access/ratelimit/index.js';
import type { UsageRecorder } from './access/usage.js';
import type { Config } from './config/index.js';
import type { Store } from './db/index.js';
import { lineWriter } from './logger.js';
import { ApiMetrics, RouteRecorders, UNMATCHED_ROUTE } from './ops/metrics.js';
import { OPENAPI_PATH, registerOpenApi } from './openapi/index.js';
import { AccessLog, callerFields, requestForLog } from './ops/request-log.js';
import { clientErrorHandler, errorHandler, notFoundHandler, writeRawProblem } from './problems/handlers.js';
import { Problem } from './problems/index.js';
import { compileQueryDecoder } from './resources/common/query.js';
import { ResponseCache } from './resources/cache.js';
import { COMPRESS_FROM_BYTES, ENCODINGS } from './resources/encoding.js';
import { publicApi } from './resources/index.js';
import type { TlsMaterial } from './tls.js';
import { atTurnEnd, mayHold, writeWaiting } from './turn-end.js';

export interface AppDeps {
  config: Config;
  store: Store;
  limiter: RateLimiter;
  usage: UsageRecorder;
  logger: Logger;
  tls: TlsMaterial;
  /** Where request counts and latencies go (default: the process's); the ops plugin serves them. */
  metrics?: ApiMetrics;
  /** The stored answers (default: SCHOOL_DATA_RESPONSE_CACHE_MB of them, gzipped as room is needed). */
  cache?: ResponseCache;
}

/** TLS 1.2 is allowed with forward-secret AEAD suites only; TLS 1.3 suites are all strong. */
export const TLS12_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

const SECURITY_HEADERS = {
  'Strict-Transport-Security': 'max-age=31536000',
  'X-Content-Type-Options': 'nosniff',
  'Cache-Control': 'no-store',
};

/**
 * The TLS settings and the limits of a listener (docs/operations.md, "Server limits"),
 * for Fastify's options. Shared by every HTTPS listener of the service.
 */
export function listenerOptions(config: ListenerLimits, tls: TlsMaterial) {
  return {
    https: {
      key: tls.key,
      cert: tls.cert,
      minVersion: 'TLSv1.2',
      ciphers: TLS12_CIPHERS,
      honorCipherOrder: true,
      handshakeTimeout: config.tlsHandshakeTimeoutMs,
      maxHeaderSize: config.maxHeaderBytes,
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      // How often Node looks for requests past those two timeouts (its default is 30 s,
      // which would let a slowloris client hold a connection for that much longer).
      connectionsCheckingInterval: 1000,
    } satisfies https.ServerOptions,
  };
}

export type ListenerLimits = Pick<
  Config,
  'tlsHandshakeTimeoutMs' | 'maxHeaderBytes' | 'headersTimeoutMs' | 'requestTimeoutMs' | 'idleTimeoutMs' | 'keepAliveTimeoutMs' | 'maxConnections'
>;

/**
 * The limits that are set on the server itself once it exists: the one place for the
 * keep-alive, request and idle timeouts of both listeners (Fastify would set them only on a
 * server it makes itself, and the API's is made by its serverFactory).
 */
export function limitServer(server: https.Server, config: ListenerLimits): void {
  server.headersTimeout = config.headersTimeoutMs;
  server.requestTimeout = config.requestTimeoutMs;
  server.keepAliveTimeout = config.keepAliveTimeoutMs;
  server.setTimeout(config.idleTimeoutMs);
  // Past this many open connections a new one is closed at once, before its TLS handshake:
  // it bounds the memory and descriptors a connection flood can take.
  server.maxConnections = config.maxConnections;
}

/**
 * The access log: one line per request at info, written when it is answered, with what
 * Fastify's two lines ("incoming request", "request completed") carry between them (the
 * request, its status and its time) plus the key and school (see accessLine). Half the
 * logging work of the two, which a flood of bad keys would otherwise double.
 */
class AccessLogController extends LogController {
  constructor(private readonly accessLog: AccessLog) {
    super({ requestIdLogLabel: 'requestId' });
  }

  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    if (error) {
      request.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime, ...callerFields(request.caller) }, 'request errored');
    } else {
      this.accessLog.write({
        requestId: request.id, method: request.method, url: request.url, remoteAddress: request.ip, remotePort: request.socket?.remotePort,
        status: reply.statusCode, responseTime: reply.elapsedTime, caller: request.caller,
      });
    }
  }
}

export async function buildApp(deps: AppDeps) {
  const { config, store, limiter, usage, logger, tls } = deps;
  const metrics = deps.metrics ?? ApiMetrics.forProcess();
  const recordUnmatched = metrics.recorderFor(UNMATCHED_ROUTE);

  const serverOptions = { ...listenerOptions(config, tls).https, requireHostHeader: false };
  const accessLog = new AccessLog(lineWriter(logger), logger.isLevelEnabled('info'));
  const cache = deps.cache ?? new ResponseCache(config.responseCacheMb * 2 ** 20, { compressFrom: COMPRESS_FROM_BYTES });
  metrics.watchStoredAnswers(() => ({ ...cache.lookups, bytes: cache.size.bytes }));
  const check = accessCheck({ config, reads: store.reads, limiter, usage });
  const publicPaths = new Set([OPENAPI_PATH]);
  // The API's route patterns, for the metrics of the answers the gate gives before routing.
  const apiRoutes = new RouteRecorders(recordUnmatched);
  const app = Fastify({
    // The logger's own req serializer wins over Fastify's: it masks keys pasted into URLs.
    loggerInstance: logger.child({}, { serializers: { req: requestForLog } }),
    // A missing Host is answered by our own hook as problem+json, not by Node's bare 400.
    https: serverOptions,
    // The server's request listener is the access gate, which hands on to the app what it
    // lets through (src/access/gate.ts). The timeouts Fastify sets on a server it makes
    // itself are set by limitServer below.
    serverFactory: (handler) => {
      const server = https.createServer(serverOptions);
      const gate = accessGate(
        {
          check, publicPaths, maxUrlBytes: config.maxUrlBytes, headers: SECURITY_HEADERS, logger, accessLog,
          recorderFor: (path) => apiRoutes.recorderFor(path),
          stored: (tenant, target) => cache.get(tenant, target),
          compressFrom: COMPRESS_FROM_BYTES,
          closing: () => !server.listening,
        },
        handler,
      );
      // A client that closes its side after its request has the connection ended by Node in
      // the turn that read it: the answers held to the turn's end go first (src/turn-end.ts).
      server.on('secureConnection', (socket: Duplex) => socket.prependListener('end', writeWaiting));
      return server.on('request', gate);
    },
    // The gate's request id when the gate saw the request first, so both tell the same.
    genReqId: (req) => gateRequestId(req) ?? randomUUID(),
    requestIdHeader: false,
    logController: new AccessLogController(accessLog),
    bodyLimit: 1024,
    // A path parameter can be as long as the URL limit allows: a longer one is a URL over
    // the limit (414), caught by the router before any hook runs.
    routerOptions: { maxParamLength: config.maxUrlBytes, querystringParser: (s: string) => querystring.parse(s) },
    // Errors the router raises before any hook (an undecodable path, an over-long
    // parameter) are answered like every other error.
    frameworkErrors: (error, request, reply) => {
      reply.headers(SECURITY_HEADERS);
      errorHandler(error, request, reply);
      // No route and no hooks here, so the answer is counted on the spot.
      recordUnmatched(reply.statusCode, reply.elapsedTime);
    },
    clientErrorHandler: clientErrorHandler(SECURITY_HEADERS, (kind) => metrics.clientError(kind)),
    // While closing, requests already on open connections are served (and counted) normally;
    // new connections are refused by the closed listener, idle ones are closed.
    return503OnClosing: false,
  });
  limitServer(app.server, config);
  // Node itself would answer these two with bare statuses. An unknown expectation is
  // ignored (RFC 9110 allows it) and the request served; CONNECT, which only a proxy
  // supports, gets the API's 405.
  app.server.on('checkExpectation', (req, res) => app.server.emit('request', req, res));
  app.server.on('connect', (_req, socket: Duplex) => {
    writeRawProblem(socket, 405, methodNotAllowed('CONNECT').problem, SECURITY_HEADERS);
  });

  app.decorateRequest('tenant', null);
  app.decorateRequest('caller', null);

  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart === 'querystring') {
      const decode = compileQueryDecoder(schema);
      return (data: unknown) => {
        try {
          return { value: decode((data ?? {}) as Record<string, string>) };
        } catch (error) {
          return { error: error as Error };
        }
      };
    }
    if (httpPart === 'params') {
      // A malformed id cannot name anything: it is a missing object (404), not a bad request.
      const props = (schema as { properties?: Record<string, { pattern?: string }> }).properties ?? {};
      const checks = Object.entries(props).map(([name, p]) => [name, new RegExp(p.pattern ?? '.*', 'u')] as const);
      return (data: unknown) => {
        const params = data as Record<string, string>;
        for (const [name, re] of checks) {
          if (!re.test(params[name] ?? '')) return { error: new Problem('not_found', 'No such object.') };
        }
        return { value: params };
      };
    }
    throw new Error(`no validator for ${httpPart}`);
  });

  app.addHook('onRequest', (request, reply, done) => {
    reply.headers(SECURITY_HEADERS);
    reply.header('X-Request-Id', request.id);
    // Checked before the key, like any limit of the HTTP layer.
    if (request.url.length > config.maxUrlBytes) {
      done(new Problem('uri_too_long', `The request URI is over ${config.maxUrlBytes} bytes.`));
      return;
    }
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      done(new Problem('invalid_parameter', 'An HTTP/1.1 request needs a Host header.'));
      return;
    }
    // A fragment belongs to the client and is never sent (RFC 9112, request-target); Node
    // passes the '#' on, and it would otherwise read as part of a parameter.
    if (request.url.includes('#')) {
      done(new Problem('invalid_parameter', 'The request target contains "#": a URL\'s fragment is not sent to the server. Leave it out, or write "#" inside a value as %23.'));
      return;
    }
    done();
  });
  app.addHook('onRequest', accessHook(check, publicPaths));

  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);

  // Metrics: each route gets a recorder bound to its pattern when it is registered, so a
  // response costs two increments; answers that matched no route share one label.
  app.addHook('onRoute', (route) => {
    const record = metrics.recorderFor(route.url);
    if (route.url.startsWith(API_PREFIX)) apiRoutes.add(route.url, record);
    const hooks = route.onResponse === undefined ? [] : Array.isArray(route.onResponse) ? route.onResponse : [route.onResponse];
    route.onResponse = [
      ...hooks,
      (_request, reply, done) => {
        record(reply.statusCode, reply.elapsedTime);
        done();
      },
    ];
  });
  app.addHook('onResponse', (request, reply, done) => {
    if (request.is404) recordUnmatched(reply.statusCode, reply.elapsedTime);
    done();
  });

  await app.register(compress, { global: true, threshold: COMPRESS_FROM_BYTES, encodings: ENCODINGS, brotliOptions: { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4 } } });
  // On SQLite, where an answer is made in the turn that read its request, the app's answers
  // to reads leave at the end of the turn like the gate's (src/turn-end.ts); on PostgreSQL they are
  // made when a query comes back, and leave at once. After compression's hook; called
  // without a payload, done keeps the one it was given.
  if (store.reads.dialect === 'sqlite') {
    app.addHook('onSend', (request, _reply, _payload, done) => (mayHold(request.raw.method) ? atTurnEnd(done) : done()));
  }
  // Before the API routes: the OpenAPI generator collects them as they are added.
  await registerOpenApi(app);
  await app.register(publicApi, { prefix: API_PREFIX.slice(0, -1), reads: store.reads, cache });

  app.addHook('onClose', async () => {
    accessLog.reportUnlogged();
    await usage.close();
    await limiter.close();
    await store.close();
  });

  return app;
}

export type App = Awaited<ReturnType<typeof buildApp>>;
