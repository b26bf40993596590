/**
 * The demo generator: deterministic for a seed, a valid import file for any school size
 * and time zone, and a believable year of a driving school.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { generateSchoolData } from '../../src/demo/generate.js';
import {
  CATEGORIES,
  EXPENSE_CATEGORIES,
  LEAD_SOURCES,
  LEAD_STATUSES,
  LESSON_STATUSES,
  LESSON_TYPES,
  PAYMENT_METHODS,
  STUDENT_STATUSES,
} from '../../src/domain/enums.js';
import { importData, type ImportFile } from '../../src/importer/index.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { addSchool, rowCounts, snapshot } from '../importer/helpers.js';

const NOW = new Date('2026-03-15T10:00:00Z');
const DAY = 86_400_000;

function demo(options: Partial<Parameters<typeof generateSchoolData>[0]> = {}): ImportFile {
  return generateSchoolData({ seed: 7, students: 300, now: NOW, timezone: 'Europe/Moscow', ...options });
}

const distinct = <T>(values: T[]): T[] => [...new Set(values)].sort();

/** Local wall-clock minutes after midnight of a UTC timestamp in `timeZone`. */
function localMinutes(timestamp: string, timeZone: string): number {
  const parts = new Intl.DateTimeFormat('en-GB', { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).formatToParts(new Date(timestamp));
  const get = (type: string) => Number(parts.find((p) => p.type === type)!.value);
  return get('hour') * 60 + get('minute');
}

describe('demo generator: determinism and shape', () => {
  it('gives the same file for the same seed and now, another for another seed', () => {
    assert.deepEqual(demo(), demo());
    assert.notDeepEqual(demo({ seed: 8 }), demo());
  });

  it('fills every array, scaled to the number of students', () => {
    const file = demo();
    assert.equal(file.students!.length, 300);
    assert.equal(file.contracts!.length, 300);
    assert.deepEqual(distinct(file.contracts!.map((c) => c.student_id)), distinct(file.students!.map((s) => s.id)), 'one contract per student');
    assert.ok(file.branches!.length >= 2 && file.branches!.length <= 3);
    assert.ok(file.instructors!.length >= 8 && file.instructors!.length <= 20);
    assert.ok(file.lessons!.length >= 3 * 300, 'several lessons per student');
    assert.ok(file.leads!.length > 0 && file.payments!.length > 300 && file.vehicles!.length > 0 && file.groups!.length > 0);
  });

  it('spreads students over every status, most of them in category B', () => {
    const students = demo().students!;
    assert.deepEqual(distinct(students.map((s) => s.status)), [...STUDENT_STATUSES].sort());
    const inB = students.filter((s) => s.category === 'B').length;
    assert.ok(inB > students.length / 2, `${inB} of ${students.length} in B`);
    assert.ok(students.some((s) => s.category === 'A') && students.some((s) => s.category === 'C'));
    assert.ok(students.filter((s) => s.status === 'learning_practice').length >= 10);
    for (const s of students) {
      assert.match(s.phone, /^\+79\d{9}$/);
      assert.match(s.full_name, /^[А-ЯЁ][а-яё-]+ [А-ЯЁ][а-яё]+ [А-ЯЁ][а-яё]+$/);
    }
  });

  it('has one inactive instructor and a fleet with paperwork to watch', () => {
    const file = demo();
    assert.equal(file.instructors!.filter((i) => !i.is_active).length, 1);
    const today = NOW.toISOString().slice(0, 10);
    const in30Days = new Date(NOW.getTime() + 30 * DAY).toISOString().slice(0, 10);
    const until = (date: string | null | undefined) => date ?? '';
    const vehicles = file.vehicles!;
    assert.equal(vehicles.filter((v) => v.insurance_valid_until && until(v.insurance_valid_until) < today).length, 1, 'one expired policy');
    assert.ok(vehicles.filter((v) => until(v.insurance_valid_until) >= today && until(v.insurance_valid_until) <= in30Days).length >= 2);
    assert.ok(vehicles.filter((v) => until(v.inspection_valid_until) >= today && until(v.inspection_valid_until) <= in30Days).length >= 2);
    assert.ok(vehicles.some((v) => v.status === 'repair'));
    // Instructor and vehicle point at each other.
    for (const i of file.instructors!) {
      if (i.vehicle_id) assert.equal(vehicles.find((v) => v.id === i.vehicle_id)!.instructor_id, i.id);
    }
  });

  it('schedules lessons of every type between 08:00 and 20:00 local time: done in the past, planned ahead', () => {
    for (const timezone of ['Europe/Moscow', 'Asia/Yekaterinburg', 'Europe/Berlin']) {
      const lessons = demo({ timezone }).lessons!;
      assert.deepEqual(distinct(lessons.map((l) => l.type)), [...LESSON_TYPES].sort());
      assert.deepEqual(distinct(lessons.map((l) => l.status)), [...LESSON_STATUSES].sort());
      for (const l of lessons) {
        assert.ok(localMinutes(l.starts_at, timezone) >= 8 * 60, `${l.id} starts ${l.starts_at} in ${timezone}`);
        assert.ok(localMinutes(l.ends_at, timezone) <= 20 * 60, `${l.id} ends ${l.ends_at} in ${timezone}`);
        assert.equal(l.status === 'planned', Date.parse(l.starts_at) > NOW.getTime(), `${l.id} ${l.status} at ${l.starts_at}`);
        assert.ok(Date.parse(l.starts_at) > NOW.getTime() - 366 * DAY);
      }
      assert.ok(lessons.some((l) => l.type === 'driving' && Date.parse(l.ends_at) - Date.parse(l.starts_at) === 90 * 60_000));
    }
  });

  it('has contracts of 35000-65000, instalments by every method, refunds and payments without contract', () => {
    const file = demo();
    for (const c of file.contracts!) assert.ok(Number(c.price) >= 35_000 && Number(c.price) <= 65_000, c.price);
    const payments = file.payments!;
    assert.deepEqual(distinct(payments.map((p) => p.method)), [...PAYMENT_METHODS].sort());
    assert.ok(payments.filter((p) => p.kind === 'refund').length >= 2);
    assert.ok(payments.some((p) => !p.contract_id));
    assert.ok(payments.every((p) => p.currency === 'RUB'));
  });

  it('has leads from every source in every status, and expenses in every category every month', () => {
    const file = demo();
    assert.deepEqual(distinct(file.leads!.map((l) => l.source)), [...LEAD_SOURCES].sort());
    assert.deepEqual(distinct(file.leads!.map((l) => l.status)), [...LEAD_STATUSES].sort());
    const months = distinct(file.expenses!.map((e) => e.spent_at.slice(0, 7)));
    assert.equal(months.length, 12);
    for (const month of months) {
      const categories = distinct(file.expenses!.filter((e) => e.spent_at.startsWith(month)).map((e) => e.category));
      assert.deepEqual(categories, [...EXPENSE_CATEGORIES].sort(), month);
    }
  });

  it('dates nothing after now except planned lessons, and nothing more than a year back', () => {
    const file = demo();
    const stamps = [
      ...file.students!.map((s) => s.created_at),
      ...file.payments!.flatMap((p) => [p.paid_at, p.created_at]),
      ...file.lessons!.map((l) => l.created_at),
      ...file.leads!.map((l) => l.created_at),
      ...file.expenses!.map((e) => e.spent_at),
      ...file.contracts!.map((c) => c.created_at),
    ];
    for (const at of stamps) {
      assert.ok(Date.parse(at) < NOW.getTime(), at);
      assert.ok(Date.parse(at) >= NOW.getTime() - 366 * DAY, at);
    }
  });

  it('covers every status and category mix even for a tiny school', () => {
    const file = demo({ students: 12, seed: 3 });
    assert.deepEqual(distinct(file.students!.map((s) => s.status)), [...STUDENT_STATUSES].sort());
    assert.ok(file.students!.every((s) => (CATEGORIES as readonly string[]).includes(s.category)));
  });
});

describe('demo generator: the output imports', () => {
  let store: TestStore;
  before(async () => {
    store = await createTestStore();
  });
  after(async () => {
    await store.close();
  });

  it('imports 300 students cleanly, and again to the same state', async (t) => {
    const school = await addSchool(store.db);
    const file = demo();
    const started = performance.now();
    const result = await importData(store.db, school, file);
    t.diagnostic(`300-student demo import: ${Math.round(performance.now() - started)} ms on ${store.dialect}`);
    assert.ok(result.ok, JSON.stringify(result.ok ? null : result.errors.slice(0, 5)));
    const counts = await rowCounts(store.db, school);
    for (const [array, records] of Object.entries(file)) assert.equal(counts[array as keyof typeof counts], (records as unknown[]).length, array);
    const once = await snapshot(store.db, school);
    const again = await importData(store.db, school, file);
    assert.ok(result.ok && again.ok);
    assert.deepEqual([again.counts, again.changes, again.seq], [result.counts, 0, null], 'the same data again changes nothing');
    assert.deepEqual(await snapshot(store.db, school), once);
  });

  for (const [timezone, students, seed] of [
    ['Asia/Yekaterinburg', 180, 2],
    ['Europe/Berlin', 40, 11],
    ['America/New_York', 8, 5],
  ] as const) {
    it(`imports a ${students}-student school in ${timezone}`, async () => {
      const school = await addSchool(store.db, { timezone });
      const result = await importData(store.db, school, demo({ timezone, students, seed }));
      assert.ok(result.ok, JSON.stringify(result.ok ? null : result.errors.slice(0, 5)));
    });
  }

  it('uses the currency it is given', async () => {
    const school = await addSchool(store.db, { currency: 'KZT' });
    const result = await importData(store.db, school, demo({ students: 30, currency: 'KZT' }));
    assert.ok(result.ok, JSON.stringify(result.ok ? null : result.errors.slice(0, 5)));
  });
});
