/**
 * Demo data: a year of a believable Russian driving school, as an import file. It goes
 * through the same importer as a customer's data, so the demo exercises the real path.
 * Everything follows from `seed` and `now`: the same options give the same file.
 */
import type { ImportFile } from '../importer/schema.js';
import { Calendar } from './calendar.js';
import type { Demo } from './context.js';
import { makeExpenses, makeFinances } from './finance.js';
import { makeLeads } from './leads.js';
import { makeLessons } from './lessons.js';
import { Random } from './random.js';
import { makeBranches, makeStaff } from './staff.js';
import { makeGroups, makeStudents } from './students.js';

export interface DemoOptions {
  seed: number;
  /** Number of students; the staff, groups, leads and expenses scale with it. */
  students: number;
  /** The moment the data ends: past lessons before it, planned ones after. */
  now: Date;
  /** IANA time zone of the school: lessons keep local working hours in it. */
  timezone: string;
  /** ISO 4217 code of every amount; must be the school's currency. Default RUB. */
  currency?: string;
}

/** Car plate region codes by time zone; other zones get Moscow's. */
const REGIONS: Record<string, readonly string[]> = {
  'Europe/Moscow': ['77', '97', '99', '177', '197', '777', '799'],
  'Asia/Yekaterinburg': ['66', '96', '196'],
  'Asia/Novosibirsk': ['54', '154'],
  'Europe/Samara': ['63', '163'],
};

export function generateSchoolData(options: DemoOptions): ImportFile {
  const calendar = new Calendar(options.now.getTime(), options.timezone);
  const demo: Demo = {
    random: new Random(options.seed),
    calendar,
    currency: options.currency ?? 'RUB',
    firstDay: calendar.today - 365,
    regions: REGIONS[options.timezone] ?? REGIONS['Europe/Moscow']!,
  };
  const branches = makeBranches(demo, options.students);
  const staff = makeStaff(demo, branches, options.students);
  const groups = makeGroups(demo, branches, options.students);
  const students = makeStudents(demo, groups, staff, options.students);
  const { contracts, payments } = makeFinances(demo, students);
  return {
    branches,
    groups: groups.map((g) => g.record),
    students: students.map((s) => s.record),
    instructors: staff.instructors.map((i) => i.record),
    vehicles: staff.vehicles,
    contracts,
    payments,
    lessons: makeLessons(demo, groups, students, staff),
    leads: makeLeads(demo, students),
    expenses: makeExpenses(demo, branches, staff, options.students),
  };
}
