/**
 * buildCabinetApp assembles the director's cabinet: server-rendered pages over HTTPS on a
 * listener of its own, apart from the public API. It never listens, and it does not own
 * the stores it is given (the caller closes them after closing the app). Every response
 * gets the security headers and, when it is an error, an HTML page; pages are in the
 * request's language (src/cabinet/i18n). The sign-in gate and
 * the form checks live inside the pages' own plugins, so the operator's /healthz, /readyz
 * and /metrics share the listener without them.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import cookie from '@fastify/cookie';
import Fastify, { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { RateLimiter } from '../access/ratelimit/index.js';
import { asksUpgrade } from '../edge/answer.js';
import { answeringBeforeBody, bodyState } from '../edge/bodies.js';
import { limitServer, serverOptions, serveUnknownExpectations, type ListenerLimits } from '../edge/listener.js';
import { headFault, headRefusal } from '../edge/checks.js';
import { clientErrorHandler, connectHandler, socketAnswerRecords } from '../edge/raw.js';
import { lineWriter } from '../logger.js';
import { opsPlugin } from '../ops/health.js';
import { ApiMetrics } from '../ops/metrics.js';
import { AccessLog, redactKeys } from '../ops/request-log.js';
import type { Config } from '../config/index.js';
import type { Database } from '../db/schema.js';
import type { TlsMaterial } from '../tls.js';
import { assets } from './assets.js';
import { CabinetError, cabinetErrorHandler, cabinetNotFound } from './errors.js';
import { parseForm } from './form.js';
import { chooseLocale } from './i18n/index.js';
import { loginRoutes } from './routes/login.js';
import { keyRoutes } from './routes/keys.js';
import { CABINET_HEADERS } from './security.js';
import { sessionPolicy } from './session.js';

export interface CabinetDeps {
  config: ListenerLimits & Pick<Config, 'rateLimitProfi' | 'rateLimitVip' | 'keyUnusedDays' | 'cabinetSessionIdleMinutes' | 'cabinetSessionMaxHours' | 'dbTimeoutMs'>;
  db: Kysely<Database>;
  limiter: RateLimiter;
  logger: Logger;
  tls: TlsMaterial;
  /** The API's metrics, served at /metrics (default: the process's, which the API app records into). */
  metrics?: ApiMetrics;
}

/**
 * Writes the request's access line once its answer is done or its connection gone, from
 * its first step (a hook, or the router's error for a target it cannot read): the client's
 * address is read now, while the connection is there. Each request gets one line, but one
 * whose page was never sent: its body refused by the parser (whose 400 has a line of its
 * own), or its client gone before the page (what the request did is in its own lines, a
 * sign-in's say).
 */
function logWhenAnswered(accessLog: AccessLog, request: FastifyRequest, reply: FastifyReply): void {
  if (logged.has(request.raw)) return;
  logged.add(request.raw);
  const startedAt = performance.now();
  const remoteAddress = request.ip;
  const remotePort = request.socket?.remotePort;
  reply.raw.once('close', () => {
    if (!reply.raw.headersSent) return;
    accessLog.write({
      requestId: request.id, method: request.method, url: request.url, remoteAddress, remotePort,
      status: reply.raw.statusCode, responseTime: performance.now() - startedAt, caller: null,
    });
  });
}
const logged = new WeakSet<IncomingMessage>();

/** A request in the cabinet's other log lines (Fastify's error lines): its fields, with anything shaped like a key masked in the URL. */
const requestFields = (req: FastifyRequest) => ({ method: req.method, url: redactKeys(req.url), host: req.host, remoteAddress: req.ip, remotePort: req.socket?.remotePort });

/**
 * Fastify's logging of the cabinet's requests but for its two lines a request (`incoming
 * request`, and a `request completed` without method or URL): the access line is
 * `logWhenAnswered`'s. Its error lines (an error handler that failed, a stream error) stay.
 */
class CabinetLogController extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply, metadata?: Record<string, unknown>): void {
    if (error) super.requestCompleted(error, request, reply, metadata);
  }
}

/** The headers of every answer: the security headers, and the request id its error page shows. */
function pageHeaders(request: FastifyRequest, reply: FastifyReply): void {
  reply.headers(CABINET_HEADERS);
  reply.header('X-Request-Id', request.id);
}

/** The largest form the cabinet has (sign-in: email + password + token) fits many times over. */
const FORM_LIMIT = 8 * 1024;

export async function buildCabinetApp(deps: CabinetDeps) {
  const { config, db, limiter, tls } = deps;
  const logger = deps.logger.child({ listener: 'cabinet' }, { serializers: { req: requestFields } });
  const metrics = deps.metrics ?? ApiMetrics.forProcess();
  // Every request's one `request completed` line, as the API's (Fastify's own two lines a
  // request are off), and those of the answers made on the socket (no request reached
  // Fastify), with the refusals' budget of the API's: a flood of bad bytes is not a flood of lines.
  const accessLog = new AccessLog(lineWriter(logger), logger.isLevelEnabled('info'), { listener: 'cabinet' });
  const socketAnswers = socketAnswerRecords(accessLog, metrics, 'cabinet');

  // The same TLS settings, timeouts and connection limits as the API's listener.
  const app = Fastify({
    loggerInstance: logger,
    // A missing Host is refused by the hook below, with the cabinet's headers, not by Node's bare 400.
    https: { ...serverOptions(config, tls), requireHostHeader: false },
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    logController: new CabinetLogController({ requestIdLogLabel: 'requestId' }),
    bodyLimit: FORM_LIMIT,
    return503OnClosing: false,
    // A path parameter as long as the headers allow: an over-long key id is a malformed id,
    // answered by its route like any other (the sign-in gate, then 404), not a router error.
    routerOptions: { maxParamLength: config.maxHeaderBytes },
    // Errors the router raises before any hook (an undecodable path, a target that is no
    // path): the same headers and error page as every other answer.
    frameworkErrors: (error, request, reply) => {
      logWhenAnswered(accessLog, request, reply);
      pageHeaders(request, reply);
      cabinetErrorHandler(error, request, reply);
    },
    // What never became a request (bytes that are not HTTP, an unknown method, headers over
    // the limit, a client too slow): answered on the socket as the API answers it, with the
    // cabinet's headers and without the API's rules.
    clientErrorHandler: clientErrorHandler(CABINET_HEADERS, socketAnswers.clientError, { apiRules: false }),
  });
  limitServer(app.server, config);
  serveUnknownExpectations(app.server);
  // What follows a request line of another version cannot be read as HTTP/1.1 either: every
  // answer to one closes the connection (the router's refusals come before any hook).
  app.server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    if (headFault(req) === 'other-version') res.setHeader('Connection', 'close');
    else if (asksUpgrade(req)) res.setHeader('Connection', 'close');
  });
  // CONNECT, which Node hands to no request handler: a fault of its line or Host (400), else
  // 404, on the socket, with its line as the API's.
  app.server.on('connect', connectHandler(CABINET_HEADERS, headRefusal, socketAnswers.connect, { apiRules: false }));
  app.addHook('onClose', (_instance, done) => {
    accessLog.reportUnlogged();
    done();
  });

  app.decorateRequest('cabinet', null);
  app.addHook('onRequest', (request, reply, done) => {
    logWhenAnswered(accessLog, request, reply);
    pageHeaders(request, reply);
    // As on the API's listener (the form checks compare Host with Origin).
    if (headFault(request.raw) !== null) done(new CabinetError(400, { page: 'badRequest' }));
    else done();
  });
  // As on the API (src/edge/bodies.ts): a page ready while its request's body is still
  // arriving closes the connection, and one whose body the parser refused is not sent (the
  // hook never finishes: the parser's 400 is the answer, and the connection closes after it).
  app.addHook('onSend', (request, reply, payload, done) => {
    const body = bodyState(request.raw);
    if (body === 'refused') return;
    if (body === 'arriving') {
      answeringBeforeBody(request.raw.socket);
      reply.header('Connection', 'close');
    }
    done(null, payload);
  });
  app.setErrorHandler(cabinetErrorHandler);
  app.setNotFoundHandler(cabinetNotFound);

  // Forms only: a JSON or text body is refused (415) rather than read, a malformed form 400.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer', bodyLimit: FORM_LIMIT }, (_request, body, done) => {
    done(null, parseForm(body as Buffer));
  });
  await app.register(cookie, { hook: 'onRequest' });
  // After the cookies are read: the page's language (a `?lang=` switch sets its cookie here).
  app.decorateRequest('locale', null);
  app.addHook('onRequest', (request, reply, done) => {
    request.locale = chooseLocale(request, reply);
    done();
  });
  await app.register(assets);

  const context = { config, db, limiter, policy: sessionPolicy(config) };
  await app.register(loginRoutes, context);
  await app.register(keyRoutes, context);
  // The operator's /healthz, /readyz and /metrics (src/ops/health.ts), outside the sign-in gate.
  await app.register(opsPlugin, { metrics, db, limiter, checkTimeoutMs: config.dbTimeoutMs });

  return app;
}

export type CabinetApp = Awaited<ReturnType<typeof buildCabinetApp>>;
