/**
 * Study groups and their students. Groups of each course start at even intervals over
 * the year (the last one shortly after `now`), and a student's status follows from how
 * far their group has got, with a few who dropped out or paused.
 */
import { STUDENT_STATUSES } from '../domain/enums.js';
import type { RecordOf } from '../importer/schema.js';
import type { Day } from './calendar.js';
import { clock, pad, timeOn, type Demo } from './context.js';
import { person, type Sex } from './people.js';
import type { Instructor, Staff } from './staff.js';

type Branch = RecordOf<'branches'>;
type StudentRecord = RecordOf<'students'>;
type Status = StudentRecord['status'];

/** The licence courses the demo school teaches. */
export type Course = 'A' | 'B' | 'C';

export interface Group {
  record: RecordOf<'groups'>;
  course: Course;
  /** First theory class. */
  start: Day;
}

export interface Student {
  record: StudentRecord;
  group: Group;
  enrolledDay: Day;
  instructor: Instructor | null;
}

/** Days from the group's start, for course B; A is shorter, C longer (`PACE`). */
const MILESTONES = { practice: 40, internalExam: 100, stateExam: 115, graduation: 135 } as const;
const PACE: Record<Course, number> = { A: 0.7, B: 1, C: 1.2 };
const SHARE: Record<Course, number> = { B: 0.85, A: 0.09, C: 0.06 };
const STUDENTS_PER_GROUP: Record<Course, number> = { B: 18, A: 14, C: 12 };

export type Milestones = Record<keyof typeof MILESTONES, Day>;

/** The days a student's course reaches each stage. */
export function milestones(student: Student): Milestones {
  const pace = PACE[student.group.course];
  const at = (days: number) => student.group.start + Math.round(days * pace);
  return { practice: at(MILESTONES.practice), internalExam: at(MILESTONES.internalExam), stateExam: at(MILESTONES.stateExam), graduation: at(MILESTONES.graduation) };
}

export function makeGroups(demo: Demo, branches: Branch[], students: number): Group[] {
  const groups: Group[] = [];
  for (const course of ['B', 'A', 'C'] as const) {
    const count = Math.max(course === 'B' ? 3 : 1, Math.round((students * SHARE[course]) / STUDENTS_PER_GROUP[course]));
    // From ten days into the year to ten days after now, so some group has not started yet.
    const first = demo.firstDay + 10;
    const span = demo.calendar.today + 10 - first;
    for (let n = 1; n <= count; n++) {
      const start = demo.calendar.workday(first + Math.round((span * (n - 1)) / Math.max(1, count - 1)) - (count === 1 ? 0 : demo.random.int(0, 3)));
      const branch = course === 'B' ? branches[(n - 1) % branches.length]! : branches[0]!;
      groups.push({ course, start, record: { id: `gr-${course.toLowerCase()}-${pad(n, 2)}`, name: `Группа ${course}-${pad(n, 2)}`, category: course, branch_id: branch.id } });
    }
  }
  return groups;
}

export function makeStudents(demo: Demo, groups: Group[], staff: Staff, count: number): Student[] {
  const { random } = demo;
  const byCourse = (course: Course) => groups.filter((g) => g.course === course);
  const seats = new Map<Course, number>();
  const drafts = Array.from({ length: count }, () => {
    const course = random.weighted(SHARE);
    const options = byCourse(course);
    // Round-robin keeps the groups of a course about the same size.
    const taken = seats.get(course) ?? 0;
    seats.set(course, taken + 1);
    const group = options[taken % options.length]!;
    const enrolledDay = Math.max(demo.firstDay, Math.min(group.start - random.int(1, 20), demo.calendar.today - 1));
    return { group, enrolledDay, createdAt: timeOn(demo, enrolledDay, clock(9), clock(19)) };
  });
  drafts.sort((a, b) => a.createdAt.localeCompare(b.createdAt));

  const students = drafts.map(({ group, enrolledDay, createdAt }, i): Student => {
    const sex: Sex = group.course === 'B' ? (random.chance(0.5) ? 'm' : 'f') : random.chance(0.85) ? 'm' : 'f';
    const who = person(random, sex);
    const record: StudentRecord = {
      id: `st-${pad(i + 1, 4)}`,
      full_name: who.fullName,
      phone: who.phone,
      email: who.email,
      category: group.course,
      status: 'enrolled',
      group_id: group.record.id,
      branch_id: random.chance(0.03) ? null : (group.record.branch_id ?? null),
      birth_date: random.chance(0.05) ? null : demo.calendar.date(enrolledDay - random.int(17 * 365 + 30, (group.course === 'B' ? 50 : 40) * 365)),
      instructor_id: null,
      transmission: group.course === 'B' ? (random.chance(0.3) ? 'automatic' : 'manual') : 'manual',
      created_at: createdAt,
    };
    return { record, group, enrolledDay, instructor: null };
  });
  for (const student of students) student.record.status = naturalStatus(demo, student);
  coverEveryStatus(demo, students);
  for (const student of students) assignInstructor(demo, student, staff);
  return students;
}

function age(demo: Demo, student: Student): number {
  return demo.calendar.today - student.group.start;
}

function naturalStatus(demo: Demo, student: Student): Status {
  const { random, calendar } = demo;
  const today = calendar.today;
  const stage = milestones(student);
  if (today < student.group.start) return 'enrolled';
  if (age(demo, student) > 30 && random.chance(0.05)) return 'expelled';
  if (age(demo, student) > 20 && random.chance(0.04)) return 'on_hold';
  if (today < stage.practice) return 'learning_theory';
  if (today < stage.internalExam) return 'learning_practice';
  if (today < stage.stateExam) return 'internal_exam';
  // Some fail the state exam the first time and are still at it.
  if (today < stage.graduation || random.chance(0.08)) return 'state_exam';
  return 'graduated';
}

/** Typical group age (days) for each status, to pick the likeliest student when one must be moved. */
const TYPICAL_AGE: Record<Status, number> = { enrolled: -5, learning_theory: 20, learning_practice: 70, internal_exam: 107, state_exam: 125, graduated: 200, expelled: 60, on_hold: 60 };

/**
 * Small demo schools could miss a status by chance; every one must be there to be tried.
 * A missing status goes to the student whose course is closest to it, taken from a status
 * that has students to spare.
 */
function coverEveryStatus(demo: Demo, students: Student[]): void {
  for (const status of STUDENT_STATUSES) {
    const counts = new Map<Status, number>();
    for (const s of students) counts.set(s.record.status, (counts.get(s.record.status) ?? 0) + 1);
    if (counts.has(status)) continue;
    const candidates = students.filter((s) => counts.get(s.record.status)! > 1);
    if (candidates.length === 0) return;
    const distance = (s: Student) => Math.abs(age(demo, s) - TYPICAL_AGE[status]);
    candidates.sort((a, b) => distance(a) - distance(b));
    candidates[0]!.record.status = status;
  }
}

const HAS_DRIVING_INSTRUCTOR = new Set<Status>(['learning_practice', 'internal_exam', 'state_exam', 'graduated', 'expelled', 'on_hold']);

/** The driving instructor: the right category and, for cars, the gearbox the student chose. */
function assignInstructor(demo: Demo, student: Student, staff: Staff): void {
  const { random } = demo;
  if (!HAS_DRIVING_INSTRUCTOR.has(student.record.status) && !random.chance(0.4)) return;
  const fit = staff.instructors.filter((i) => i.record.is_active && i.vehicle && i.speciality === student.group.course);
  const sameGearbox = fit.filter((i) => i.vehicle!.transmission === student.record.transmission);
  const instructor = random.pick(sameGearbox.length > 0 ? sameGearbox : fit);
  student.instructor = instructor;
  student.record.instructor_id = instructor.record.id;
}
