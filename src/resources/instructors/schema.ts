import { Type, type Static } from 'typebox';
import { CATEGORIES } from '../../domain/enums.js';
import { Flag, Paging, type Paged } from '../common/params.js';
import { DateOnly, ListOf, Nullable, Timestamp } from '../common/responses.js';

const Category = Type.Enum([...CATEGORIES], { type: 'string' });

export const Instructor = Type.Object(
  {
    id: Type.String(),
    full_name: Type.String(),
    phone: Type.String(),
    email: Nullable(Type.String()),
    categories: Type.Array(Category, { description: 'licence categories the instructor teaches' }),
    is_active: Type.Boolean(),
    branch_id: Nullable(Type.String()),
    vehicle_id: Nullable(Type.String()),
    hired_on: Nullable(DateOnly),
    created_at: Timestamp,
  },
  { additionalProperties: false, title: 'Instructor' },
);
export type Instructor = Static<typeof Instructor>;

export const InstructorList = ListOf(Instructor);

export const InstructorListQuery = Type.Object({ is_active: Type.Optional(Flag), ...Paging }, { additionalProperties: false });
export type InstructorListQuery = Paged<Static<typeof InstructorListQuery>>;
