import type { Kysely } from 'kysely';
import { prepared, type Reader } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import type { Page } from '../common/responses.js';
import type { Instructor, InstructorListQuery } from './schema.js';

const COLUMNS = ['id', 'full_name', 'phone', 'email', 'categories', 'is_active', 'branch_id', 'vehicle_id', 'hired_on', 'created_at'] as const;

interface InstructorFilter {
  schoolId: string;
  /** is_active as stored: 0 or 1. */
  active?: number | undefined;
}

function filtered(db: Kysely<Database>, q: InstructorFilter) {
  let query = db.selectFrom('instructors').where('school_id', '=', q.schoolId);
  if (q.active !== undefined) query = query.where('is_active', '=', q.active);
  return query;
}

const instructorPage = prepared((db, q: InstructorFilter & { limit: number; offset: number }) =>
  filtered(db, q).select(COLUMNS).orderBy('created_at').orderBy('id').limit(q.limit).offset(q.offset),
);
const instructorCount = prepared((db, q: InstructorFilter) => filtered(db, q).select((eb) => eb.fn.countAll<number>().as('total')));

export async function listInstructors(reads: Reader, schoolId: string, q: InstructorListQuery): Promise<Page<Instructor>> {
  const filter: InstructorFilter = { schoolId, active: q.is_active === undefined ? undefined : q.is_active ? 1 : 0 };
  const [rows, [count]] = await Promise.all([instructorPage(reads, { ...filter, limit: q.limit, offset: q.offset }), instructorCount(reads, filter)]);
  const items = rows.map((row): Instructor => ({
    ...row,
    // Stored as a JSON array in text and as 0/1, the same on both engines.
    categories: JSON.parse(row.categories) as Instructor['categories'],
    is_active: row.is_active === 1,
  }));
  return { items, meta: { total: count?.total ?? 0, limit: q.limit, offset: q.offset } };
}
