import { endpoint } from '../common/route.js';
import { NoQuery } from '../common/params.js';
import { getStudentCard, listStudents } from './repository.js';
import { StudentCard, StudentList, StudentListQuery, StudentParams } from './schema.js';

export const studentEndpoints = [
  endpoint<StudentListQuery>({
    url: '/students',
    scopes: ['students'],
    operationId: 'listStudents',
    summary: 'List students',
    description: 'Students of the key\'s school, ordered by created_at then id.',
    tags: ['students'],
    list: 'students',
    querystring: StudentListQuery,
    response: StudentList,
    answer: ({ reads, tenant, query }) => listStudents(reads, tenant.id, query),
  }),
  endpoint<Record<string, never>, { id: string }>({
    url: '/students/:id',
    // The card carries the student's contracts and their money, as the contracts list does.
    scopes: ['students', 'contracts'],
    operationId: 'getStudent',
    summary: 'One student\'s card',
    description: 'The student with contracts, lesson counts and balance. Another school\'s student is 404.',
    tags: ['students'],
    params: StudentParams,
    querystring: NoQuery,
    response: StudentCard,
    answer: ({ reads, tenant, params }) => getStudentCard(reads, tenant, params.id),
    missing: 'No student with this id.',
  }),
];
