/**
 * The synthetic rows of one school, as a stream of [table, row] pairs in column order.
 * Seeded per school, so every school's data is the same on every build. Rows are made
 * one at a time (the large school's 400,000 lessons never sit in memory at once);
 * only what later rows need is kept: each student's category and enrolment time, and
 * each contract's paid total, so contracts.paid_minor agrees with the payments.
 */
import { keyHint } from '../../src/access/keys.js';
import type { Database } from '../../src/db/schema.js';
import { person, phone } from '../../src/demo/people.js';
import { Random } from '../../src/demo/random.js';
import {
  CATEGORIES,
  type CONTRACT_STATUSES,
  type EXPENSE_CATEGORIES,
  type LEAD_SOURCES,
  type LEAD_STATUSES,
  type LESSON_TYPES,
  type PAYMENT_METHODS,
  type STUDENT_STATUSES,
  type VEHICLE_STATUSES,
} from '../../src/domain/enums.js';
import type { DatasetShape, SchoolShape } from './shape.js';

/** The columns the build writes, per table, in the order of each generated row. */
export const COLUMNS = {
  schools: ['id', 'name', 'plan', 'timezone', 'currency', 'created_at', 'data_version'],
  api_keys: ['id', 'school_id', 'name', 'key_hash', 'hint', 'created_at'],
  branches: ['school_id', 'id', 'name'],
  groups: ['school_id', 'id', 'name', 'category', 'branch_id'],
  instructors: ['school_id', 'id', 'full_name', 'phone', 'email', 'categories', 'is_active', 'branch_id', 'vehicle_id', 'hired_on', 'created_at'],
  vehicles: [
    'school_id', 'id', 'plate_number', 'brand', 'model', 'year', 'category', 'transmission', 'status', 'instructor_id', 'branch_id',
    'insurance_policy_number', 'insurance_valid_from', 'insurance_valid_until', 'inspection_valid_until', 'created_at',
  ],
  students: ['school_id', 'id', 'full_name', 'phone', 'email', 'category', 'status', 'group_id', 'branch_id', 'birth_date', 'instructor_id', 'transmission', 'created_at'],
  payments: ['school_id', 'id', 'student_id', 'contract_id', 'kind', 'method', 'amount_minor', 'currency', 'paid_at', 'created_at'],
  contracts: ['school_id', 'id', 'number', 'student_id', 'category', 'status', 'signed_on', 'price_minor', 'paid_minor', 'currency', 'created_at'],
  lessons: ['school_id', 'id', 'type', 'status', 'starts_at', 'ends_at', 'duration_minutes', 'instructor_id', 'student_id', 'group_id', 'vehicle_id', 'branch_id', 'created_at'],
  leads: ['school_id', 'id', 'full_name', 'phone', 'email', 'category', 'source', 'status', 'student_id', 'created_at'],
  expenses: ['school_id', 'id', 'category', 'amount_minor', 'currency', 'spent_at', 'comment'],
} as const satisfies { [T in keyof Database]?: readonly (keyof Database[T] & string)[] };

export type Table = keyof typeof COLUMNS;
export type Row = readonly [Table, unknown[]];

/** The data covers 2025 and 2026; lessons after NOW are planned, earlier ones happened. */
export const DATA_FROM = Date.UTC(2025, 0, 1);
export const DATA_UNTIL = Date.UTC(2027, 0, 1);
const NOW = Date.UTC(2026, 6, 1);
const DAY = 86_400_000;
const CURRENCY = 'RUB';

const two = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, '0'));
const dayPrefix = new Map<number, string>();

/** formatTimestamp without a Date per call: millions of timestamps are written. */
function stamp(ms: number): string {
  const day = Math.floor(ms / DAY);
  let prefix = dayPrefix.get(day);
  if (prefix === undefined) {
    prefix = new Date(day * DAY).toISOString().slice(0, 11);
    dayPrefix.set(day, prefix);
  }
  const s = Math.floor((ms - day * DAY) / 1000);
  return `${prefix}${two[Math.floor(s / 3600)]}:${two[Math.floor(s / 60) % 60]}:${two[s % 60]}Z`;
}

const date = (ms: number): string => stamp(ms).slice(0, 10);

function between(random: Random, from: number, until: number): number {
  return from + Math.floor(random.next() * ((until - from) / 1000)) * 1000;
}

const STUDENT_CATEGORY = { B: 75, A: 8, C: 5, BE: 3, A1: 2, M: 2, C1: 1, D: 1, CE: 1, B1: 1, Tm: 1 } as const satisfies Partial<Record<(typeof CATEGORIES)[number], number>>;
const STUDENT_STATUS: Record<(typeof STUDENT_STATUSES)[number], number> = {
  enrolled: 10, learning_theory: 20, learning_practice: 25, internal_exam: 5, state_exam: 5, graduated: 25, expelled: 5, on_hold: 5,
};
const LESSON_TYPE: Record<(typeof LESSON_TYPES)[number], number> = { driving: 60, autodrome: 10, theory: 25, internal_exam: 5 };
const LESSON_MINUTES: Record<(typeof LESSON_TYPES)[number], number> = { driving: 90, autodrome: 60, theory: 90, internal_exam: 60 };
const PAYMENT_METHOD: Record<(typeof PAYMENT_METHODS)[number], number> = { card: 40, cash: 20, bank_transfer: 20, online: 20 };
const CONTRACT_STATUS: Record<(typeof CONTRACT_STATUSES)[number], number> = { active: 50, completed: 40, terminated: 10 };
const LEAD_SOURCE: Record<(typeof LEAD_SOURCES)[number], number> = { website: 30, phone: 20, walk_in: 10, referral: 15, social: 15, ads: 8, other: 2 };
const LEAD_STATUS: Record<(typeof LEAD_STATUSES)[number], number> = { new: 20, in_progress: 20, converted: 40, rejected: 20 };
const EXPENSE_CATEGORY: Record<(typeof EXPENSE_CATEGORIES)[number], number> = {
  salary: 30, fuel: 20, repair: 10, rent: 10, insurance: 5, marketing: 10, utilities: 5, taxes: 5, other: 5,
};
const VEHICLE_STATUS: Record<(typeof VEHICLE_STATUSES)[number], number> = { active: 85, repair: 10, decommissioned: 5 };
const CARS = [['Lada', 'Vesta'], ['Lada', 'Granta'], ['Kia', 'Rio'], ['Hyundai', 'Solaris'], ['Skoda', 'Rapid'], ['Volkswagen', 'Polo']] as const;
const PLATE_LETTERS = 'АВЕКМНОРСТУХ';

const categoryIndex = new Map<string, number>(CATEGORIES.map((c, i) => [c, i]));

/** The rows that do not belong to a school's data: the schools and the keys. */
export function* headRows(shape: DatasetShape): Generator<Row> {
  const created = stamp(DATA_FROM - 30 * DAY);
  // Each school's data is its first change batch (seq 1), as if one import had loaded it.
  for (const s of shape.schools) yield ['schools', [s.id, `Автошкола ${s.index}`, s.plan, s.timezone, CURRENCY, created, 1]];
  for (const key of [...shape.keyed.map((k) => k.key), shape.limitedKey]) {
    yield ['api_keys', [`key-${key.schoolId}`, key.schoolId, 'bench load', key.hash, keyHint(key.key), created]];
  }
}

/** Every row of one school's data. */
export function* schoolRows(shape: DatasetShape, s: SchoolShape): Generator<Row> {
  const random = new Random((shape.seed ^ Math.imul(s.index + 1, 0x9e3779b1)) >>> 0);
  const id = s.id;
  const branch = (n: number) => `br-${n % s.branches}`;

  for (let i = 0; i < s.branches; i++) yield ['branches', [id, `br-${i}`, `Филиал ${i + 1}`]];
  for (let i = 0; i < s.groups; i++) {
    const category = random.weighted(STUDENT_CATEGORY);
    yield ['groups', [id, `gr-${i}`, `Группа ${category}-${i + 1}`, category, branch(i)]];
  }

  for (let i = 0; i < s.instructors; i++) {
    const p = person(random);
    const hired = between(random, DATA_FROM - 5 * 365 * DAY, DATA_FROM);
    const categories = random.chance(0.2) ? '["A","B"]' : '["B"]';
    yield ['instructors', [id, `in-${i}`, p.fullName, p.phone, random.chance(0.8) ? p.email : null, categories, random.chance(0.9) ? 1 : 0, branch(i), `ve-${i}`, date(hired), stamp(hired)]];
  }
  for (let i = 0; i < s.instructors; i++) {
    const [brand, model] = random.pick(CARS);
    const plate = `${random.pick([...PLATE_LETTERS])}${random.int(100, 999)}${random.pick([...PLATE_LETTERS])}${random.pick([...PLATE_LETTERS])}77`;
    const insuredFrom = between(random, NOW - 365 * DAY, NOW);
    yield ['vehicles', [
      id, `ve-${i}`, plate, brand, model, random.int(2015, 2025), 'B', random.chance(0.7) ? 'manual' : 'automatic', random.weighted(VEHICLE_STATUS),
      `in-${i}`, branch(i), `ХХХ ${random.int(1_000_000_000, 9_999_999_999)}`, date(insuredFrom), date(insuredFrom + 364 * DAY),
      date(between(random, NOW, NOW + 365 * DAY)), stamp(DATA_FROM - 60 * DAY),
    ]];
  }

  // Kept for the contracts, which repeat the student's category and start with the enrolment.
  const studentCategory = new Uint8Array(s.students);
  const enrolledAt = new Float64Array(s.students);
  for (let n = 0; n < s.students; n++) {
    const p = person(random);
    const category = random.weighted(STUDENT_CATEGORY);
    const created = between(random, DATA_FROM, DATA_UNTIL - 30 * DAY);
    studentCategory[n] = categoryIndex.get(category)!;
    enrolledAt[n] = created;
    yield ['students', [
      id, `st-${n}`, p.fullName, p.phone, p.email, category, random.weighted(STUDENT_STATUS), `gr-${n % s.groups}`,
      random.chance(0.9) ? branch(n) : null, random.chance(0.95) ? date(between(random, Date.UTC(1965, 0, 1), Date.UTC(2008, 0, 1))) : null,
      random.chance(0.8) ? `in-${random.int(0, s.instructors - 1)}` : null, random.chance(0.7) ? 'manual' : 'automatic', stamp(created),
    ]];
  }

  // Payments first: each contract's paid total is their sum, minus refunds.
  const paid = new Float64Array(s.students);
  for (let k = 0; k < s.payments; k++) {
    const n = random.int(0, s.students - 1);
    const refund = random.chance(0.04);
    const amount = refund ? 100 * 500 * random.int(2, 20) : 100 * 500 * random.int(10, 80);
    const onContract = random.chance(0.9);
    if (onContract) paid[n]! += refund ? -amount : amount;
    const at = stamp(between(random, enrolledAt[n]!, DATA_UNTIL));
    yield ['payments', [id, `pa-${k}`, `st-${n}`, onContract ? `ct-${n}` : null, refund ? 'refund' : 'payment', random.weighted(PAYMENT_METHOD), amount, CURRENCY, at, at]];
  }
  for (let n = 0; n < s.students; n++) {
    const created = enrolledAt[n]!;
    yield ['contracts', [
      id, `ct-${n}`, `${s.index}/${n + 1}`, `st-${n}`, CATEGORIES[studentCategory[n]!], random.weighted(CONTRACT_STATUS), date(created),
      100 * 1000 * random.int(30, 90), paid[n], CURRENCY, stamp(created),
    ]];
  }

  for (let k = 0; k < s.lessons; k++) {
    const type = random.weighted(LESSON_TYPE);
    // Working hours 08:00-18:30 Moscow time on a half-hour grid.
    const starts = DATA_FROM + random.int(0, (DATA_UNTIL - DATA_FROM) / DAY - 1) * DAY + (5 * 60 + 30 * random.int(0, 21)) * 60_000;
    const minutes = LESSON_MINUTES[type];
    const status = starts >= NOW ? 'planned' : random.weighted({ completed: 80, cancelled: 10, no_show: 10 });
    const n = random.int(0, s.students - 1);
    const groupLesson = type === 'theory' && random.chance(0.5);
    const instructor = random.int(0, s.instructors - 1);
    yield ['lessons', [
      id, `le-${k}`, type, status, stamp(starts), stamp(starts + minutes * 60_000), minutes, `in-${instructor}`, groupLesson ? null : `st-${n}`,
      `gr-${n % s.groups}`, type === 'theory' ? null : `ve-${instructor}`, branch(instructor), stamp(starts - random.int(1, 14) * DAY),
    ]];
  }

  for (let k = 0; k < s.leads; k++) {
    const p = person(random);
    const status = random.weighted(LEAD_STATUS);
    yield ['leads', [
      id, `ld-${k}`, p.fullName, random.chance(0.9) ? p.phone : phone(random), random.chance(0.6) ? p.email : null,
      random.chance(0.7) ? random.weighted(STUDENT_CATEGORY) : null, random.weighted(LEAD_SOURCE), status,
      status === 'converted' ? `st-${random.int(0, s.students - 1)}` : null, stamp(between(random, DATA_FROM, DATA_UNTIL)),
    ]];
  }

  for (let k = 0; k < s.expenses; k++) {
    const category = random.weighted(EXPENSE_CATEGORY);
    yield ['expenses', [id, `ex-${k}`, category, 100 * 100 * random.int(10, 2000), CURRENCY, stamp(between(random, DATA_FROM, DATA_UNTIL)), random.chance(0.3) ? 'по счёту' : null]];
  }
}
