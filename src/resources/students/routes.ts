import type { FastifyPluginCallback } from 'fastify';
import { Problem } from '../../problems/index.js';
import { JSON_CONTENT_TYPE } from '../common/list.js';
import { NoQuery } from '../common/params.js';
import { responses } from '../common/responses.js';
import type { ResourceOptions } from '../index.js';
import { getStudentCard, listStudents } from './repository.js';
import { StudentCard, StudentList, StudentListQuery, StudentParams } from './schema.js';

export const studentRoutes: FastifyPluginCallback<ResourceOptions> = (app, { reads }, done) => {
  app.get<{ Querystring: StudentListQuery }>(
    '/students',
    {
      schema: {
        operationId: 'listStudents',
        summary: 'List students',
        description: 'Students of the key\'s school, ordered by created_at then id.',
        tags: ['students'],
        querystring: StudentListQuery,
        response: responses(StudentList),
      },
    },
    async (request, reply) => {
      reply.type(JSON_CONTENT_TYPE);
      return listStudents(reads, request.tenant!.id, request.query);
    },
  );

  app.get<{ Params: { id: string } }>(
    '/students/:id',
    {
      schema: {
        operationId: 'getStudent',
        summary: 'One student\'s card',
        description: 'The student with contracts, lesson counts and balance. Another school\'s student is 404.',
        tags: ['students'],
        params: StudentParams,
        querystring: NoQuery,
        response: responses(StudentCard),
      },
    },
    async (request) => {
      const card = await getStudentCard(reads, request.tenant!, request.params.id);
      if (!card) throw new Problem('not_found', 'No student with this id.');
      return card;
    },
  );
  done();
};
