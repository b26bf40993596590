/**
 * How an endpoint of the API is declared and answered. A resource declares each endpoint
 * once (`endpoint`): its documentation, its query and response schemas, and the call
 * that makes its body. Every endpoint is then answered the same way: a stored answer when
 * there is one (`storedAnswers`), else the body made by the call (JSON made by the
 * database, or an object serialized by the 200 schema), stored and written by the one
 * writer (src/edge/answer.ts).
 */
import { hash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import fastJson from 'fast-json-stringify';
import type { FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import type { TSchema } from 'typebox';
import type { Reader } from '../../db/index.js';
import { ALL_SCOPES, type KeyScope } from '../../domain/scopes.js';
import type { Tenant } from '../../domain/tenant.js';
import { dataAnswer, plain, unchanged, utf8, type Answer, type SendAnswer } from '../../edge/answer.js';
import { beforeQuery } from '../../edge/turn-end.js';
import { Problem } from '../../problems/index.js';
import { packageVersion } from '../../version.js';
import type { ResponseCache } from '../cache.js';
import type { ListTable } from '../items.js';
import { cutPage, JSON_CONTENT_TYPE, readRun, type ListBody, type Run } from './list.js';
import { DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET } from './params.js';
import { compileQueryDecoder, paramsCheck, parseQuery, type QueryDecoder } from './query.js';
import { responses } from './responses.js';

/** What the routes of every resource are given. */
export interface ResourceOptions {
  reads: Reader;
  cache: ResponseCache;
  send: SendAnswer;
}

/** What an endpoint's call is given: the decoded query and path parameters, the school, the reads. */
export interface Asking<Q, P> {
  query: Q;
  params: P;
  tenant: Tenant;
  reads: Reader;
}

/** A body made by the database (JSON text or bytes), an object for the 200 schema, or null: not found. */
export type Made = ListBody | object | null;

export interface Endpoint<Q = unknown, P = unknown> {
  url: string;
  operationId: string;
  summary: string;
  description: string;
  tags: readonly string[];
  /** The key scopes a request needs, all of them (docs/api/keys.md). */
  scopes: readonly KeyScope[];
  querystring: TSchema;
  params?: TSchema;
  /** The 200 body's schema: it serializes objects and documents the answer. */
  response: TSchema;
  /** Error statuses of this endpoint alone, besides those every endpoint answers. */
  extraStatuses?: readonly 410[];
  answer(asking: Asking<Q, P>): Made | Promise<Made>;
  /** The 404's detail when `answer` gives null. */
  missing?: string;
  /**
   * For a list: its table. A page of it asked for with nothing but `limit` and `offset`
   * is then the list's page narrowed by the school alone, and may be cut from its run
   * (cache.ts) instead of `answer`.
   */
  list?: ListTable;
}

/** Declares an endpoint (typed by its query and path parameters). */
export function endpoint<Q, P = Record<string, never>>(spec: Endpoint<Q, P>): Endpoint {
  return spec;
}

/**
 * What identifies an answer's content: the same for the same request target of the same
 * school at the same data version (and its stamp), time zone and currency, asked with a key of the same
 * scopes, served by the same version of the service; different as soon as any of them
 * differs (an import raises the data version; the changes feed carries only the key's
 * scopes). The first part of every data answer's entity tag.
 */
export function validatorOf(tenant: Tenant, target: string): string {
  const scopes = tenant.scopes === ALL_SCOPES ? '' : `\n${tenant.scopes}`;
  return hash('sha256', `${packageVersion()}\n${tenant.id}\n${tenant.dataVersion}.${tenant.dataStamp}\n${tenant.timezone}\n${tenant.currency}\n${target}${scopes}`, 'base64url').slice(0, 22);
}

const NO_BODY = plain(Buffer.alloc(0));

/** A list longer than this is never kept whole: its run's read would take longer than the pages it saves. */
const MAX_RUN_ITEMS = 20_000;
/**
 * Fewer bytes than any list's item holds with its comma and its end (the shortest, a vehicle
 * or a payment, is over 150): a list with more items than the run's bytes over this cannot
 * fit, and is refused by its length before any item is read.
 */
const MIN_ITEM_BYTES = 64;

/** Whether a list's decoded query asks for a page and nothing else. */
function pageOnly(query: unknown): query is { limit: number; offset: number } {
  for (const [name, value] of Object.entries(query as Record<string, unknown>)) if (name !== 'limit' && name !== 'offset' && value !== undefined) return false;
  return true;
}

/** A page parameter written as the decoder reads it, in its range, in its shortest form. */
const PAGE_NUMBER = /^(0|[1-9][0-9]{0,6})$/;

/**
 * The page a request target asks for, when its query holds `limit` and `offset` at most,
 * each once, written plainly (digits, no leading zero) and in range; undefined for any other
 * query, which the decoder reads (it may still be a page only: `answer` cuts that one).
 */
export function plainPage(target: string): { limit: number; offset: number } | undefined {
  const at = target.indexOf('?');
  let limit = DEFAULT_LIMIT;
  let offset = 0;
  if (at === -1) return { limit, offset };
  let seen = 0;
  for (const part of target.slice(at + 1).split('&')) {
    const eq = part.indexOf('=');
    const name = part.slice(0, eq);
    const value = part.slice(eq + 1);
    if (eq === -1 || !PAGE_NUMBER.test(value)) return undefined;
    if (name === 'limit' && (seen & 1) === 0) {
      limit = Number(value);
      seen |= 1;
    } else if (name === 'offset' && (seen & 2) === 0) {
      offset = Number(value);
      seen |= 2;
    } else {
      return undefined;
    }
  }
  return limit >= 1 && limit <= MAX_LIMIT && offset <= MAX_OFFSET ? { limit, offset } : undefined;
}

/** What an endpoint's answer reads of its request, whichever step of the path runs it. */
export interface Asked {
  tenant: Tenant;
  /** The request target as received: it keys the stored answer and the entity tag. */
  target: string;
  method: string | undefined;
  headers: IncomingHttpHeaders;
  /** The decoded query (`Served.decode`). */
  query: unknown;
  params: Record<string, string | undefined>;
}

/** An endpoint made ready to answer: its query decoder, and its answer to a request with access. */
export interface Served {
  spec: Endpoint;
  /** The query string's parameters decoded, or a Problem thrown (400) naming every bad one. */
  decode: QueryDecoder;
  /**
   * The answer: 304 when If-None-Match names the current tag (no query), the 200 (stored for
   * the next request), or a Problem thrown (404 for an id that names nothing, the endpoint's own
   * 400, 403, 410). A store's failure is thrown as it is.
   */
  answer(asked: Asked): Promise<Answer>;
  /** The same, its query decoded from the target first (a bad query is thrown, 400). */
  answerTarget(asked: Omit<Asked, 'query'>): Promise<Answer>;
  /**
   * For a list whose run is kept (cache.ts): the page a target asks for in the plain form
   * `plainPage` reads, cut from the run at once, as `answer` would make it; else undefined.
   * Counted as a cut when it is written (the caller's lookup counted its miss). A client that
   * holds the page's current tag is answered 304 as by `answer`: nothing cut, no cut counted,
   * the run not marked read.
   */
  cut(tenant: Tenant, target: string, method: string | undefined, headers: IncomingHttpHeaders): Answer | undefined;
  /** Whether `cut` would give an answer now; nothing counted. */
  cuts(tenant: Tenant, target: string): boolean;
}

/** Makes an endpoint ready to answer (once, when the app is built). */
export function serve(spec: Endpoint, { reads, cache }: Pick<ResourceOptions, 'reads' | 'cache'>): Served {
  const missing = new Problem('not_found', spec.missing ?? 'No such object.');
  const namesSomething = spec.params === undefined ? () => true : paramsCheck(spec.params);
  // The 200 schema's serializer, as Fastify compiles it for a route (fast-json-stringify, no options).
  const serialize = fastJson(spec.response as Parameters<typeof fastJson>[0]) as (made: object) => string;
  const decode = compileQueryDecoder(spec.querystring);
  const list = spec.list;

  /**
   * The run of the tenant's list when one is kept, or read now when its missed pages call for
   * it. Only pages that overlap others count (an offset that is not a multiple of the limit):
   * pages one after the other, as a loader reads them, are each stored, and gzipped when room
   * is needed, which holds them in a fifth of a run's memory.
   */
  async function runOf(tenant: Tenant, table: ListTable, page: { limit: number; offset: number }): Promise<Run | undefined> {
    const kept = cache.run(tenant, table);
    if (kept !== undefined || page.offset % page.limit === 0 || !cache.wantsRun(tenant, table)) return kept;
    // A read that fails (the store slow or down) leaves the page to its own query, and the
    // list to its pages' queries for this data: its answer reports the store as it always
    // has. Counted (school_data_stored_list_read_failures_total).
    const run = await readRun(reads, table, tenant.id, Math.min(MAX_RUN_ITEMS, Math.floor(cache.maxRunBytes / MIN_ITEM_BYTES)), cache.maxRunBytes).catch(() => {
      cache.runReadFailed();
      return null;
    });
    return run !== null && cache.setRun(tenant, table, run) ? cache.run(tenant, table) : undefined;
  }

  /** The page cut from `run` (the list's), stored where there is room for it (`setCut`). */
  function cutAnswer(tenant: Tenant, table: ListTable, target: string, run: Run, page: { limit: number; offset: number }, validator = validatorOf(tenant, target)): Answer {
    const body = cutPage(run, page.limit, page.offset);
    cache.setCut(tenant, table, target, body, JSON_CONTENT_TYPE, validator);
    return dataAnswer(plain(body), JSON_CONTENT_TYPE, validator, true);
  }

  const served: Served = {
    spec,
    decode,
    async answerTarget(asked) {
      const at = asked.target.indexOf('?');
      return served.answer({ ...asked, query: decode(at === -1 ? {} : parseQuery(asked.target.slice(at + 1))) });
    },
    cut(tenant, target, method, headers) {
      const page = list === undefined || !cache.holdsRun(tenant, list) ? undefined : plainPage(target);
      if (page === undefined) return undefined;
      const validator = validatorOf(tenant, target);
      if (unchanged(method, headers, validator)) return dataAnswer(NO_BODY, JSON_CONTENT_TYPE, validator);
      return cutAnswer(tenant, list!, target, cache.run(tenant, list!)!, page, validator);
    },
    cuts(tenant, target) {
      return list !== undefined && cache.holdsRun(tenant, list) && plainPage(target) !== undefined;
    },
    async answer({ tenant, target, method, headers, query, params }) {
      // Checked here, after the query: an id that cannot be one is a missing object.
      if (!namesSomething(params)) throw missing;
      const validator = validatorOf(tenant, target);
      // The client holds the current answer: no query. (`*` is left to the writer, once the
      // call has shown the object exists.)
      if (unchanged(method, headers, validator)) return dataAnswer(NO_BODY, JSON_CONTENT_TYPE, validator);
      // A page of a list kept whole is cut from its run.
      const run = list !== undefined && cache.enabled && pageOnly(query) ? await runOf(tenant, list, query) : undefined;
      if (run !== undefined) return cutAnswer(tenant, list!, target, run, query as { limit: number; offset: number }, validator);
      const made = await spec.answer({ query, params, tenant, reads });
      if (made === null) throw missing;
      const bytes = Buffer.isBuffer(made) ? made : utf8(typeof made === 'string' ? made : serialize(made));
      cache.set(tenant, target, bytes, JSON_CONTENT_TYPE, validator);
      return dataAnswer(plain(bytes), JSON_CONTENT_TYPE, validator);
    },
  };
  return served;
}

/**
 * The onRequest hook of the API's routes, after access: sends the stored answer to this
 * request when there is one; otherwise the query is about to start (`beforeQuery`,
 * src/edge/turn-end.ts).
 */
export function storedAnswers({ cache, send }: ResourceOptions) {
  return function sendStored(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    const stored = request.tenant === null ? undefined : cache.get(request.tenant, request.url);
    if (stored !== undefined) {
      send(reply, dataAnswer(stored, stored.contentType, stored.validator));
      return;
    }
    beforeQuery();
    done();
  };
}

/**
 * The route options and handler Fastify takes for an endpoint, for the requests that reach
 * it through Fastify (src/access/front.ts says which): Fastify has decoded the query with the
 * endpoint's decoder (common/query.ts), and the answer is the endpoint's own.
 */
export function routeOf(served: Served, send: SendAnswer) {
  const { spec } = served;
  const schema = {
    operationId: spec.operationId,
    summary: spec.summary,
    description: spec.description,
    tags: spec.tags,
    querystring: spec.querystring,
    ...(spec.params === undefined ? {} : { params: spec.params }),
    response: responses(spec.response, spec.extraStatuses),
  };
  const handler: RouteHandlerMethod = async function answerRequest(request, reply) {
    const { tenant, url, method, headers, query, params } = request;
    send(reply, await served.answer({ tenant: tenant!, target: url, method, headers, query, params: params as Asked['params'] }));
  };
  return { schema, handler };
}
