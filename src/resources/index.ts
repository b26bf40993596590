/**
 * The public API v1: every resource's routes under one prefix. The access hook has
 * already fixed request.tenant before any handler here runs.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import { notedLookup, plainBody, type ResponseCache } from './cache.js';
import { JSON_CONTENT_TYPE } from './common/list.js';
import { chosenEncoding } from './encoding.js';
import type { Reader } from '../db/index.js';
import { contractRoutes } from './contracts/routes.js';
import { financeRoutes } from './finance/routes.js';
import { instructorRoutes } from './instructors/routes.js';
import { leadRoutes } from './leads/routes.js';
import { lessonRoutes } from './lessons/routes.js';
import { paymentRoutes } from './payments/routes.js';
import { studentRoutes } from './students/routes.js';
import { vehicleRoutes } from './vehicles/routes.js';

// The documentation keywords each route carries into the OpenAPI document.
declare module 'fastify' {
  interface FastifySchema {
    operationId?: string;
    summary?: string;
    description?: string;
    tags?: readonly string[];
  }
}

export interface ResourceOptions {
  reads: Reader;
}

export interface PublicApiOptions extends ResourceOptions {
  cache: ResponseCache;
}

export const publicApi: FastifyPluginAsync<PublicApiOptions> = async (app, { reads, cache }) => {
  // Every route's answer is stored, and a stored answer is sent (src/resources/cache.ts).
  app.addHook('onRoute', (route) => {
    route.handler = storing(cache, route.handler);
  });
  // Only { reads } is passed on: the options given to this plugin also carry its prefix,
  // which Fastify would apply a second time to every child.
  const opts: ResourceOptions = { reads };
  await app.register(studentRoutes, opts);
  await app.register(instructorRoutes, opts);
  await app.register(vehicleRoutes, opts);
  await app.register(lessonRoutes, opts);
  await app.register(contractRoutes, opts);
  await app.register(paymentRoutes, opts);
  await app.register(leadRoutes, opts);
  await app.register(financeRoutes, opts);
};

/**
 * A route's handler that sends the stored answer to the same request when there is one
 * (the access gate sends most of them before the app runs; what reaches this one is an
 * answer the gate left to the app to compress), and stores the answer it makes: the
 * body as the client gets it, serialized by the route's response schema when the handler
 * returned an object. Only successful answers are stored; errors are thrown past it.
 * A stored gzipped body goes as it is to a client that compression would send gzip (the
 * Content-Encoding set here tells @fastify/compress it is done), unzipped to any other.
 */
function storing(cache: ResponseCache, handler: RouteHandlerMethod): RouteHandlerMethod {
  if (!cache.enabled) return handler;
  return async function (this: unknown, request: FastifyRequest, reply: FastifyReply) {
    const tenant = request.tenant!;
    const noted = notedLookup(request.raw);
    const stored = noted === undefined ? cache.get(tenant, request.url) : (noted ?? undefined);
    if (stored !== undefined) {
      reply.type(stored.contentType);
      if (!stored.gzipped) return stored.body;
      if (chosenEncoding(request.method, request.headers) !== 'gzip') return plainBody(stored);
      // Added to a Vary already set, as @fastify/compress does.
      const vary = reply.getHeader('vary');
      reply.header('vary', vary === undefined ? 'accept-encoding' : `${String(vary)}, accept-encoding`).header('content-encoding', 'gzip');
      return stored.body;
    }
    const result: unknown = await (handler as (this: unknown, request: FastifyRequest, reply: FastifyReply) => unknown).call(this, request, reply);
    if (reply.statusCode !== 200 || result === undefined) return result;
    if (!reply.hasHeader('content-type')) reply.type(JSON_CONTENT_TYPE);
    let body: Buffer;
    if (Buffer.isBuffer(result)) body = result;
    else if (typeof result === 'string') body = Buffer.from(result);
    // The route's serializer of its 200 schema: the JSON Fastify would have sent.
    else body = Buffer.from(reply.serializeInput(result as Record<string, unknown>, '200', 'application/json') as string);
    cache.set(tenant, request.url, body, String(reply.getHeader('content-type')));
    return body;
  };
}
