/**
 * Reference checks: an id a record points at must be declared in the same file or
 * already stored for the same school. Stored rows are looked up with one batched
 * `id in (...)` query per table and chunk, never one query per record; another school's
 * rows never match because every lookup is scoped by school_id.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { ErrorList } from './errors.js';
import { ARRAY_NAMES, type ArrayName, type RecordOf } from './schema.js';
import type { CheckedFile, Entry } from './validate.js';

/** Which array each id field points at. The array name is also the table name. */
type References = { [K in ArrayName]?: ReadonlyArray<{ field: keyof RecordOf<K> & string; target: ArrayName }> };

const REFERENCES: References = {
  groups: [{ field: 'branch_id', target: 'branches' }],
  students: [
    { field: 'group_id', target: 'groups' },
    { field: 'branch_id', target: 'branches' },
    { field: 'instructor_id', target: 'instructors' },
  ],
  instructors: [
    { field: 'branch_id', target: 'branches' },
    { field: 'vehicle_id', target: 'vehicles' },
  ],
  vehicles: [
    { field: 'instructor_id', target: 'instructors' },
    { field: 'branch_id', target: 'branches' },
  ],
  contracts: [{ field: 'student_id', target: 'students' }],
  payments: [
    { field: 'student_id', target: 'students' },
    { field: 'contract_id', target: 'contracts' },
  ],
  lessons: [
    { field: 'instructor_id', target: 'instructors' },
    { field: 'student_id', target: 'students' },
    { field: 'group_id', target: 'groups' },
    { field: 'vehicle_id', target: 'vehicles' },
    { field: 'branch_id', target: 'branches' },
  ],
  leads: [{ field: 'student_id', target: 'students' }],
};

/** Keeps each `in (...)` list well inside SQLite's and PostgreSQL's bound-parameter limits. */
const LOOKUP_CHUNK = 500;

/** Every reference of every valid record: the id it holds, where it is, and what it must name. */
type Reference = { array: ArrayName; index: number; field: string; target: ArrayName; id: string };

function* references(file: CheckedFile): Generator<Reference> {
  for (const array of Object.keys(REFERENCES) as ArrayName[]) {
    yield* referencesOf(array, file.entries[array], REFERENCES[array] ?? []);
  }
}

function* referencesOf<K extends ArrayName>(array: K, entries: Entry<K>[], refs: References[K] & object): Generator<Reference> {
  for (const { index, record } of entries) {
    for (const { field, target } of refs) {
      const id = record[field];
      // Nullable references left out or null point at nothing; the schema guarantees strings otherwise.
      if (typeof id === 'string') yield { array, index, field, target, id };
    }
  }
}

export async function checkReferences(db: Kysely<Database>, schoolId: string, file: CheckedFile, errors: ErrorList): Promise<void> {
  const stored = await findStored(db, schoolId, file);
  for (const { array, index, field, target, id } of references(file)) {
    if (errors.full) return;
    if (!file.declared[target].has(id) && !stored.ids[target].has(id) && !file.unreadable.has(target)) {
      errors.add({ array, index, field, reason: `refers to ${target} "${id}", which is neither in this file nor stored for this school` });
    }
  }
  checkPaymentContracts(file, stored.contractOwners, errors);
}

interface Stored {
  ids: Record<ArrayName, Set<string>>;
  /** Student of each stored contract a payment refers to. */
  contractOwners: Map<string, string>;
}

const emptySets = () => Object.fromEntries(ARRAY_NAMES.map((name) => [name, new Set<string>()])) as Record<ArrayName, Set<string>>;

function* chunks(ids: Set<string>): Generator<string[]> {
  const list = [...ids];
  for (let i = 0; i < list.length; i += LOOKUP_CHUNK) yield list.slice(i, i + LOOKUP_CHUNK);
}

/** The referenced ids the file does not declare, as far as the school's stored rows have them. */
async function findStored(db: Kysely<Database>, schoolId: string, file: CheckedFile): Promise<Stored> {
  const wanted = emptySets();
  for (const { target, id } of references(file)) {
    if (!file.declared[target].has(id) && !file.unreadable.has(target)) wanted[target].add(id);
  }
  const ids = emptySets();
  for (const table of ARRAY_NAMES) {
    if (table === 'contracts') continue;
    for (const chunk of chunks(wanted[table])) {
      const rows = await db.selectFrom(table).select('id').where('school_id', '=', schoolId).where('id', 'in', chunk).execute();
      for (const row of rows) ids[table].add(row.id);
    }
  }
  // Contracts bring their student too: a payment's contract must be that student's.
  const contractOwners = new Map<string, string>();
  for (const chunk of chunks(wanted.contracts)) {
    const rows = await db.selectFrom('contracts').select(['id', 'student_id']).where('school_id', '=', schoolId).where('id', 'in', chunk).execute();
    for (const row of rows) {
      ids.contracts.add(row.id);
      contractOwners.set(row.id, row.student_id);
    }
  }
  return { ids, contractOwners };
}

/** A payment's contract must belong to the payment's student; the file's version of a contract wins over the stored one. */
function checkPaymentContracts(file: CheckedFile, storedOwners: Map<string, string>, errors: ErrorList): void {
  const owners = new Map([...storedOwners, ...file.entries.contracts.map(({ record }): [string, string] => [record.id, record.student_id])]);
  for (const { index, record } of file.entries.payments) {
    if (errors.full) return;
    const owner = record.contract_id ? owners.get(record.contract_id) : undefined;
    // No owner: the contract is missing (reported above) or has errors of its own.
    if (owner !== undefined && owner !== record.student_id) {
      errors.add({ array: 'payments', index, field: 'contract_id', reason: `contract "${record.contract_id}" belongs to student "${owner}", not to "${record.student_id}"` });
    }
  }
}
