import { Type, type TSchema } from 'typebox';
import { commonErrorStatuses, PROBLEM_CONTENT_TYPE, ProblemSchema } from '../../problems/index.js';

/**
 * Every error status a route can answer: the common ones, and those of the server's own
 * limits (a request not sent whole in time, a URL or headers over the limit).
 */
const errorStatuses = [...commonErrorStatuses, 408, 414, 431] as const;
/** Statuses only some routes answer, each route naming its own. */
type OwnStatus = 410;
type ErrorStatus = (typeof errorStatuses)[number] | OwnStatus;

/** What each status means to a caller; the OpenAPI document shows these texts. */
const statusDescriptions: Record<200 | 304 | ErrorStatus, string> = {
  200: 'Success.',
  304: 'Not modified: If-None-Match named the current ETag of this answer, which the client already holds. No body. Counted and rate-limited like any request.',
  400: 'A query parameter is invalid, unknown, empty or given twice (code invalid_parameter); invalid_params names each one. Fix the request; retrying it unchanged gives the same answer.',
  401: 'The key is missing, malformed, unknown or revoked (code unauthorized). Do not retry: check the key.',
  402: 'The school\'s plan has no API access (code plan_required); the Profi and VIP plans do.',
  403: 'The key may not be used for this: the endpoint (or a resource named in resources) is outside the key\'s scopes (code insufficient_scope, with WWW-Authenticate: Bearer error="insufficient_scope"), or the request comes from an address outside the key\'s allowlist (code address_not_allowed). Do not retry: use a key that may, or ask the school\'s director to change the key.',
  404: 'No such object, or it belongs to another school (code not_found).',
  405: 'Only GET and HEAD exist (code method_not_allowed).',
  408: 'The request was not sent whole in time (code request_timeout); the connection is closed.',
  410: 'The changes feed no longer holds what came after this cursor (code cursor_expired): drop the copy and read the feed again without after.',
  414: 'The URL is longer than the service allows (code uri_too_long).',
  431: 'The request\'s headers are larger than the service allows (code header_too_large); the connection is closed.',
  429: 'The school\'s per-minute limit is used up (code rate_limited). Wait for Retry-After seconds, then retry.',
  500: 'An internal error (code internal_error); request_id identifies it in the service\'s logs.',
  503: 'The rate-limit service (code rate_limit_unavailable) or the data store (code data_unavailable) is unavailable. Retry after Retry-After seconds.',
};

/**
 * A route's responses: its success body as application/json and a problem body as
 * application/problem+json for every error status, for the OpenAPI document, which is
 * generated from these objects. Every answer is written by the app's writer
 * (src/edge/answer.ts), not serialized by Fastify: a 200's body by its endpoint's
 * serializer made from the same schema (`serve` in ./route.ts) or as the read model's
 * items (src/resources/items.ts), a problem's by `Problem.json`; the tests check every
 * answer against the document. The headers of each status are in `responseHeaders` below.
 */
export function responses<S extends TSchema>(ok: S, own: readonly OwnStatus[] = []) {
  const out: Record<number, ResponseSpec<TSchema> | { description: string; type: 'null' }> = {
    200: { description: statusDescriptions[200], content: { 'application/json': { schema: ok } } },
    304: { description: statusDescriptions[304], type: 'null' },
  };
  const problemType = PROBLEM_CONTENT_TYPE.split(';')[0]!;
  for (const status of [...errorStatuses, ...own]) {
    out[status] = { description: statusDescriptions[status], content: { [problemType]: { schema: ProblemSchema } } };
  }
  return out as { 200: ResponseSpec<S> } & Record<number, ResponseSpec<TSchema> | { description: string; type: 'null' }>;
}

export interface ResponseSpec<S extends TSchema> {
  description: string;
  content: Record<string, { schema: S }>;
}

export interface ResponseHeader {
  description: string;
  schema: TSchema;
  /** Sent on every response of the status (else only when the note in the description says). */
  required: boolean;
}

const requestId: ResponseHeader = {
  description: 'The request\'s id; a problem body carries the same id, and so does the service\'s log line. Quote it when reporting a problem.',
  schema: Type.String(),
  required: true,
};
const rateLimitHeaders = (required: boolean): Record<string, ResponseHeader> => {
  const when = required ? '' : ' Sent whenever the key was found, its school\'s plan has a limit, and the rate-limit service answered.';
  return {
    'RateLimit-Policy': {
      description: `The school's quota (IETF draft RateLimit headers): q requests per window of w seconds, e.g. "default";q=60;w=60.${when}`,
      schema: Type.String({ pattern: '^"default";q=\\d+;w=\\d+$' }),
      required,
    },
    RateLimit: {
      description: `What is left of it: r requests remain in the current window, which resets in t seconds, e.g. "default";r=59;t=60.${when}`,
      schema: Type.String({ pattern: '^"default";r=\\d+;t=\\d+$' }),
      required,
    },
  };
};
const retryAfter = (description: string): ResponseHeader => ({ description, schema: Type.String({ pattern: '^\\d+$' }), required: true });

/**
 * The headers of each status. Fastify does not use these, and the OpenAPI generator
 * cannot mark a header required, so the OpenAPI module adds them to every response
 * of the document from this table.
 */
const etag: ResponseHeader = {
  description: 'A strong entity tag of this representation (content coding included). Send it back in If-None-Match to get 304 while the answer is unchanged; it changes when the school\'s data may have.',
  schema: Type.String({ pattern: '^"[A-Za-z0-9_-]+-[a-z]+"$' }),
  required: true,
};
const cacheControl = (value: string): ResponseHeader => ({ description: `Always ${value}.`, schema: Type.String({ const: value }), required: true });

/** Sent on every answer, whatever its status. */
const everyAnswer: Record<string, ResponseHeader> = {
  'X-Request-Id': requestId,
  'Strict-Transport-Security': { description: 'Always max-age=31536000.', schema: Type.String({ const: 'max-age=31536000' }), required: true },
  'X-Content-Type-Options': { description: 'Always nosniff.', schema: Type.String({ const: 'nosniff' }), required: true },
};
/** An answer with data: the headers it and its 304 carry. */
const dataAnswer: Record<string, ResponseHeader> = {
  ...everyAnswer,
  ...rateLimitHeaders(true),
  ETag: etag,
  'Cache-Control': cacheControl('private, no-cache'),
  Vary: { description: 'Always accept-encoding, x-no-compression: the headers that choose the content coding.', schema: Type.String({ const: 'accept-encoding, x-no-compression' }), required: true },
};
/** A problem: never stored by any cache. */
const problem: Record<string, ResponseHeader> = { ...everyAnswer, 'Cache-Control': cacheControl('no-store') };

export const responseHeaders: Record<200 | 304 | ErrorStatus, Record<string, ResponseHeader>> = {
  200: dataAnswer,
  304: dataAnswer,
  400: { ...problem, ...rateLimitHeaders(false) },
  401: {
    ...problem,
    'WWW-Authenticate': { description: 'Always Bearer realm="school-data".', schema: Type.String({ pattern: '^Bearer realm=' }), required: true },
  },
  402: problem,
  403: {
    ...problem,
    ...rateLimitHeaders(false),
    'WWW-Authenticate': { description: 'Bearer error="insufficient_scope" on an insufficient_scope answer; absent on address_not_allowed.', schema: Type.String({ pattern: '^Bearer ' }), required: false },
  },
  404: { ...problem, ...rateLimitHeaders(false) },
  405: { ...problem, Allow: { description: 'Always GET, HEAD.', schema: Type.String(), required: true } },
  408: problem,
  410: { ...problem, ...rateLimitHeaders(true) },
  414: problem,
  429: { ...problem, ...rateLimitHeaders(true), 'Retry-After': retryAfter('Seconds to wait before retrying: always 60.') },
  431: problem,
  500: { ...problem, ...rateLimitHeaders(false) },
  503: { ...problem, ...rateLimitHeaders(false), 'Retry-After': retryAfter('Seconds to wait before retrying (5).') },
};

export const Nullable = <S extends TSchema>(schema: S) => Type.Union([schema, Type.Null()]);

export const Timestamp = Type.String({ format: 'date-time', description: 'UTC, YYYY-MM-DDTHH:MM:SSZ' });
export const DateOnly = Type.String({ format: 'date', description: 'YYYY-MM-DD' });
export const Money = Type.String({ pattern: '^-?\\d+\\.\\d{2}$', description: 'decimal amount with two fraction digits', examples: ['15000.00'] });
export const Currency = Type.String({ pattern: '^[A-Z]{3}$', description: 'ISO 4217 code', examples: ['RUB'] });

export const ListMeta = Type.Object(
  {
    total: Type.Integer({ minimum: 0, description: 'records matching the filters' }),
    limit: Type.Integer({ description: 'page size applied' }),
    offset: Type.Integer({ description: 'offset applied' }),
  },
  { additionalProperties: false, title: 'ListMeta' },
);

/** A list envelope; titled after its item (StudentList, ...), so the OpenAPI document names it. */
export const ListOf = <S extends TSchema>(item: S) => {
  const itemTitle = (item as { title?: unknown }).title;
  const title = typeof itemTitle === 'string' ? { title: `${itemTitle}List` } : {};
  return Type.Object({ items: Type.Array(item), meta: ListMeta }, { additionalProperties: false, ...title });
};

export interface Page<T> {
  items: T[];
  meta: { total: number; limit: number; offset: number };
}
