import type { Kysely } from 'kysely';
import { prepared } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { inPeriod, periodBounds, type PeriodBounds, type UtcRange } from '../common/period.js';
import { DEEP_OFFSET } from '../common/params.js';
import type { Page } from '../common/responses.js';
import type { Lesson, LessonListQuery } from './schema.js';

const COLUMNS = [
  'id',
  'type',
  'status',
  'starts_at',
  'ends_at',
  'duration_minutes',
  'instructor_id',
  'student_id',
  'group_id',
  'vehicle_id',
  'branch_id',
  'created_at',
] as const;

interface LessonFilter extends PeriodBounds {
  schoolId: string;
  instructor_id?: string | undefined;
  student_id?: string | undefined;
}

function filtered(db: Kysely<Database>, q: LessonFilter) {
  let query = db
    .selectFrom('lessons')
    .where('school_id', '=', q.schoolId)
    .where((eb) => inPeriod(eb, 'starts_at', q));
  if (q.instructor_id !== undefined) query = query.where('instructor_id', '=', q.instructor_id);
  if (q.student_id !== undefined) query = query.where('student_id', '=', q.student_id);
  return query;
}

const lessonPage = prepared((db, q: LessonFilter & { limit: number; offset: number }) =>
  filtered(db, q).select(COLUMNS).orderBy('starts_at').orderBy('id').limit(q.limit).offset(q.offset),
);
const lessonDeepPage = prepared((db, q: LessonFilter & { limit: number; offset: number }) =>
  db
    .selectFrom('lessons')
    .where('school_id', '=', q.schoolId)
    .where('id', 'in', filtered(db, q).select('id').orderBy('starts_at').orderBy('id').limit(q.limit).offset(q.offset))
    .select(COLUMNS)
    .orderBy('starts_at')
    .orderBy('id'),
);
const lessonCount = prepared((db, q: LessonFilter) => filtered(db, q).select((eb) => eb.fn.countAll<number>().as('total')));

export async function listLessons(db: Kysely<Database>, schoolId: string, q: LessonListQuery, period: UtcRange): Promise<Page<Lesson>> {
  const filter: LessonFilter = { schoolId, ...periodBounds(period), instructor_id: q.instructor_id, student_id: q.student_id };
  const [rows, [count]] = await Promise.all([(q.offset >= DEEP_OFFSET ? lessonDeepPage : lessonPage)(db, { ...filter, limit: q.limit, offset: q.offset }), lessonCount(db, filter)]);
  return { items: rows as Lesson[], meta: { total: count?.total ?? 0, limit: q.limit, offset: q.offset } };
}
