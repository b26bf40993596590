import { endpoint } from '../common/route.js';
import { listInstructors } from './repository.js';
import { InstructorList, InstructorListQuery } from './schema.js';

export const instructorEndpoints = [
  endpoint<InstructorListQuery>({
    url: '/instructors',
    scopes: ['instructors'],
    operationId: 'listInstructors',
    summary: 'List instructors',
    description: 'Instructors of the key\'s school, ordered by created_at then id; is_active narrows to active or inactive ones.',
    tags: ['instructors'],
    list: 'instructors',
    querystring: InstructorListQuery,
    response: InstructorList,
    answer: ({ reads, tenant, query }) => listInstructors(reads, tenant.id, query),
  }),
];
