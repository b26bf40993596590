/**
 * The OpenAPI 3.1 document of the public API. @fastify/swagger builds it from the
 * very route schemas that validate queries and serialize responses; this module
 * only adds what routes cannot say (info, servers, security, the headers of each
 * status) and names the schemas that carry a title, so the document has one
 * `Student`, one `Problem`, ... in components instead of a copy per route.
 */
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import swagger from '@fastify/swagger';
import Fastify from 'fastify';
import { DummyDriver, Kysely, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler } from 'kysely';
import { API_PREFIX } from '../edge/paths.js';
import type { Reader } from '../db/index.js';
import type { Database } from '../db/schema.js';
import { responseHeaders } from '../resources/common/responses.js';
import { ResponseCache } from '../resources/cache.js';
import { publicApi } from '../resources/index.js';
import { packageVersion } from '../version.js';
import type { JsonSchema, OpenApiDocument, Operation, ParameterObject } from './types.js';

export const OPENAPI_PATH = `${API_PREFIX}openapi.json`;
export const DOCS_PATH = '/docs';

const DESCRIPTION = `Read-only data of one driving school: students, instructors, training vehicles, lessons,
contracts, payments, leads and a finance summary. HTTPS only; GET (and HEAD) only; JSON.

**Authentication.** Every request carries \`Authorization: Bearer <key>\`. A key (\`service_pk_\` + 32 hex
characters) belongs to one school and never reaches another school's data. The school's director creates
keys in the cabinet (settings, API); the value is shown once. A missing, wrong or revoked key gets 401.
Keys work for schools on the Profi and VIP plans; other plans get 402.

**Limits.** Each school has a per-minute request limit shared by all its keys (Profi 60, VIP 600 by
default). Every answer to a request with a key of a school whose plan has a limit (200 or 304, and 400,
403, 404, 410, 429, 500 or 503 data_unavailable) carries \`RateLimit-Policy\` (the quota) and \`RateLimit\`
(requests remaining, seconds to reset); over the limit the answer is 429 with \`Retry-After: 60\`. A 503
carries \`Retry-After\` too. HEAD answers as GET does, without the body.

**Lists** answer \`{ "items": [...], "meta": { "total", "limit", "offset" } }\`, \`limit\` 1-200 (default 50),
\`offset\` 0-1000000, in a stable order (the resource's time field, then id). **Periods** are a date
\`YYYY-MM-DD\` (a whole day in the school's time zone) or an RFC 3339 date-time with offset; both bounds
are inclusive. **Money** is a string with two decimals plus \`currency\`. **Errors** are RFC 9457
problem details (\`application/problem+json\`) with a \`code\` and the \`request_id\` of \`X-Request-Id\`.

The reference (keys, requests, every resource and field, errors, limits) is in docs/api/ of the
service's repository, and a guide for API users in docs/guide.md.`;

const TAGS = [
  { name: 'students', description: 'Students and their cards (contracts, lesson counts, balance).' },
  { name: 'instructors', description: 'Driving instructors.' },
  { name: 'vehicles', description: 'Training vehicles with their insurance and technical inspection dates.' },
  { name: 'lessons', description: 'Lessons (driving, autodrome, theory, internal exams) by period.' },
  { name: 'contracts', description: 'Training contracts with what is paid and owed.' },
  { name: 'payments', description: 'Payments and refunds by period.' },
  { name: 'leads', description: 'Applications for training.' },
  { name: 'reports', description: 'Finance summary.' },
  { name: 'changes', description: 'What changed in the school\'s data since a saved cursor: upserts and deletions, for keeping a copy in sync.' },
];

/** The options of @fastify/swagger, for the served app and the offline builder alike. */
export function swaggerOptions(): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'school-data',
        version: packageVersion(),
        description: DESCRIPTION,
      },
      servers: [
        { url: '/', description: 'The server this document was loaded from' },
        { url: 'https://{host}', description: 'Your school-data service', variables: { host: { default: '127.0.0.1:8443', description: 'host and port' } } },
      ],
      tags: TAGS,
      components: {
        securitySchemes: {
          apiKey: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'service_pk_<32 hex>',
            description: 'The school\'s API key: Authorization: Bearer service_pk_...',
          },
        },
      },
      security: [{ apiKey: [] }],
    },
    // Every public route carries tags; untagged ones (the document itself, the docs page) stay out.
    hideUntagged: true,
    stripBasePath: false,
    transformObject: (generated) => {
      if (!('openapiObject' in generated)) throw new Error('expected an OpenAPI 3 document');
      return finishDocument(generated.openapiObject as OpenApiDocument);
    },
  };
}

/** The request header of conditional requests, which every operation takes. */
const IF_NONE_MATCH: ParameterObject = {
  name: 'If-None-Match',
  in: 'header',
  required: false,
  description: 'ETags of answers the client holds (or *): if one is this answer\'s current tag, the answer is 304 without a body.',
  schema: { type: 'string' },
};

/** Adds the headers of each status and the If-None-Match parameter, and hoists titled schemas into components. */
export function finishDocument(doc: OpenApiDocument): OpenApiDocument {
  const schemas: Record<string, JsonSchema> = { ...doc.components?.schemas };
  const paths = hoistTitled(doc.paths, schemas) as OpenApiDocument['paths'];
  for (const item of Object.values(paths)) {
    for (const operation of Object.values(item)) {
      addHeaders(operation);
      operation.parameters = [...(operation.parameters ?? []), IF_NONE_MATCH];
    }
  }
  return { ...doc, paths, components: { ...doc.components, schemas } };
}

function addHeaders(operation: Operation): void {
  for (const [status, response] of Object.entries(operation.responses)) {
    const headers = responseHeaders[Number(status) as keyof typeof responseHeaders];
    if (!headers) throw new Error(`no headers are declared for status ${status} (src/resources/common/responses.ts)`);
    response.headers = Object.fromEntries(
      Object.entries(headers).map(([name, h]) => [name, { description: h.description, required: h.required, schema: { ...h.schema } }]),
    );
  }
}

/**
 * Replaces every object schema that has a title with a reference to
 * components.schemas[title]. Two different schemas with one title are a mistake in
 * the resource schemas, reported rather than silently merged.
 */
function hoistTitled(node: unknown, schemas: Record<string, JsonSchema>): unknown {
  if (Array.isArray(node)) return node.map((n) => hoistTitled(n, schemas));
  if (node === null || typeof node !== 'object') return node;
  const entries = Object.entries(node).map(([k, v]) => [k, hoistTitled(v, schemas)] as const);
  const copy = Object.fromEntries(entries) as JsonSchema;
  if (copy.type !== 'object' || typeof copy.title !== 'string') return copy;
  const name = copy.title;
  const known = schemas[name];
  if (known && JSON.stringify(known) !== JSON.stringify(copy)) throw new Error(`two different schemas are titled ${name}`);
  schemas[name] = copy;
  return { $ref: `#/components/schemas/${name}` };
}

/** A reader that can compile queries but never runs one: the document's app answers no request. */
function offlineReader(): Reader {
  const db = new Kysely<Database>({
    dialect: {
      createAdapter: () => new SqliteAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new SqliteIntrospector(db),
      createQueryCompiler: () => new SqliteQueryCompiler(),
    },
  });
  return {
    db,
    dialect: 'sqlite',
    run: () => Promise.reject(new Error('the OpenAPI document\'s app runs no query')),
    close: () => Promise.resolve(),
  };
}

/**
 * Builds the document without a store, a key or a listener (for `school-data
 * openapi`, the client type generator and tests): the same routes and options as
 * the served app, registered on an instance that never answers a request.
 */
export async function buildOpenApiDocument(): Promise<OpenApiDocument> {
  const app = Fastify({ logger: false });
  // This instance never validates a request; the served app installs the real validators.
  app.setValidatorCompiler(() => () => true);
  await app.register(swagger, swaggerOptions());
  await app.register(publicApi, { prefix: API_PREFIX.slice(0, -1), reads: offlineReader(), cache: new ResponseCache(0), send: () => undefined });
  await app.ready();
  try {
    return app.swagger() as unknown as OpenApiDocument;
  } finally {
    await app.close();
  }
}
