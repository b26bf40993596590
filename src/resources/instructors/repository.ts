import type { Reader } from '../../db/index.js';
import { pagedList, type ListBody, type ListFilter } from '../common/list.js';
import type { InstructorListQuery } from './schema.js';

interface InstructorFilter extends ListFilter {
  /** As stored: 0 or 1. */
  is_active?: number | undefined;
}

const instructorList = pagedList<'instructors', InstructorFilter>({ table: 'instructors', filters: ['is_active'] });

/** Instructors in the list's order (created_at, id). */
export async function listInstructors(reads: Reader, schoolId: string, q: InstructorListQuery): Promise<ListBody> {
  const filter: InstructorFilter = { schoolId, is_active: q.is_active === undefined ? undefined : q.is_active ? 1 : 0 };
  return instructorList(reads, filter, q.limit, q.offset);
}
