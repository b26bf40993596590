import { Type, type Static } from 'typebox';
import { CATEGORIES, CONTRACT_STATUSES, STUDENT_STATUSES, TRANSMISSIONS } from '../../domain/enums.js';
import { ID_PATTERN } from '../../domain/ids.js';
import { IdParam, Paging, type Paged } from '../common/params.js';
import { Currency, DateOnly, ListOf, Money, Nullable, Timestamp } from '../common/responses.js';

const Category = Type.Enum([...CATEGORIES], { type: 'string' });
const Status = Type.Enum([...STUDENT_STATUSES], { type: 'string' });

const studentFields = {
  id: Type.String(),
  full_name: Type.String(),
  phone: Type.String(),
  email: Type.String(),
  category: Category,
  status: Status,
  group_id: Type.String(),
  branch_id: Nullable(Type.String()),
  created_at: Timestamp,
};

export const Student = Type.Object(studentFields, { additionalProperties: false, title: 'Student' });
export type Student = Static<typeof Student>;

export const StudentList = ListOf(Student);

export const StudentListQuery = Type.Object(
  {
    status: Type.Optional(Status),
    category: Type.Optional(Category),
    group_id: Type.Optional(IdParam('study group')),
    ...Paging,
  },
  { additionalProperties: false },
);
export type StudentListQuery = Paged<Static<typeof StudentListQuery>>;

export const StudentParams = Type.Object({ id: Type.String({ pattern: ID_PATTERN }) }, { additionalProperties: false });

const CardContract = Type.Object(
  { id: Type.String(), number: Type.String(), status: Type.Enum([...CONTRACT_STATUSES], { type: 'string' }), price: Money, paid: Money, debt: Money, currency: Currency },
  { additionalProperties: false },
);

export const StudentCard = Type.Object(
  {
    ...studentFields,
    birth_date: Nullable(DateOnly),
    instructor_id: Nullable(Type.String()),
    transmission: Nullable(Type.Enum([...TRANSMISSIONS], { type: 'string' })),
    contracts: Type.Array(CardContract),
    lessons: Type.Object(
      {
        driving_completed: Type.Integer({ description: 'completed driving and autodrome lessons' }),
        driving_minutes_completed: Type.Integer({ description: 'their total duration in minutes' }),
        theory_completed: Type.Integer({ description: 'completed theory lessons' }),
        planned: Type.Integer({ description: 'planned lessons of any type' }),
      },
      { additionalProperties: false },
    ),
    balance: Type.Object({ price: Money, paid: Money, debt: Money, currency: Currency }, { additionalProperties: false }),
  },
  { additionalProperties: false, title: 'StudentCard' },
);
export type StudentCard = Static<typeof StudentCard>;
