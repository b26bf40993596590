/**
 * Reference checks: an id a record points at must be declared in the same file or be
 * stored for the same school and stay after the import; a record the import deletes must
 * not be referred to by a record that stays. They run inside the merge's transaction,
 * under the school's lock: stored rows are looked up with one batched `id in (...)` query
 * per table and chunk, and the file's records through their staging tables. Another
 * school's rows never match because every lookup is scoped by school_id.
 */
import { sql, type Kysely } from 'kysely';
import type { ErrorList, ImportError } from './errors.js';
import type { Sql } from './run.js';
import { ARRAY_NAMES, type ArrayName, type RecordOf } from './schema.js';
import { goneTable, stageTable } from './stage.js';

/** Which array each id field points at. The array name is also the table name. */
type References = { [K in ArrayName]?: ReadonlyArray<{ field: keyof RecordOf<K> & string; target: ArrayName }> };

export const REFERENCES: References = {
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

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tables are chosen at run time
type Untyped = Kysely<any>;

function* chunks(ids: Iterable<string>): Generator<string[]> {
  let chunk: string[] = [];
  for (const id of ids) {
    chunk.push(id);
    if (chunk.length === LOOKUP_CHUNK) {
      yield chunk;
      chunk = [];
    }
  }
  if (chunk.length > 0) yield chunk;
}

/** Every (array, field) that refers to `target`. */
function referrers(target: ArrayName): { array: ArrayName; field: string }[] {
  const out: { array: ArrayName; field: string }[] = [];
  for (const array of ARRAY_NAMES) for (const ref of REFERENCES[array] ?? []) if (ref.target === target) out.push({ array, field: ref.field });
  return out;
}

const order = (e: ImportError) => [ARRAY_NAMES.indexOf(e.array as ArrayName), e.index ?? -1] as const;
const byPlace = (a: ImportError, b: ImportError) => {
  const [x, y] = [order(a), order(b)];
  return x[0] - y[0] || x[1] - y[1];
};

/**
 * References the file left open (intake.pending): each must be stored for the school.
 * Those that are not are reported at every record of the file that holds them.
 */
/** What the intake (intake.ts) leaves open after reading the file. */
export interface OpenReferences {
  pending: Record<ArrayName, Set<string>>;
  unreadableArrays: Set<ArrayName>;
}

export async function checkOpenReferences(q: Sql, schoolId: string, intake: OpenReferences, errors: ErrorList): Promise<void> {
  const db = q.db as unknown as Untyped;
  const found: ImportError[] = [];
  for (const target of ARRAY_NAMES) {
    if (intake.unreadableArrays.has(target) || intake.pending[target].size === 0) continue;
    const missing = new Set(intake.pending[target]);
    for (const chunk of chunks(intake.pending[target])) {
      const { rows } = await q.run(db.selectFrom(target).select('id').where('school_id', '=', schoolId).where('id', 'in', chunk));
      for (const row of rows) missing.delete(row.id as string);
    }
    if (missing.size === 0) continue;
    // The missing ids in a table of their own, so that each referring array is read once,
    // however many there are (a file of a million records referring to unknown ids).
    await q.run(sql`create temp table missing_refs (id text primary key)`.compile(q.db));
    for (const chunk of chunks(missing)) await q.run(sql`insert into missing_refs (id) values ${sql.join(chunk.map((id) => sql`(${id})`))}`.compile(q.db));
    for (const { array, field } of referrers(target)) {
      const { rows } = await q.run(
        sql`select s.idx, s.${sql.ref(field)} as ref from ${sql.table(stageTable(array))} s
             where s.${sql.ref(field)} in (select id from missing_refs) order by s.idx limit ${errors.room}`.compile(q.db),
      );
      for (const row of rows) {
        found.push({ array, index: Number(row.idx), field, reason: `refers to ${target} "${row.ref as string}", which is neither in this file nor stored for this school` });
      }
    }
    await q.run(sql`drop table missing_refs`.compile(q.db));
  }
  for (const error of found.sort(byPlace)) errors.add(error);
}

/** A payment's contract must belong to the payment's student; the file's version of a contract wins over the stored one. */
export async function checkPaymentContracts(q: Sql, schoolId: string, errors: ErrorList): Promise<void> {
  const { rows } = await q.run(
    sql`select p.idx, p.contract_id, p.student_id, coalesce(f.student_id, c.student_id) as owner
          from ${sql.table(stageTable('payments'))} p
          left join ${sql.table(stageTable('contracts'))} f on f.id = p.contract_id
          left join contracts c on c.school_id = ${schoolId} and c.id = p.contract_id
         where p.contract_id is not null and coalesce(f.student_id, c.student_id) <> p.student_id
         order by p.idx
         limit ${errors.room}`.compile(q.db),
  );
  for (const row of rows) {
    errors.add({
      array: 'payments',
      index: Number(row.idx),
      field: 'contract_id',
      reason: `contract "${row.contract_id as string}" belongs to student "${row.owner as string}", not to "${row.student_id as string}"`,
    });
  }
}

/**
 * Before the merge: whether a contract of the file moves to another student (its stored
 * row names another), the only case checkMovedContracts can find anything in.
 */
export async function contractsMove(q: Sql, schoolId: string): Promise<boolean> {
  const { rows } = await q.run(
    sql`select 1 as moves from ${sql.table(stageTable('contracts'))} f
          join contracts c on c.school_id = ${schoolId} and c.id = f.id
         where c.student_id <> f.student_id
         limit 1`.compile(q.db),
  );
  return rows.length > 0;
}

/**
 * After the merge: a contract of the file that moves to another student while a stored
 * payment of the old student, which the file leaves as it is, still refers to it.
 */
export async function checkMovedContracts(q: Sql, schoolId: string, errors: ErrorList): Promise<void> {
  const { rows } = await q.run(
    sql`select f.idx, f.id, f.student_id, p.id as payment, p.student_id as payer
          from ${sql.table(stageTable('contracts'))} f
          join payments p on p.school_id = ${schoolId} and p.contract_id = f.id
         where p.student_id <> f.student_id
         order by f.idx, p.id
         limit ${errors.room}`.compile(q.db),
  );
  for (const row of rows) {
    errors.add({
      array: 'contracts',
      index: Number(row.idx),
      field: 'student_id',
      reason: `moves contract "${row.id as string}" to student "${row.student_id as string}", but payment "${row.payment as string}" of student "${row.payer as string}" still refers to it`,
    });
  }
}

/**
 * After the deletions, in the import's transaction: a deleted record that a record still
 * stored (kept, or written by this file) refers to is an error naming both.
 */
export async function checkDeletedUnreferred(q: Sql, schoolId: string, deletedFrom: Iterable<ArrayName>, errors: ErrorList): Promise<void> {
  const found: ImportError[] = [];
  for (const target of deletedFrom) {
    for (const { array, field } of referrers(target)) {
      const { rows } = await q.run(
        sql`select g.idx, g.id as gone, r.id as by
              from ${sql.table(goneTable(target))} g
              join ${sql.table(array)} r on r.school_id = ${schoolId} and r.${sql.ref(field)} = g.id
             order by g.idx, g.id, r.id
             limit ${errors.room}`.compile(q.db),
      );
      for (const row of rows) {
        const [gone, by] = [row.gone as string, row.by as string];
        found.push(
          row.idx === null || row.idx === undefined
            ? { array: target, index: null, field: null, reason: `"${gone}" is not in the file, so --replace deletes it, but it is still referred to by ${array} "${by}"` }
            : { array: `deleted.${target}`, index: Number(row.idx), field: null, reason: `"${gone}" is still referred to by ${array} "${by}"` },
        );
      }
    }
  }
  for (const error of found) errors.add(error);
}
