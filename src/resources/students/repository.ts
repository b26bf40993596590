/**
 * Student queries. Every query is scoped by the tenant's school id and served by an
 * index that leads with school_id (migrations 0001 and 0003).
 */
import { sql, type ExpressionBuilder } from 'kysely';
import type { Tenant } from '../../domain/tenant.js';
import { prepared, type Reader } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { formatMoney } from '../../domain/money.js';
import { pagedList, type ListBody, type ListFilter } from '../common/list.js';
import type { Contract } from '../contracts/schema.js';
import type { StudentCard, StudentListQuery } from './schema.js';

interface StudentFilter extends ListFilter {
  status?: string | undefined;
  category?: string | undefined;
  group_id?: string | undefined;
}

const studentList = pagedList<'students', StudentFilter>({
  table: 'students',
  filters: ['status', 'category', 'group_id'],
});

/** Students in the list's order (created_at, id). */
export async function listStudents(reads: Reader, schoolId: string, q: StudentListQuery): Promise<ListBody> {
  const filter: StudentFilter = { schoolId, status: q.status, category: q.category, group_id: q.group_id };
  return studentList(reads, filter, q.limit, q.offset);
}

const CARD_COLUMNS = ['id', 'full_name', 'phone', 'email', 'category', 'status', 'group_id', 'branch_id', 'created_at', 'birth_date', 'instructor_id', 'transmission'] as const;

type Eb = ExpressionBuilder<Database & { s: Database['students'] }, 's'>;

/** The student's lessons that are of one of `types` (any type when null) and have `status`. */
const lessonsOf = (eb: Eb, status: string, types: string[] | null) => {
  let query = eb.selectFrom('lessons as l').whereRef('l.school_id', '=', 's.school_id').whereRef('l.student_id', '=', 's.id').where('l.status', '=', status);
  if (types !== null) query = query.where('l.type', 'in', types);
  return query;
};

/**
 * The whole card in one statement (one round trip on PostgreSQL): the student's row, its
 * contracts as their stored list items in the list's order, and the sums the card shows.
 */
const cardQuery = prepared((db, p: { schoolId: string; id: string }) =>
  db
    .selectFrom('students as s')
    .where('s.school_id', '=', p.schoolId)
    .where('s.id', '=', p.id)
    .select(CARD_COLUMNS.map((c) => `s.${c}` as const))
    .select((eb) => [
      eb
        .selectFrom('contracts as c')
        .whereRef('c.school_id', '=', 's.school_id')
        .whereRef('c.student_id', '=', 's.id')
        .select((c) => c.fn.agg<string>('string_agg', ['c.item', sql.lit(',')]).orderBy('c.pos').as('items'))
        .as('contract_items'),
      eb
        .selectFrom('contracts as c')
        .whereRef('c.school_id', '=', 's.school_id')
        .whereRef('c.student_id', '=', 's.id')
        .select((c) => c.fn.sum<number | null>('c.price_minor').as('price'))
        .as('price_minor'),
      lessonsOf(eb, 'completed', ['driving', 'autodrome']).select((l) => l.fn.countAll<number>().as('n')).as('driving_completed'),
      lessonsOf(eb, 'completed', ['driving', 'autodrome']).select((l) => l.fn.sum<number | null>('l.duration_minutes').as('n')).as('driving_minutes_completed'),
      lessonsOf(eb, 'completed', ['theory']).select((l) => l.fn.countAll<number>().as('n')).as('theory_completed'),
      lessonsOf(eb, 'planned', null).select((l) => l.fn.countAll<number>().as('n')).as('planned'),
      eb
        .selectFrom('payments as pm')
        .whereRef('pm.school_id', '=', 's.school_id')
        .whereRef('pm.student_id', '=', 's.id')
        .select((pm) => pm.fn.sum<number | null>(pm.case().when('pm.kind', '=', 'refund').then(pm.neg(pm.ref('pm.amount_minor'))).else(pm.ref('pm.amount_minor')).end()).as('paid'))
        .as('paid_minor'),
    ]),
);

export async function getStudentCard(reads: Reader, tenant: Tenant, id: string): Promise<StudentCard | null> {
  const [row] = await cardQuery(reads, { schoolId: tenant.id, id });
  if (!row) return null;
  const { contract_items, price_minor, paid_minor, driving_completed, driving_minutes_completed, theory_completed, planned, ...student } = row;
  const contracts = contract_items === null ? [] : (JSON.parse(`[${contract_items}]`) as Contract[]);
  const price = Number(price_minor ?? 0);
  const paid = Number(paid_minor ?? 0);
  return {
    ...student,
    contracts: contracts.map(({ id, number, status, price, paid, debt, currency }) => ({ id, number, status, price, paid, debt, currency })),
    lessons: {
      driving_completed: Number(driving_completed ?? 0),
      driving_minutes_completed: Number(driving_minutes_completed ?? 0),
      theory_completed: Number(theory_completed ?? 0),
      planned: Number(planned ?? 0),
    },
    balance: { price: formatMoney(price), paid: formatMoney(paid), debt: formatMoney(price - paid), currency: tenant.currency },
  } as StudentCard;
}
