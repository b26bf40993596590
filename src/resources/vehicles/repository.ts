import type { Reader } from '../../db/index.js';
import { pagedList, type ListBody } from '../common/list.js';
import type { VehicleListQuery } from './schema.js';

const vehicleList = pagedList({ table: 'vehicles' });

/** Vehicles in the list's order (created_at, id). */
export async function listVehicles(reads: Reader, schoolId: string, q: VehicleListQuery): Promise<ListBody> {
  return vehicleList(reads, { schoolId }, q.limit, q.offset);
}
