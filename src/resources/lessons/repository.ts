import type { Reader } from '../../db/index.js';
import { pagedList, type ListBody, type ListFilter } from '../common/list.js';
import { periodBounds, type UtcRange } from '../common/period.js';
import type { LessonListQuery } from './schema.js';

interface LessonFilter extends ListFilter {
  instructor_id?: string | undefined;
  student_id?: string | undefined;
}

const lessonList = pagedList<'lessons', LessonFilter>({
  table: 'lessons',
  filters: ['instructor_id', 'student_id'],
});

/** Lessons whose starts_at lies in the period, in the list's order (starts_at, id). */
export async function listLessons(reads: Reader, schoolId: string, q: LessonListQuery, period: UtcRange): Promise<ListBody> {
  const filter: LessonFilter = { schoolId, ...periodBounds(period), instructor_id: q.instructor_id, student_id: q.student_id };
  return lessonList(reads, filter, q.limit, q.offset);
}
