/**
 * The public API v1: every resource's endpoints under one prefix. Access is decided
 * before any of them runs (src/access/hook.ts); a stored answer is sent before the
 * endpoint's call when there is one (common/route.ts).
 */
import type { FastifyPluginCallback } from 'fastify';
import { routeOf, serve, storedAnswers, type Endpoint, type ResourceOptions, type Served } from './common/route.js';
import { API_PREFIX } from '../edge/paths.js';
import { changeEndpoints } from './changes/routes.js';
import { contractEndpoints } from './contracts/routes.js';
import { financeEndpoints } from './finance/routes.js';
import { instructorEndpoints } from './instructors/routes.js';
import { leadEndpoints } from './leads/routes.js';
import { lessonEndpoints } from './lessons/routes.js';
import { paymentEndpoints } from './payments/routes.js';
import { studentEndpoints } from './students/routes.js';
import { vehicleEndpoints } from './vehicles/routes.js';

// The documentation keywords each route carries into the OpenAPI document.
declare module 'fastify' {
  interface FastifySchema {
    operationId?: string;
    summary?: string;
    description?: string;
    tags?: readonly string[];
  }
}

export type { ResourceOptions } from './common/route.js';

/** Every endpoint of the API, in the order the OpenAPI document lists them. */
export const ENDPOINTS: readonly Endpoint[] = [
  ...studentEndpoints,
  ...instructorEndpoints,
  ...vehicleEndpoints,
  ...lessonEndpoints,
  ...contractEndpoints,
  ...paymentEndpoints,
  ...leadEndpoints,
  ...financeEndpoints,
  ...changeEndpoints,
];

/** Every endpoint made ready to answer, by its route's full URL (the prefix included). */
export function servedEndpoints(options: Pick<ResourceOptions, 'reads' | 'cache'>): Map<string, Served> {
  return new Map(ENDPOINTS.map((spec) => [`${API_PREFIX.slice(0, -1)}${spec.url}`, serve(spec, options)]));
}

/**
 * The API's routes in Fastify, registered under the prefix: each answered by its endpoint as
 * served (`served`, the app's, which its front answers with too; made here when not given).
 */
export const publicApi: FastifyPluginCallback<ResourceOptions & { served?: ReadonlyMap<string, Served> }> = (app, options, done) => {
  app.addHook('onRequest', storedAnswers(options));
  for (const served of (options.served ?? servedEndpoints(options)).values()) {
    const { schema, handler } = routeOf(served, options.send);
    app.get(served.spec.url, { schema }, handler);
  }
  done();
};
