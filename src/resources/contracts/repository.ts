import type { Reader } from '../../db/index.js';
import { pagedList, type ListBody, type ListFilter } from '../common/list.js';
import type { ContractListQuery } from './schema.js';

interface ContractFilter extends ListFilter {
  student_id?: string | undefined;
}

const contractList = pagedList<'contracts', ContractFilter>({ table: 'contracts', filters: ['student_id'] });

/** Contracts in the list's order (created_at, id); paid and debt are kept by the importer. */
export async function listContracts(reads: Reader, schoolId: string, q: ContractListQuery): Promise<ListBody> {
  return contractList(reads, { schoolId, student_id: q.student_id }, q.limit, q.offset);
}
