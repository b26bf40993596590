import type { Kysely } from 'kysely';
import { prepared } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { formatMoney } from '../../domain/money.js';
import { DEEP_OFFSET } from '../common/params.js';
import type { Page } from '../common/responses.js';
import type { Contract, ContractListQuery } from './schema.js';

const COLUMNS = ['id', 'number', 'student_id', 'category', 'status', 'signed_on', 'price_minor', 'paid_minor', 'currency', 'created_at'] as const;

interface ContractFilter {
  schoolId: string;
  student_id?: string | undefined;
}

function filtered(db: Kysely<Database>, q: ContractFilter) {
  let query = db.selectFrom('contracts').where('school_id', '=', q.schoolId);
  if (q.student_id !== undefined) query = query.where('student_id', '=', q.student_id);
  return query;
}

const contractPage = prepared((db, q: ContractFilter & { limit: number; offset: number }) =>
  filtered(db, q).select(COLUMNS).orderBy('created_at').orderBy('id').limit(q.limit).offset(q.offset),
);
const contractDeepPage = prepared((db, q: ContractFilter & { limit: number; offset: number }) =>
  db
    .selectFrom('contracts')
    .where('school_id', '=', q.schoolId)
    .where('id', 'in', filtered(db, q).select('id').orderBy('created_at').orderBy('id').limit(q.limit).offset(q.offset))
    .select(COLUMNS)
    .orderBy('created_at')
    .orderBy('id'),
);
const contractCount = prepared((db, q: ContractFilter) => filtered(db, q).select((eb) => eb.fn.countAll<number>().as('total')));

export async function listContracts(db: Kysely<Database>, schoolId: string, q: ContractListQuery): Promise<Page<Contract>> {
  const filter: ContractFilter = { schoolId, student_id: q.student_id };
  const [rows, [count]] = await Promise.all([(q.offset >= DEEP_OFFSET ? contractDeepPage : contractPage)(db, { ...filter, limit: q.limit, offset: q.offset }), contractCount(db, filter)]);
  // paid_minor is kept up to date by the importer, so no per-row sum over payments here.
  const items = rows.map(
    ({ price_minor, paid_minor, ...row }) =>
      ({ ...row, price: formatMoney(price_minor), paid: formatMoney(paid_minor), debt: formatMoney(price_minor - paid_minor) }) as Contract,
  );
  return { items, meta: { total: count?.total ?? 0, limit: q.limit, offset: q.offset } };
}
