/**
 * The public API v1: every resource's endpoints under one prefix. Access is decided
 * before any of them runs (src/access/hook.ts); a stored answer is sent before the
 * endpoint's call when there is one (common/route.ts).
 */
import type { FastifyPluginCallback } from 'fastify';
import { routeOf, storedAnswers, type Endpoint, type ResourceOptions } from './common/route.js';
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
];

export const publicApi: FastifyPluginCallback<ResourceOptions> = (app, options, done) => {
  app.addHook('onRequest', storedAnswers(options));
  for (const spec of ENDPOINTS) {
    const { schema, handler } = routeOf(spec, options);
    app.get(spec.url, { schema }, handler);
  }
  done();
};
