import type { Reader } from '../../db/index.js';
import { listBody, pagedList, type ListBody, type ListFilter } from '../common/list.js';
import type { ContractListQuery } from './schema.js';

interface ContractFilter extends ListFilter {
  student_id?: string | undefined;
}

const contractList = pagedList({ table: 'contracts', equal: (q: ContractFilter) => ({ student_id: q.student_id }) });

/** Contracts in the list's order (created_at, id); paid and debt are kept by the importer. */
export async function listContracts(reads: Reader, schoolId: string, q: ContractListQuery): Promise<ListBody> {
  return listBody(await contractList(reads, { schoolId, student_id: q.student_id }, q.limit, q.offset), q.limit, q.offset);
}
