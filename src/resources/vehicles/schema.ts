import { Type, type Static } from 'typebox';
import { CATEGORIES, TRANSMISSIONS, VEHICLE_STATUSES } from '../../domain/enums.js';
import { Paging, type Paged } from '../common/params.js';
import { DateOnly, ListOf, Nullable, Timestamp } from '../common/responses.js';

export const Vehicle = Type.Object(
  {
    id: Type.String(),
    plate_number: Type.String(),
    brand: Type.String(),
    model: Type.String(),
    year: Type.Integer({ description: 'year of manufacture' }),
    category: Type.Enum([...CATEGORIES], { type: 'string' }),
    transmission: Type.Enum([...TRANSMISSIONS], { type: 'string' }),
    status: Type.Enum([...VEHICLE_STATUSES], { type: 'string' }),
    instructor_id: Nullable(Type.String()),
    branch_id: Nullable(Type.String()),
    insurance_policy_number: Nullable(Type.String({ description: 'the compulsory motor insurance policy' })),
    insurance_valid_from: Nullable(DateOnly),
    insurance_valid_until: Nullable(DateOnly),
    inspection_valid_until: Nullable(DateOnly),
    created_at: Timestamp,
  },
  { additionalProperties: false, title: 'Vehicle' },
);
export type Vehicle = Static<typeof Vehicle>;

export const VehicleList = ListOf(Vehicle);

export const VehicleListQuery = Type.Object({ ...Paging }, { additionalProperties: false });
export type VehicleListQuery = Paged<Static<typeof VehicleListQuery>>;
