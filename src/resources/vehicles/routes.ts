import type { FastifyPluginCallback } from 'fastify';
import { JSON_CONTENT_TYPE } from '../common/list.js';
import { responses } from '../common/responses.js';
import type { ResourceOptions } from '../index.js';
import { listVehicles } from './repository.js';
import { VehicleList, VehicleListQuery } from './schema.js';

export const vehicleRoutes: FastifyPluginCallback<ResourceOptions> = (app, { reads }, done) => {
  app.get<{ Querystring: VehicleListQuery }>(
    '/vehicles',
    {
      schema: {
        operationId: 'listVehicles',
        summary: 'List training vehicles',
        description: 'Training vehicles of the key\'s school with their insurance and inspection dates, ordered by created_at then id.',
        tags: ['vehicles'],
        querystring: VehicleListQuery,
        response: responses(VehicleList),
      },
    },
    async (request, reply) => {
      reply.type(JSON_CONTENT_TYPE);
      return listVehicles(reads, request.tenant!.id, request.query);
    },
  );
  done();
};
