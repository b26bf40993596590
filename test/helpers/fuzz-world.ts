/**
 * Generated schools for the tenant-isolation property: import files whose ids come
 * from small shared pools, so every school holds records with the same ids as the
 * others but different contents. The files are valid by construction (references
 * point at the school's own records), and each school's file is the oracle for what
 * its key may ever see.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.js';
import { CATEGORIES, CONTRACT_STATUSES, EXPENSE_CATEGORIES, LEAD_SOURCES, LEAD_STATUSES, LESSON_STATUSES, LESSON_TYPES, PAYMENT_KINDS, PAYMENT_METHODS, STUDENT_STATUSES, TRANSMISSIONS, VEHICLE_STATUSES } from '../../src/domain/enums.js';
import { importData } from '../../src/importer/index.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';

type Row = Record<string, unknown> & { id: string };

export interface SchoolFile {
  plan: 'Profi' | 'VIP';
  timezone: string;
  groups: Row[];
  students: Row[];
  instructors: Row[];
  vehicles: Row[];
  contracts: Row[];
  payments: Row[];
  lessons: Row[];
  leads: Row[];
  expenses: Row[];
}

export const POOLS = {
  groups: ['g1', 'g2'],
  students: ['s1', 's2', 's3', 's4', 's5'],
  instructors: ['i1', 'i2', 'i3'],
  vehicles: ['v1', 'v2'],
  contracts: ['c1', 'c2', 'c3', 'c4'],
  payments: ['p1', 'p2', 'p3', 'p4', 'p5', 'p6'],
  lessons: ['l1', 'l2', 'l3', 'l4', 'l5', 'l6'],
  leads: ['ld1', 'ld2', 'ld3'],
  expenses: ['e1', 'e2', 'e3'],
} as const;

const T0 = Date.UTC(2025, 0, 1) / 1000;
const T1 = Date.UTC(2026, 11, 31) / 1000;
const iso = (seconds: number) => new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');
const instant = fc.integer({ min: T0, max: T1 });
const timestamp = instant.map(iso);
const date = instant.map((s) => iso(s).slice(0, 10));
const money = fc.integer({ min: 1, max: 5_000_000 }).map((minor) => (minor / 100).toFixed(2));
const text = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 16 });
const phone = fc.stringMatching(/^\+7[0-9]{10}$/);
const email = fc.stringMatching(/^[a-z0-9]{1,10}$/).map((name) => `${name}@example.ru`);
const pick = <T>(values: readonly T[]) => fc.constantFrom(...values);
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: null });
/** One of `ids`, or null; `ids` may be empty. */
const refOrNull = (ids: readonly string[]) => (ids.length ? maybe(pick(ids)) : fc.constant(null));

const subset = (pool: readonly string[], min = 0) => fc.subarray([...pool], { minLength: min });

function rows<T extends Record<string, unknown>>(ids: string[], make: (id: string) => fc.Arbitrary<T>): fc.Arbitrary<(T & { id: string })[]> {
  return fc.tuple(...ids.map((id) => make(id).map((r) => ({ ...r, id }))));
}

/** One school's import file, drawn from the shared id pools. */
export const schoolFileArb: fc.Arbitrary<SchoolFile> = fc
  .record({
    plan: pick(['Profi', 'VIP'] as const),
    timezone: pick(['Europe/Moscow', 'Asia/Vladivostok', 'Europe/Kaliningrad', 'UTC']),
    groupIds: subset(POOLS.groups, 1),
    studentIds: subset(POOLS.students),
    instructorIds: subset(POOLS.instructors, 1),
    vehicleIds: subset(POOLS.vehicles),
    leadIds: subset(POOLS.leads),
    expenseIds: subset(POOLS.expenses),
  })
  .chain((ids) =>
    fc
      .record({
        groups: rows(ids.groupIds, () => fc.record({ name: text, category: pick(CATEGORIES), branch_id: fc.constant(null) })),
        students: rows(ids.studentIds, () =>
          fc.record({
            full_name: text, phone, email, category: pick(CATEGORIES), status: pick(STUDENT_STATUSES), group_id: pick(ids.groupIds), branch_id: fc.constant(null),
            birth_date: maybe(date), instructor_id: refOrNull(ids.instructorIds), transmission: maybe(pick(TRANSMISSIONS)), created_at: timestamp,
          }),
        ),
        instructors: rows(ids.instructorIds, () =>
          fc.record({
            full_name: text, phone, email: maybe(email), categories: fc.uniqueArray(pick(CATEGORIES), { minLength: 1, maxLength: 3 }), is_active: fc.boolean(),
            branch_id: fc.constant(null), vehicle_id: refOrNull(ids.vehicleIds), hired_on: maybe(date), created_at: timestamp,
          }),
        ),
        vehicles: rows(ids.vehicleIds, () =>
          fc.record({
            plate_number: fc.stringMatching(/^[A-Z0-9]{6,9}$/), brand: text, model: text, year: fc.integer({ min: 1990, max: 2025 }), category: pick(CATEGORIES),
            transmission: pick(TRANSMISSIONS), status: pick(VEHICLE_STATUSES), instructor_id: refOrNull(ids.instructorIds), branch_id: fc.constant(null),
            insurance_policy_number: maybe(fc.stringMatching(/^[A-Z]{3}[0-9]{10}$/)), insurance: maybe(fc.tuple(date, date)),
            inspection_valid_until: maybe(date), created_at: timestamp,
          }).map(({ insurance, ...rest }) => {
            // The policy's period runs forward.
            const [from, until] = insurance ? [insurance[0], insurance[1]].sort() : [null, null];
            return { ...rest, insurance_valid_from: from, insurance_valid_until: until };
          }),
        ),
        leads: rows(ids.leadIds, () =>
          fc.record({
            full_name: text, phone, email: maybe(email), category: maybe(pick(CATEGORIES)), source: pick(LEAD_SOURCES), status: pick(LEAD_STATUSES),
            student_id: refOrNull(ids.studentIds), created_at: timestamp,
          }),
        ),
        expenses: rows(ids.expenseIds, () => fc.record({ category: pick(EXPENSE_CATEGORIES), amount: money, spent_at: timestamp, comment: maybe(text) })),
        // Records that need a student exist only when the school has students.
        contractIds: ids.studentIds.length ? subset(POOLS.contracts) : fc.constant<string[]>([]),
        paymentIds: ids.studentIds.length ? subset(POOLS.payments) : fc.constant<string[]>([]),
        lessonIds: subset(POOLS.lessons),
      })
      .chain((base) =>
        fc
          .record({
            contracts: rows(base.contractIds, () =>
              fc.record({ number: text, student_id: pick(ids.studentIds), category: pick(CATEGORIES), status: pick(CONTRACT_STATUSES), signed_on: date, price: money, created_at: timestamp }),
            ),
            lessons: rows(base.lessonIds, () =>
              fc.record({
                type: pick(LESSON_TYPES), status: pick(LESSON_STATUSES), starts_at: instant, minutes: fc.integer({ min: 1, max: 240 }), instructor_id: pick(ids.instructorIds),
                student_id: refOrNull(ids.studentIds), group_id: refOrNull(ids.groupIds), vehicle_id: refOrNull(ids.vehicleIds), branch_id: fc.constant(null), created_at: timestamp,
              }).map(({ starts_at, minutes, ...rest }) => ({ ...rest, starts_at: iso(starts_at), ends_at: iso(starts_at + minutes * 60) })),
            ),
          })
          .chain((more) =>
            rows(base.paymentIds, () =>
              fc.record({
                // A payment names one of the school's contracts and its student, or no contract.
                contract: refOrNull(more.contracts.map((c) => c.id)), student: pick(ids.studentIds), kind: pick(PAYMENT_KINDS), method: pick(PAYMENT_METHODS),
                amount: money, paid_at: timestamp, created_at: timestamp,
              }).map(({ contract, student, ...rest }) => ({
                ...rest,
                contract_id: contract,
                student_id: contract === null ? student : (more.contracts.find((c) => c.id === contract)!.student_id),
              })),
            ).map((payments) => ({ ...ids, ...base, ...more, payments })),
          ),
      ),
  )
  .map((w) => ({
    plan: w.plan, timezone: w.timezone, groups: w.groups, students: w.students, instructors: w.instructors, vehicles: w.vehicles, contracts: w.contracts,
    payments: w.payments, lessons: w.lessons, leads: w.leads, expenses: w.expenses,
  }));

export interface ImportedSchool {
  id: string;
  key: string;
  file: SchoolFile;
}

/** Creates each school with a key and imports its file. */
export async function importWorld(db: Kysely<Database>, files: SchoolFile[]): Promise<ImportedSchool[]> {
  const out: ImportedSchool[] = [];
  for (const file of files) {
    const school = await createSchool(db, { name: 'Fuzz', plan: file.plan, timezone: file.timezone, id: `fz_${randomBytes(6).toString('hex')}` });
    assert.ok(school.ok, school.ok ? '' : school.reason);
    const { groups, students, instructors, vehicles, contracts, payments, lessons, leads, expenses } = file;
    const imported = await importData(db, school.value.id, { groups, students, instructors, vehicles, contracts, payments, lessons, leads, expenses });
    assert.ok(imported.ok, JSON.stringify(imported).slice(0, 2000));
    const key = await createKey(db, school.value.id, 'fuzz');
    assert.ok(key.ok);
    out.push({ id: school.value.id, key: key.value.key, file });
  }
  return out;
}
