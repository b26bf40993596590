import type { FastifyPluginCallback } from 'fastify';
import { JSON_CONTENT_TYPE } from '../common/list.js';
import { responses } from '../common/responses.js';
import type { ResourceOptions } from '../index.js';
import { listInstructors } from './repository.js';
import { InstructorList, InstructorListQuery } from './schema.js';

export const instructorRoutes: FastifyPluginCallback<ResourceOptions> = (app, { reads }, done) => {
  app.get<{ Querystring: InstructorListQuery }>(
    '/instructors',
    {
      schema: {
        operationId: 'listInstructors',
        summary: 'List instructors',
        description: 'Instructors of the key\'s school, ordered by created_at then id; is_active narrows to active or inactive ones.',
        tags: ['instructors'],
        querystring: InstructorListQuery,
        response: responses(InstructorList),
      },
    },
    async (request, reply) => {
      reply.type(JSON_CONTENT_TYPE);
      return listInstructors(reads, request.tenant!.id, request.query);
    },
  );
  done();
};
