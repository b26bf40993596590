import type { Kysely } from 'kysely';
import type { Reader } from '../../db/index.js';
import type { Database, Selected } from '../../db/schema.js';
import { formatMoney } from '../../domain/money.js';
import { pagedList } from '../common/list.js';
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

const contractList = pagedList<'contracts', ContractFilter, Selected<'contracts', (typeof COLUMNS)[number]>>({ table: 'contracts', columns: COLUMNS, orderBy: 'created_at', filtered });

export async function listContracts(reads: Reader, schoolId: string, q: ContractListQuery): Promise<Page<Contract>> {
  const filter: ContractFilter = { schoolId, student_id: q.student_id };
  const { rows, total } = await contractList(reads, filter, q.limit, q.offset);
  // paid_minor is kept up to date by the importer, so no per-row sum over payments here.
  const items = rows.map(
    ({ price_minor, paid_minor, ...row }) =>
      ({ ...row, price: formatMoney(price_minor), paid: formatMoney(paid_minor), debt: formatMoney(price_minor - paid_minor) }) as Contract,
  );
  return { items, meta: { total, limit: q.limit, offset: q.offset } };
}
