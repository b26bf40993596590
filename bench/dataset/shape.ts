/**
 * The size of the synthetic data set, derived from one number (the scale) and a seed:
 * how many schools, how the students, lessons and payments are spread over them, and
 * which schools get the keys the load uses. Everything here is deterministic, so a
 * run can tell whether the data set on disk is the one it would build.
 */
import { createHash } from 'node:crypto';
import { hashKey, KEY_PREFIX } from '../../src/access/keys.js';
import type { Plan } from '../../src/domain/enums.js';
import { Random } from '../../src/demo/random.js';

/** Bump when the generator changes what it writes: a stored data set of another version is rebuilt. */
export const DATASET_VERSION = 5;

/** Sizes at scale 1 (the default). */
const FULL = {
  schools: 1000,
  students: 500_000,
  lessons: 2_000_000,
  payments: 1_000_000,
  /** The one large school's students, part of `students`. */
  largeSchoolStudents: 100_000,
  /** Schools whose keys the load spreads over (one key each, the large school included). */
  keyedSchools: 200,
} as const;

/** Leads and expenses are not sized by the brief; these keep them proportionate to a school's size. */
const LEADS_PER_STUDENT = 0.4;
const EXPENSES_PER_SCHOOL = 48;
const EXPENSES_PER_STUDENT = 0.1;
const STUDENTS_PER_INSTRUCTOR = 20;
const STUDENTS_PER_GROUP = 25;
const STUDENTS_PER_BRANCH = 400;

export interface SchoolShape {
  index: number;
  id: string;
  plan: Plan;
  timezone: string;
  students: number;
  lessons: number;
  payments: number;
  leads: number;
  expenses: number;
  instructors: number;
  groups: number;
  branches: number;
}

export interface BenchKey {
  schoolId: string;
  /** The key value: derived from the seed, so every run knows it without storing it. */
  key: string;
  hash: string;
}

export interface DatasetShape {
  scale: number;
  seed: number;
  schools: SchoolShape[];
  /** The large school: the deep-offset scenario's target. */
  large: SchoolShape;
  /** A Profi school (default limit 60/minute) whose key the 429 flood uses. */
  limited: SchoolShape;
  /** VIP schools with one key each, the large school first. */
  keyed: { school: SchoolShape; key: BenchKey }[];
  limitedKey: BenchKey;
  totals: Record<'schools' | 'students' | 'contracts' | 'lessons' | 'payments' | 'leads' | 'expenses' | 'instructors' | 'groups' | 'branches' | 'keys', number>;
}

/** Splits `total` into integers proportional to `weights` that add up to exactly `total`. */
export function apportion(total: number, weights: readonly number[]): number[] {
  const sum = weights.reduce((a, b) => a + b, 0);
  const exact = weights.map((w) => (total * w) / sum);
  const out = exact.map(Math.floor);
  let left = total - out.reduce((a, b) => a + b, 0);
  const byRemainder = exact.map((x, i) => [x - Math.floor(x), i] as const).sort((a, b) => b[0] - a[0]);
  for (const [, i] of byRemainder) {
    if (left === 0) break;
    out[i]! += 1;
    left -= 1;
  }
  return out;
}

/** Plans of the ordinary schools, cycling: mostly VIP, some below Profi (they get no keys). */
const PLAN_CYCLE: readonly Plan[] = ['VIP', 'VIP', 'Profi', 'VIP', 'Standart', 'VIP', 'Profi', 'VIP', 'VIP', 'Free'];
const TIMEZONES = ['Europe/Moscow', 'Europe/Moscow', 'Europe/Moscow', 'Asia/Yekaterinburg', 'Europe/Samara', 'Asia/Novosibirsk'];

export function benchKey(seed: number, schoolId: string): BenchKey {
  const hex = createHash('sha256').update(`school-data-bench:${seed}:${schoolId}`).digest('hex').slice(0, 32);
  const key = `${KEY_PREFIX}${hex}`;
  return { schoolId, key, hash: hashKey(key) };
}

export function datasetShape(scale: number, seed: number): DatasetShape {
  const random = new Random(seed);
  const count = (n: number, min: number) => Math.max(min, Math.round(n * scale));
  const schoolCount = count(FULL.schools, 3);
  const students = count(FULL.students, 100 * schoolCount);
  const largeStudents = Math.min(count(FULL.largeSchoolStudents, 300), Math.floor(students / 2));

  // The large school is school 0, the rate-limited Profi school is school 1; the rest vary in
  // size around the average (a quarter to 1.75 times it).
  const weights = Array.from({ length: schoolCount - 1 }, () => 0.25 + 1.5 * random.next());
  const studentsPer = [largeStudents, ...apportion(students - largeStudents, weights)];
  const lessonsPer = apportion(count(FULL.lessons, 0), studentsPer);
  const paymentsPer = apportion(count(FULL.payments, 0), studentsPer);

  const schools = studentsPer.map((n, index): SchoolShape => ({
    index,
    id: `bench-${String(index).padStart(4, '0')}`,
    plan: index === 0 ? 'VIP' : index === 1 ? 'Profi' : PLAN_CYCLE[index % PLAN_CYCLE.length]!,
    timezone: index < 2 ? 'Europe/Moscow' : TIMEZONES[index % TIMEZONES.length]!,
    students: n,
    lessons: lessonsPer[index]!,
    payments: paymentsPer[index]!,
    leads: Math.round(n * LEADS_PER_STUDENT),
    expenses: EXPENSES_PER_SCHOOL + Math.round(n * EXPENSES_PER_STUDENT),
    instructors: Math.max(2, Math.ceil(n / STUDENTS_PER_INSTRUCTOR)),
    groups: Math.max(1, Math.ceil(n / STUDENTS_PER_GROUP)),
    branches: Math.max(1, Math.ceil(n / STUDENTS_PER_BRANCH)),
  }));

  const large = schools[0]!;
  const limited = schools[1]!;
  const vip = schools.filter((s) => s.plan === 'VIP');
  const keyed = vip.slice(0, FULL.keyedSchools);
  const sum = (pick: (s: SchoolShape) => number) => schools.reduce((a, s) => a + pick(s), 0);
  return {
    scale,
    seed,
    schools,
    large,
    limited,
    keyed: keyed.map((school) => ({ school, key: benchKey(seed, school.id) })),
    limitedKey: benchKey(seed, limited.id),
    totals: {
      schools: schools.length,
      students: sum((s) => s.students),
      contracts: sum((s) => s.students),
      lessons: sum((s) => s.lessons),
      payments: sum((s) => s.payments),
      leads: sum((s) => s.leads),
      expenses: sum((s) => s.expenses),
      instructors: sum((s) => s.instructors),
      groups: sum((s) => s.groups),
      branches: sum((s) => s.branches),
      keys: keyed.length + 1,
    },
  };
}

/** Every row the build writes: the progress bar's 100 %. */
export function totalRows(shape: DatasetShape): number {
  const t = shape.totals;
  // Vehicles: one per instructor.
  return t.schools + t.keys + t.students + t.contracts + t.lessons + t.payments + t.leads + t.expenses + 2 * t.instructors + t.groups + t.branches;
}
