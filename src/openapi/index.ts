/**
 * The public documentation on the API listener, both without a key: the OpenAPI
 * document at /api/public/v1/openapi.json and a Swagger UI page at /docs that renders
 * it. Every asset of the page is served from this process (no CDN, no online
 * validator), so it works on a closed network.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { COMMON_HEADERS, dataAnswer, plain, type Writer } from '../edge/answer.js';
import { notFoundHandler } from '../edge/errors.js';
import type { KeptBody } from '../edge/encoding.js';
import { pathOf } from '../edge/paths.js';
import { DOCS_PATH, OPENAPI_PATH, swaggerOptions } from './document.js';

export { buildOpenApiDocument, DOCS_PATH, OPENAPI_PATH } from './document.js';

/**
 * The page loads only scripts, styles and images of its own origin and talks only to
 * it; Swagger UI sets inline style attributes, hence 'unsafe-inline' for styles alone.
 */
const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

// A plain wordmark in place of Swagger UI's default logo (embedded as a data: URI).
const LOGO = `<svg xmlns="http://www.w3.org/2000/svg" width="220" height="40" viewBox="0 0 220 40"><text x="0" y="28" font-family="sans-serif" font-size="24" font-weight="bold" fill="#ffffff">school-data API</text></svg>`;

// Swagger UI's own copies of the document; the page is pointed at the canonical one instead.
const UI_DOCUMENT_ALIASES = new Set([`${DOCS_PATH}/json`, `${DOCS_PATH}/yaml`]);


/**
 * Registers the OpenAPI generator, the document route and the docs page. Call it
 * before the API routes are registered: the generator collects routes as they are added.
 */
export async function registerOpenApi(
  app: FastifyInstance,
  writer: Pick<Writer, 'send' | 'written'>,
): Promise<void> {
  const { send } = writer;
  const notFound = notFoundHandler(send);
  const onlyThePage = (request: FastifyRequest, reply: FastifyReply, done: () => void): void => {
    if (UI_DOCUMENT_ALIASES.has(pathOf(request.url))) notFound(request, reply);
    else done();
  };
  await app.register(swagger, swaggerOptions());

  // Made once, on the first request: the routes are all known by then.
  let document: KeptBody | undefined;
  app.get(OPENAPI_PATH, { schema: { hide: true } }, (_request, reply) => {
    document ??= plain(JSON.stringify(app.swagger()));
    send(reply, dataAnswer(document, 'application/json; charset=utf-8'));
  });

  // In a context of its own, so the hooks below reach the page's static files as well.
  await app.register(async (docs) => {
    docs.addHook('onRequest', (request, reply, done) => {
      // A step out of the page's own folder names nothing here (the static server would say 400).
      if (hasDotSegment(pathOf(request.url))) notFound(request, reply);
      else done();
    });
    // The page's files are sent by their plugin (onSend runs for those only; the writer's
    // answers, a 404 here, are its own): noted once written, as the writer notes its own.
    const byPlugin = new WeakSet<FastifyRequest>();
    docs.addHook('onSend', (request, reply, _payload, done) => {
      void reply.headers({ ...DOCS_HEADERS, 'X-Request-Id': request.id });
      byPlugin.add(request);
      done();
    });
    docs.addHook('onResponse', (request, reply, done) => {
      if (byPlugin.has(request)) writer.written(request, reply.statusCode);
      done();
    });
    await registerPage(docs, onlyThePage);
  });
}

/**
 * What every answer of the docs page carries, as the API's answers do, and a Cache-Control
 * that keeps a copy but asks again (the static files answer If-None-Match with 304): the
 * files change with the service's version, not with their names. Sent uncompressed: the
 * 1.6 MB bundle would cost tens of milliseconds of CPU to compress for each reader who
 * needs no key.
 */
const DOCS_HEADERS = { ...COMMON_HEADERS, 'Cache-Control': 'no-cache' };

/** Whether a path holds a `.` or `..` segment, percent-encoded or not. */
function hasDotSegment(path: string): boolean {
  return /(^|\/)(\.|%2e){1,2}(\/|$)/i.test(path);
}

async function registerPage(app: FastifyInstance, onlyThePage: (request: FastifyRequest, reply: FastifyReply, done: () => void) => void): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: DOCS_PATH,
    staticCSP: DOCS_CSP,
    uiHooks: { onRequest: onlyThePage },
    theme: { title: 'school-data API' },
    logo: { type: 'image/svg+xml', content: LOGO },
    uiConfig: {
      urls: [{ url: OPENAPI_PATH, name: 'school-data v1' }],
      validatorUrl: null,
      deepLinking: true,
      docExpansion: 'list',
      defaultModelsExpandDepth: 1,
      displayRequestDuration: true,
      persistAuthorization: false,
      supportedSubmitMethods: ['get', 'head'],
    },
  });
}
