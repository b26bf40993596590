/**
 * Lessons: group theory classes for every group, and each student's own lessons as far as
 * their course has got: theory consultations, autodrome and city driving with their
 * instructor's vehicle, the school's internal exam. Past lessons are mostly completed
 * (some cancelled or missed), future ones planned; all fall between 08:00 and 20:00 in
 * the school's time zone, Monday to Saturday.
 */
import type { RecordOf } from '../importer/schema.js';
import type { Day } from './calendar.js';
import { clock, pad, type Demo } from './context.js';
import type { Instructor, Staff } from './staff.js';
import { milestones, type Group, type Student } from './students.js';

type Lesson = RecordOf<'lessons'>;
type LessonType = Lesson['type'];

/** Length and the local start times allowed, so every lesson ends by 20:00. */
const FORMAT: Record<LessonType | 'group_theory', { minutes: number; earliest: number; latest: number }> = {
  driving: { minutes: 90, earliest: clock(8), latest: clock(18, 30) },
  autodrome: { minutes: 60, earliest: clock(8), latest: clock(19) },
  theory: { minutes: 45, earliest: clock(9), latest: clock(19, 15) },
  internal_exam: { minutes: 60, earliest: clock(9), latest: clock(16) },
  group_theory: { minutes: 90, earliest: clock(18), latest: clock(18, 30) },
};

/** A student's own lessons by status: how many of each kind are behind them, and how many booked ahead. */
interface Plan {
  theory: [number, number];
  autodrome: [number, number];
  driving: [number, number];
  internalExamDone: boolean;
  plannedDriving: [number, number];
  plannedExam: boolean;
}

const NONE: [number, number] = [0, 0];
const PLANS: Record<Student['record']['status'], Plan> = {
  enrolled: { theory: NONE, autodrome: NONE, driving: NONE, internalExamDone: false, plannedDriving: NONE, plannedExam: false },
  learning_theory: { theory: [1, 2], autodrome: NONE, driving: NONE, internalExamDone: false, plannedDriving: NONE, plannedExam: false },
  learning_practice: { theory: [2, 3], autodrome: [1, 2], driving: [2, 8], internalExamDone: false, plannedDriving: [1, 3], plannedExam: false },
  internal_exam: { theory: [2, 3], autodrome: [2, 3], driving: [8, 12], internalExamDone: false, plannedDriving: NONE, plannedExam: true },
  state_exam: { theory: [2, 3], autodrome: [2, 3], driving: [10, 14], internalExamDone: true, plannedDriving: [0, 1], plannedExam: false },
  graduated: { theory: [2, 3], autodrome: [2, 3], driving: [10, 14], internalExamDone: true, plannedDriving: NONE, plannedExam: false },
  expelled: { theory: [1, 2], autodrome: [0, 1], driving: [0, 3], internalExamDone: false, plannedDriving: NONE, plannedExam: false },
  on_hold: { theory: [1, 2], autodrome: [0, 2], driving: [1, 5], internalExamDone: false, plannedDriving: NONE, plannedExam: false },
};

interface Slot {
  type: LessonType;
  day: Day;
  format: (typeof FORMAT)[keyof typeof FORMAT];
  instructor: Instructor;
  studentId: string | null;
  groupId: string | null;
  branchId: string | null;
}

export function makeLessons(demo: Demo, groups: Group[], students: Student[], staff: Staff): Lesson[] {
  const slots: Slot[] = [...groups.flatMap((g) => groupTheory(demo, g, staff)), ...students.flatMap((s) => ownLessons(demo, s, staff))];
  slots.sort((a, b) => a.day - b.day);
  return slots.map((slot, i) => toLesson(demo, slot, `ls-${pad(i + 1, 6)}`));
}

function theoryTeacher(staff: Staff, branchId: string | null | undefined): Instructor {
  const teachers = staff.instructors.filter((i) => i.speciality === 'theory' && i.record.is_active);
  return teachers.find((t) => t.record.branch_id === branchId) ?? teachers[0]!;
}

/** Two evening classes a week for eight weeks (shorter for A, longer for C). */
function groupTheory(demo: Demo, group: Group, staff: Staff): Slot[] {
  const branchId = group.record.branch_id ?? null;
  const teacher = theoryTeacher(staff, branchId);
  const count = group.course === 'A' ? 10 : group.course === 'C' ? 18 : 16;
  const days = Array.from({ length: count }, (_, n) => demo.calendar.workday(group.start + Math.floor(n * 3.5)));
  // Today's class is left out: whether it has happened yet depends on the hour.
  return days
    .filter((day) => day !== demo.calendar.today)
    .map((day) => ({ type: 'theory', day, format: FORMAT.group_theory, instructor: teacher, studentId: null, groupId: group.record.id, branchId }));
}

function ownLessons(demo: Demo, student: Student, staff: Staff): Slot[] {
  const { random, calendar } = demo;
  const plan = PLANS[student.record.status];
  const stage = milestones(student);
  const { today } = calendar;
  const yesterday = today - 1;
  const driver = student.instructor;
  const slots: Slot[] = [];
  const add = (type: LessonType, wanted: Day, instructor: Instructor) => {
    const day = calendar.workday(wanted);
    // A past lesson that workday() moved onto today or later is dropped: the past stays past.
    if (wanted < today && day >= today) return;
    slots.push({ type, day, format: FORMAT[type], instructor, studentId: student.record.id, groupId: student.group.record.id, branchId: student.record.branch_id ?? null });
  };
  const count = ([min, max]: [number, number]) => random.int(min, max);

  const teacher = theoryTeacher(staff, student.group.record.branch_id);
  for (const day of spread(demo, count(plan.theory), Math.max(student.group.start, student.enrolledDay + 1), Math.min(stage.internalExam, yesterday))) {
    add('theory', day, teacher);
  }
  if (!driver) return slots;
  const practiceEnd = Math.min(stage.internalExam - 2, yesterday);
  for (const day of spread(demo, count(plan.autodrome), stage.practice, Math.min(stage.practice + 14, practiceEnd))) add('autodrome', day, driver);
  for (const day of spread(demo, count(plan.driving), stage.practice + 10, practiceEnd)) add('driving', day, driver);
  if (plan.internalExamDone) add('internal_exam', Math.min(stage.internalExam, yesterday - 1), driver);
  if (plan.plannedExam) add('internal_exam', today + random.int(2, 10), driver);
  for (let n = count(plan.plannedDriving); n > 0; n--) add('driving', today + random.int(1, 14), driver);
  return slots;
}

/** `count` days spread evenly over [from, to] with some jitter; none when the range is empty. */
function spread(demo: Demo, count: number, from: Day, to: Day): Day[] {
  if (count <= 0 || to < from) return [];
  const width = to - from + 1;
  return Array.from({ length: count }, (_, n) => from + Math.min(width - 1, Math.floor(((n + demo.random.next()) * width) / count)));
}

function toLesson(demo: Demo, slot: Slot, id: string): Lesson {
  const { random, calendar } = demo;
  const { minutes, earliest, latest } = slot.format;
  const start = calendar.at(slot.day, earliest + 30 * random.int(0, Math.floor((latest - earliest) / 30)));
  const end = start + minutes * 60_000;
  const future = slot.day > calendar.today;
  // Bookings are made a few days ahead; a future lesson was booked before now.
  const booked = Math.min(start - random.int(1, 7) * 86_400_000 - random.int(0, 600) * 60_000, calendar.now - random.int(10, 2_000) * 60_000);
  const usesVehicle = slot.type !== 'theory';
  return {
    id,
    type: slot.type,
    status: future ? 'planned' : pastStatus(demo, slot.type),
    starts_at: calendar.timestamp(start),
    ends_at: calendar.timestamp(end),
    instructor_id: slot.instructor.record.id,
    student_id: slot.studentId,
    group_id: slot.groupId,
    vehicle_id: usesVehicle ? (slot.instructor.vehicle?.id ?? null) : null,
    branch_id: slot.branchId,
    created_at: calendar.timestamp(booked),
  };
}

function pastStatus(demo: Demo, type: LessonType): Lesson['status'] {
  if (type === 'internal_exam') return 'completed';
  const roll = demo.random.next();
  if (roll < 0.07) return 'cancelled';
  if (type !== 'theory' && roll < 0.11) return 'no_show';
  return 'completed';
}
