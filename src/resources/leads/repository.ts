import type { Reader } from '../../db/index.js';
import { pagedList, type ListBody, type ListFilter } from '../common/list.js';
import { periodBounds, type UtcRange } from '../common/period.js';
import type { LeadListQuery } from './schema.js';

interface LeadFilter extends ListFilter {
  status?: string | undefined;
}

const leadList = pagedList<'leads', LeadFilter>({ table: 'leads', filters: ['status'] });

/** Leads whose created_at lies in the period, in the list's order (created_at, id). */
export async function listLeads(reads: Reader, schoolId: string, q: LeadListQuery, period: UtcRange): Promise<ListBody> {
  const filter: LeadFilter = { schoolId, ...periodBounds(period), status: q.status };
  return leadList(reads, filter, q.limit, q.offset);
}
