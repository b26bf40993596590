import type { FastifyPluginCallback } from 'fastify';
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
    (request) => listVehicles(reads, request.tenant!.id, request.query),
  );
  done();
};
