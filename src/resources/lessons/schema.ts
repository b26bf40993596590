import { Type, type Static } from 'typebox';
import { LESSON_STATUSES, LESSON_TYPES } from '../../domain/enums.js';
import { IdParam, Paging, Period, type Paged } from '../common/params.js';
import { ListOf, Nullable, Timestamp } from '../common/responses.js';

export const Lesson = Type.Object(
  {
    id: Type.String(),
    type: Type.Enum([...LESSON_TYPES], { type: 'string' }),
    status: Type.Enum([...LESSON_STATUSES], { type: 'string' }),
    starts_at: Timestamp,
    ends_at: Timestamp,
    duration_minutes: Type.Integer({ description: 'whole minutes from starts_at to ends_at' }),
    instructor_id: Type.String(),
    student_id: Nullable(Type.String()),
    group_id: Nullable(Type.String()),
    vehicle_id: Nullable(Type.String()),
    branch_id: Nullable(Type.String()),
    created_at: Timestamp,
  },
  { additionalProperties: false, title: 'Lesson' },
);
export type Lesson = Static<typeof Lesson>;

export const LessonList = ListOf(Lesson);

export const LessonListQuery = Type.Object(
  {
    period_from: Type.Optional(Period('start')),
    period_to: Type.Optional(Period('end')),
    instructor_id: Type.Optional(IdParam('instructor')),
    student_id: Type.Optional(IdParam('student')),
    ...Paging,
  },
  { additionalProperties: false },
);
export type LessonListQuery = Paged<Static<typeof LessonListQuery>>;
