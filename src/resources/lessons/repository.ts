import type { Kysely } from 'kysely';
import type { Reader } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { inPeriod, periodBounds, type PeriodBounds, type UtcRange } from '../common/period.js';
import { pagedList } from '../common/list.js';
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

const lessonList = pagedList<'lessons', LessonFilter, Lesson>({ table: 'lessons', columns: COLUMNS, orderBy: 'starts_at', filtered });

export async function listLessons(reads: Reader, schoolId: string, q: LessonListQuery, period: UtcRange): Promise<Page<Lesson>> {
  const filter: LessonFilter = { schoolId, ...periodBounds(period), instructor_id: q.instructor_id, student_id: q.student_id };
  const { rows, total } = await lessonList(reads, filter, q.limit, q.offset);
  return { items: rows, meta: { total, limit: q.limit, offset: q.offset } };
}
