/**
 * Student queries. Every query is scoped by the tenant's school id and served by an
 * index that leads with school_id (migrations 0001 and 0003).
 */
import { sql } from 'kysely';
import type { Tenant } from '../../domain/tenant.js';
import { prepared, type Reader } from '../../db/index.js';
import { formatMoney, subtractMoney } from '../../domain/money.js';
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

const DRIVING = ['driving', 'autodrome'];

/**
 * The whole card in one statement (one round trip on PostgreSQL): the student's row, its
 * contracts as their stored list items in the list's order, and the sums the card shows.
 * Each of the three tables is read once, through its student index, by an aggregate of
 * the student's rows (one row, whatever they hold): the sums of a table come from one
 * pass over its rows, not one subquery each (docs/performance.md, "The student card").
 */
const cardQuery = prepared((db, p: { schoolId: string; id: string }) =>
  db
    .selectFrom('students as s')
    .innerJoin(
      (eb) =>
        eb
          .selectFrom('contracts as c')
          .where('c.school_id', '=', p.schoolId)
          .where('c.student_id', '=', p.id)
          .select((c) => [
            c.fn.agg<string | null>('string_agg', ['c.item', sql.lit(',')]).orderBy('c.pos').as('contract_items'),
            c.fn.sum<number | null>('c.price_minor').as('price_minor'),
          ])
          .as('c'),
      (join) => join.onTrue(),
    )
    .innerJoin(
      (eb) =>
        eb
          .selectFrom('lessons as l')
          .where('l.school_id', '=', p.schoolId)
          .where('l.student_id', '=', p.id)
          .select((l) => {
            const completed = (types: string[]) => l.and([l('l.status', '=', 'completed'), l('l.type', 'in', types)]);
            return [
              l.fn.countAll<number>().filterWhere(completed(DRIVING)).as('driving_completed'),
              l.fn.sum<number | null>('l.duration_minutes').filterWhere(completed(DRIVING)).as('driving_minutes_completed'),
              l.fn.countAll<number>().filterWhere(completed(['theory'])).as('theory_completed'),
              l.fn.countAll<number>().filterWhere('l.status', '=', 'planned').as('planned'),
            ];
          })
          .as('l'),
      (join) => join.onTrue(),
    )
    .innerJoin(
      (eb) =>
        eb
          .selectFrom('payments as pm')
          .where('pm.school_id', '=', p.schoolId)
          .where('pm.student_id', '=', p.id)
          .select((pm) => pm.fn.sum<number | null>(pm.case().when('pm.kind', '=', 'refund').then(pm.neg(pm.ref('pm.amount_minor'))).else(pm.ref('pm.amount_minor')).end()).as('paid_minor'))
          .as('pm'),
      (join) => join.onTrue(),
    )
    .where('s.school_id', '=', p.schoolId)
    .where('s.id', '=', p.id)
    .select(CARD_COLUMNS.map((c) => `s.${c}` as const))
    .select(['c.contract_items', 'c.price_minor', 'l.driving_completed', 'l.driving_minutes_completed', 'l.theory_completed', 'l.planned', 'pm.paid_minor']),
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
    balance: { price: formatMoney(price), paid: formatMoney(paid), debt: formatMoney(subtractMoney(price, paid)), currency: tenant.currency },
  } as StudentCard;
}
