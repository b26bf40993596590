/**
 * Student queries. Every query is scoped by the tenant's school id and served by an
 * index that leads with school_id (see migration 0001).
 */
import type { Kysely } from 'kysely';
import type { Tenant } from '../../access/index.js';
import { prepared, type Reader } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { formatMoney } from '../../domain/money.js';
import { pagedList } from '../common/list.js';
import type { Page } from '../common/responses.js';
import type { Student, StudentCard, StudentListQuery } from './schema.js';

const LIST_COLUMNS = ['id', 'full_name', 'phone', 'email', 'category', 'status', 'group_id', 'branch_id', 'created_at'] as const;

interface StudentFilter {
  schoolId: string;
  status?: string | undefined;
  category?: string | undefined;
  group_id?: string | undefined;
}

function filtered(db: Kysely<Database>, q: StudentFilter) {
  let query = db.selectFrom('students').where('school_id', '=', q.schoolId);
  if (q.status !== undefined) query = query.where('status', '=', q.status);
  if (q.category !== undefined) query = query.where('category', '=', q.category);
  if (q.group_id !== undefined) query = query.where('group_id', '=', q.group_id);
  return query;
}

const studentList = pagedList<'students', StudentFilter, Student>({ table: 'students', columns: LIST_COLUMNS, orderBy: 'created_at', filtered });

export async function listStudents(reads: Reader, schoolId: string, q: StudentListQuery): Promise<Page<Student>> {
  const filter: StudentFilter = { schoolId, status: q.status, category: q.category, group_id: q.group_id };
  const { rows, total } = await studentList(reads, filter, q.limit, q.offset);
  return { items: rows, meta: { total, limit: q.limit, offset: q.offset } };
}

const cardStudent = prepared((db, p: { schoolId: string; id: string }) =>
  db
    .selectFrom('students')
    .select([...LIST_COLUMNS, 'birth_date', 'instructor_id', 'transmission'])
    .where('school_id', '=', p.schoolId)
    .where('id', '=', p.id),
);

const cardContracts = prepared((db, p: { schoolId: string; id: string }) =>
  db
    .selectFrom('contracts')
    .select(['id', 'number', 'status', 'price_minor', 'paid_minor', 'currency'])
    .where('school_id', '=', p.schoolId)
    .where('student_id', '=', p.id)
    .orderBy('created_at')
    .orderBy('id'),
);

const cardLessons = prepared((db, p: { schoolId: string; id: string }) =>
  db
    .selectFrom('lessons')
    .select((eb) => [
      eb.fn
        .sum<number | null>(eb.case().when(eb.and([eb('status', '=', 'completed'), eb('type', 'in', ['driving', 'autodrome'])])).then(1).else(0).end())
        .as('driving_completed'),
      eb.fn
        .sum<number | null>(
          eb.case().when(eb.and([eb('status', '=', 'completed'), eb('type', 'in', ['driving', 'autodrome'])])).then(eb.ref('duration_minutes')).else(0).end(),
        )
        .as('driving_minutes_completed'),
      eb.fn
        .sum<number | null>(eb.case().when(eb.and([eb('status', '=', 'completed'), eb('type', '=', 'theory')])).then(1).else(0).end())
        .as('theory_completed'),
      eb.fn.sum<number | null>(eb.case().when('status', '=', 'planned').then(1).else(0).end()).as('planned'),
    ])
    .where('school_id', '=', p.schoolId)
    .where('student_id', '=', p.id),
);

const cardPaid = prepared((db, p: { schoolId: string; id: string }) =>
  db
    .selectFrom('payments')
    .select((eb) => eb.fn.sum<number | null>(eb.case().when('kind', '=', 'refund').then(eb.neg(eb.ref('amount_minor'))).else(eb.ref('amount_minor')).end()).as('paid'))
    .where('school_id', '=', p.schoolId)
    .where('student_id', '=', p.id),
);

export async function getStudentCard(reads: Reader, tenant: Tenant, id: string): Promise<StudentCard | null> {
  const key = { schoolId: tenant.id, id };
  const [student] = await cardStudent(reads, key);
  if (!student) return null;

  const [contracts, [lessons], [paid]] = await Promise.all([cardContracts(reads, key), cardLessons(reads, key), cardPaid(reads, key)]);

  const priceMinor = contracts.reduce((sum, c) => sum + c.price_minor, 0);
  const paidMinor = Number(paid?.paid ?? 0);
  return {
    ...student,
    contracts: contracts.map((c) => ({
      id: c.id,
      number: c.number,
      status: c.status,
      price: formatMoney(c.price_minor),
      paid: formatMoney(c.paid_minor),
      debt: formatMoney(c.price_minor - c.paid_minor),
      currency: c.currency,
    })),
    lessons: {
      driving_completed: Number(lessons?.driving_completed ?? 0),
      driving_minutes_completed: Number(lessons?.driving_minutes_completed ?? 0),
      theory_completed: Number(lessons?.theory_completed ?? 0),
      planned: Number(lessons?.planned ?? 0),
    },
    balance: { price: formatMoney(priceMinor), paid: formatMoney(paidMinor), debt: formatMoney(priceMinor - paidMinor), currency: tenant.currency },
  } as StudentCard;
}
