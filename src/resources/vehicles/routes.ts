import { endpoint } from '../common/route.js';
import { listVehicles } from './repository.js';
import { VehicleList, VehicleListQuery } from './schema.js';

export const vehicleEndpoints = [
  endpoint<VehicleListQuery>({
    url: '/vehicles',
    scopes: ['vehicles'],
    operationId: 'listVehicles',
    summary: 'List training vehicles',
    description: 'Training vehicles of the key\'s school with their insurance and inspection dates, ordered by created_at then id.',
    tags: ['vehicles'],
    list: 'vehicles',
    querystring: VehicleListQuery,
    response: VehicleList,
    answer: ({ reads, tenant, query }) => listVehicles(reads, tenant.id, query),
  }),
];
