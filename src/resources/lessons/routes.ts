import type { FastifyPluginCallback } from 'fastify';
import { resolvePeriod } from '../common/period.js';
import { JSON_CONTENT_TYPE } from '../common/list.js';
import { responses } from '../common/responses.js';
import type { ResourceOptions } from '../index.js';
import { listLessons } from './repository.js';
import { LessonList, LessonListQuery } from './schema.js';

export const lessonRoutes: FastifyPluginCallback<ResourceOptions> = (app, { reads }, done) => {
  app.get<{ Querystring: LessonListQuery }>(
    '/lessons',
    {
      schema: {
        operationId: 'listLessons',
        summary: 'List lessons for a period',
        description:
          'Lessons of the key\'s school whose starts_at lies in the period (both bounds inclusive, either may be left out), optionally of one instructor or one student, ordered by starts_at then id.',
        tags: ['lessons'],
        querystring: LessonListQuery,
        response: responses(LessonList),
      },
    },
    async (request, reply) => {
      const tenant = request.tenant!;
      const period = resolvePeriod(request.query.period_from, request.query.period_to, tenant.timezone);
      reply.type(JSON_CONTENT_TYPE);
      return listLessons(reads, tenant.id, request.query, period);
    },
  );
  done();
};
