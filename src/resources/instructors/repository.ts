import type { Reader } from '../../db/index.js';
import { listBody, pagedList, type ListBody, type ListFilter } from '../common/list.js';
import type { InstructorListQuery } from './schema.js';

interface InstructorFilter extends ListFilter {
  /** is_active as stored: 0 or 1. */
  active?: number | undefined;
}

const instructorList = pagedList({ table: 'instructors', equal: (q: InstructorFilter) => ({ is_active: q.active }) });

/** Instructors in the list's order (created_at, id). */
export async function listInstructors(reads: Reader, schoolId: string, q: InstructorListQuery): Promise<ListBody> {
  const filter: InstructorFilter = { schoolId, active: q.is_active === undefined ? undefined : q.is_active ? 1 : 0 };
  return listBody(await instructorList(reads, filter, q.limit, q.offset), q.limit, q.offset);
}
