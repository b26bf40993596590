/**
 * The data importer (docs/import-format.md): validate a whole import file, then write it in
 * one transaction, or write nothing and report every problem found (up to MAX_ERRORS).
 */
import type { Kysely, Transaction } from 'kysely';
import { refreshStatistics } from '../db/index.js';
import type { Database } from '../db/schema.js';
import { ErrorList, type ImportError } from './errors.js';
import { checkReferences } from './references.js';
import { TO_ROW } from './rows.js';
import { ARRAY_NAMES, type ArrayName } from './schema.js';
import { checkFile, type Entries } from './validate.js';
import { isListTable, remakeItems, renumber, withItem } from './read-model.js';
import { lockSchool, recomputeContractBalances, upsert } from './write.js';
import { daysTouched, refreshDayTotals } from './day-totals.js';

export type { ImportError } from './errors.js';
export { MAX_ERRORS } from './errors.js';
export { ARRAY_NAMES, ImportFileSchema, type ArrayName, type ImportFile } from './schema.js';

export type ImportResult = { ok: true; counts: Record<string, number> } | { ok: false; errors: ImportError[] };

/**
 * Imports `input` (a parsed JSON import file) into the school `schoolId`. Records keep
 * their ids and are upserted, so importing the same file twice gives the same data.
 * A bad file is an `{ ok: false }` value and nothing is written; a database failure
 * throws, after the transaction has rolled back.
 */
export async function importData(db: Kysely<Database>, schoolId: string, input: unknown): Promise<ImportResult> {
  const school = await db.selectFrom('schools').select('currency').where('id', '=', schoolId).executeTakeFirst();
  if (!school) {
    return { ok: false, errors: [{ array: null, index: null, field: null, reason: `school "${schoolId}" does not exist` }] };
  }
  const errors = new ErrorList();
  const file = checkFile(input, school.currency, errors);
  if (!errors.full) await checkReferences(db, schoolId, file, errors);
  if (!errors.empty) return { ok: false, errors: errors.items };

  await db.transaction().execute(async (trx) => {
    await lockSchool(trx, schoolId);
    const days = await daysTouched(trx, schoolId, file.entries);
    for (const array of ARRAY_NAMES) await writeArray(trx, schoolId, school.currency, array, file.entries);
    await refreshDayTotals(trx, schoolId, days);
    // A contract's item shows its balance, known only once the payments are written: the
    // items of the file's contracts and of those whose balance moved are made again.
    const moved = await recomputeContractBalances(trx, schoolId);
    const contracts = new Set([...moved, ...file.entries.contracts.map(({ record }) => record.id)]);
    await remakeItems(trx, 'contracts', schoolId, [...contracts]);
    for (const array of ARRAY_NAMES) if (isListTable(array) && file.entries[array].length > 0) await renumber(trx, array, schoolId);
  });
  await refreshStatistics(db);
  return { ok: true, counts: Object.fromEntries(ARRAY_NAMES.map((array) => [array, file.entries[array].length])) };
}

async function writeArray<K extends ArrayName>(trx: Transaction<Database>, schoolId: string, currency: string, array: K, entries: Entries): Promise<void> {
  const toRow = TO_ROW[array];
  await upsert(trx, array, entries[array].map(({ record }) => withItem(array, toRow(record, schoolId, currency))));
}
