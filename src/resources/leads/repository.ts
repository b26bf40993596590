import type { Kysely } from 'kysely';
import type { Reader } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { inPeriod, periodBounds, type PeriodBounds, type UtcRange } from '../common/period.js';
import { pagedList } from '../common/list.js';
import type { Page } from '../common/responses.js';
import type { Lead, LeadListQuery } from './schema.js';

const COLUMNS = ['id', 'full_name', 'phone', 'email', 'category', 'source', 'status', 'student_id', 'created_at'] as const;

interface LeadFilter extends PeriodBounds {
  schoolId: string;
  status?: string | undefined;
}

function filtered(db: Kysely<Database>, q: LeadFilter) {
  let query = db
    .selectFrom('leads')
    .where('school_id', '=', q.schoolId)
    .where((eb) => inPeriod(eb, 'created_at', q));
  if (q.status !== undefined) query = query.where('status', '=', q.status);
  return query;
}

const leadList = pagedList<'leads', LeadFilter, Lead>({ table: 'leads', columns: COLUMNS, orderBy: 'created_at', filtered });

export async function listLeads(reads: Reader, schoolId: string, q: LeadListQuery, period: UtcRange): Promise<Page<Lead>> {
  const filter: LeadFilter = { schoolId, ...periodBounds(period), status: q.status };
  const { rows, total } = await leadList(reads, filter, q.limit, q.offset);
  return { items: rows, meta: { total, limit: q.limit, offset: q.offset } };
}
