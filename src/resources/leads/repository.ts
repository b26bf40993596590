import type { Kysely } from 'kysely';
import { prepared } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { inPeriod, periodBounds, type PeriodBounds, type UtcRange } from '../common/period.js';
import { DEEP_OFFSET } from '../common/params.js';
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

const leadPage = prepared((db, q: LeadFilter & { limit: number; offset: number }) =>
  filtered(db, q).select(COLUMNS).orderBy('created_at').orderBy('id').limit(q.limit).offset(q.offset),
);
const leadDeepPage = prepared((db, q: LeadFilter & { limit: number; offset: number }) =>
  db
    .selectFrom('leads')
    .where('school_id', '=', q.schoolId)
    .where('id', 'in', filtered(db, q).select('id').orderBy('created_at').orderBy('id').limit(q.limit).offset(q.offset))
    .select(COLUMNS)
    .orderBy('created_at')
    .orderBy('id'),
);
const leadCount = prepared((db, q: LeadFilter) => filtered(db, q).select((eb) => eb.fn.countAll<number>().as('total')));

export async function listLeads(db: Kysely<Database>, schoolId: string, q: LeadListQuery, period: UtcRange): Promise<Page<Lead>> {
  const filter: LeadFilter = { schoolId, ...periodBounds(period), status: q.status };
  const [rows, [count]] = await Promise.all([(q.offset >= DEEP_OFFSET ? leadDeepPage : leadPage)(db, { ...filter, limit: q.limit, offset: q.offset }), leadCount(db, filter)]);
  return { items: rows as Lead[], meta: { total: count?.total ?? 0, limit: q.limit, offset: q.offset } };
}
