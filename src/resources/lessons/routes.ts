import { endpoint } from '../common/route.js';
import { periodOf } from '../common/period.js';
import { listLessons } from './repository.js';
import { LessonList, LessonListQuery } from './schema.js';

export const lessonEndpoints = [
  endpoint<LessonListQuery>({
    url: '/lessons',
    scopes: ['lessons'],
    operationId: 'listLessons',
    summary: 'List lessons for a period',
    description:
      'Lessons of the key\'s school whose starts_at lies in the period (both bounds inclusive, either may be left out), optionally of one instructor or one student, ordered by starts_at then id.',
    tags: ['lessons'],
    list: 'lessons',
    querystring: LessonListQuery,
    response: LessonList,
    answer: ({ reads, tenant, query }) => listLessons(reads, tenant.id, query, periodOf(query, tenant)),
  }),
];
