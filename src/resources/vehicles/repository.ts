import type { Kysely } from 'kysely';
import { prepared, type Reader } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import type { Page } from '../common/responses.js';
import type { Vehicle, VehicleListQuery } from './schema.js';

const COLUMNS = [
  'id',
  'plate_number',
  'brand',
  'model',
  'year',
  'category',
  'transmission',
  'status',
  'instructor_id',
  'branch_id',
  'insurance_policy_number',
  'insurance_valid_from',
  'insurance_valid_until',
  'inspection_valid_until',
  'created_at',
] as const;

const filtered = (db: Kysely<Database>, q: { schoolId: string }) => db.selectFrom('vehicles').where('school_id', '=', q.schoolId);

const vehiclePage = prepared((db, q: { schoolId: string; limit: number; offset: number }) =>
  filtered(db, q).select(COLUMNS).orderBy('created_at').orderBy('id').limit(q.limit).offset(q.offset),
);
const vehicleCount = prepared((db, q: { schoolId: string }) => filtered(db, q).select((eb) => eb.fn.countAll<number>().as('total')));

export async function listVehicles(reads: Reader, schoolId: string, q: VehicleListQuery): Promise<Page<Vehicle>> {
  const [rows, [count]] = await Promise.all([vehiclePage(reads, { schoolId, limit: q.limit, offset: q.offset }), vehicleCount(reads, { schoolId })]);
  return { items: rows as Vehicle[], meta: { total: count?.total ?? 0, limit: q.limit, offset: q.offset } };
}
