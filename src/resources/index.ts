/**
 * The public API v1: every resource's routes under one prefix. The access hook has
 * already fixed request.tenant before any handler here runs.
 */
import type { FastifyPluginAsync } from 'fastify';
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

export const publicApi: FastifyPluginAsync<ResourceOptions> = async (app, { reads }) => {
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
