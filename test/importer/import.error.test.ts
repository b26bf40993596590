/**
 * A bad file is refused as a value naming array, index and field, and nothing is written:
 * not into an empty school, and nothing changed in a school that already has data.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { checkRecord } from '../../src/importer/validate.js';
import { importData, importFile, MAX_ERRORS, type ImportError, type ImportFile } from '../../src/importer/index.js';
import { createTestStore, refuseInserts, type TestStore } from '../helpers/store.js';
import { NOTHING, addSchool, rowCounts, sampleFile, snapshot } from './helpers.js';

/** Makes a record of the sample file writable as plain JSON, the way a bad file would arrive. */
type Json = Record<string, unknown>;
const at = (file: ImportFile, array: keyof ImportFile, index: number): Json => file[array]![index] as Json;

interface Case {
  name: string;
  /** Returns the input to import; may edit and return the given sample file. */
  input: (file: ImportFile) => unknown;
  expected: Omit<ImportError, 'reason'> & { reason: RegExp };
}

const thisYear = new Date().getUTCFullYear();

const CASES: Case[] = [
  { name: 'a file that is not an object', input: () => [], expected: { array: null, index: null, field: null, reason: /JSON object/ } },
  { name: 'an unknown array', input: (f) => ({ ...f, teachers: [] }), expected: { array: 'teachers', index: null, field: null, reason: /not an array of the import format/ } },
  { name: 'an array that is not an array', input: (f) => ({ ...f, leads: { id: 'x' } }), expected: { array: 'leads', index: null, field: null, reason: /must be an array/ } },
  { name: 'null instead of an array', input: (f) => ({ ...f, branches: null }), expected: { array: 'branches', index: null, field: null, reason: /must be an array/ } },
  { name: 'a record that is not an object', input: (f) => ({ ...f, groups: [f.groups![0], 'gr-2'] }), expected: { array: 'groups', index: 1, field: null, reason: /must be an object/ } },
  { name: 'an unknown field', input: (f) => (at(f, 'students', 1).nickname = 'Аня', f), expected: { array: 'students', index: 1, field: 'nickname', reason: /not a field of students/ } },
  // Names of Object.prototype's members are unknown fields too, not fields whose rule is unknown.
  { name: 'a field named constructor', input: (f) => (at(f, 'branches', 0)['constructor'] = 'x', f), expected: { array: 'branches', index: 0, field: 'constructor', reason: /not a field of branches/ } },
  { name: 'a field named __proto__', input: (f) => (Object.defineProperty(at(f, 'leads', 0), '__proto__', { value: {}, enumerable: true }), f), expected: { array: 'leads', index: 0, field: '__proto__', reason: /not a field of leads/ } },
  { name: 'a computed contract field', input: (f) => (at(f, 'contracts', 0).paid = '34500.25', f), expected: { array: 'contracts', index: 0, field: 'paid', reason: /computed/ } },
  { name: 'a computed contract debt', input: (f) => (at(f, 'contracts', 1).debt = '0.00', f), expected: { array: 'contracts', index: 1, field: 'debt', reason: /computed/ } },
  { name: 'a computed lesson duration', input: (f) => (at(f, 'lessons', 0).duration_minutes = 90, f), expected: { array: 'lessons', index: 0, field: 'duration_minutes', reason: /computed/ } },
  { name: 'a missing required field', input: (f) => (delete at(f, 'students', 0).email, f), expected: { array: 'students', index: 0, field: 'email', reason: /is required/ } },
  { name: 'null in a required field', input: (f) => (at(f, 'lessons', 1).instructor_id = null, f), expected: { array: 'lessons', index: 1, field: 'instructor_id', reason: /^must be an id/ } },
  { name: 'an unknown status', input: (f) => (at(f, 'students', 0).status = 'studying', f), expected: { array: 'students', index: 0, field: 'status', reason: /one of enrolled, learning_theory/ } },
  { name: 'an unknown category in a nullable field', input: (f) => (at(f, 'leads', 1).category = 'Z', f), expected: { array: 'leads', index: 1, field: 'category', reason: /or null$/ } },
  { name: 'a malformed id', input: (f) => (at(f, 'branches', 1).id = 'br 2', f), expected: { array: 'branches', index: 1, field: 'id', reason: /1-64 characters/ } },
  { name: 'an id too long', input: (f) => (at(f, 'expenses', 0).id = 'x'.repeat(65), f), expected: { array: 'expenses', index: 0, field: 'id', reason: /1-64 characters/ } },
  { name: 'a duplicate id', input: (f) => (at(f, 'payments', 2).id = 'pm-1', f), expected: { array: 'payments', index: 2, field: 'id', reason: /repeats the id "pm-1" of payments\[0\]/ } },
  { name: 'an empty name', input: (f) => (at(f, 'branches', 0).name = '', f), expected: { array: 'branches', index: 0, field: 'name', reason: /non-empty string/ } },
  { name: 'a malformed e-mail', input: (f) => (at(f, 'students', 1).email = 'anna at yandex', f), expected: { array: 'students', index: 1, field: 'email', reason: /e-mail/ } },
  { name: 'a malformed phone', input: (f) => (at(f, 'instructors', 0).phone = 'call me', f), expected: { array: 'instructors', index: 0, field: 'phone', reason: /phone number/ } },
  { name: 'an empty category list', input: (f) => (at(f, 'instructors', 0).categories = [], f), expected: { array: 'instructors', index: 0, field: 'categories', reason: /non-empty array of distinct categories/ } },
  { name: 'a repeated category', input: (f) => (at(f, 'instructors', 0).categories = ['B', 'B'], f), expected: { array: 'instructors', index: 0, field: 'categories', reason: /distinct/ } },
  // Records under the 1 MiB limit that took minutes each when every rule of the schema ran
  // (the e-mail's pattern backtracked; the repeats were listed one by one).
  { name: 'a long e-mail', input: (f) => (at(f, 'students', 1).email = `a@${'a.'.repeat(400_000)} `, f), expected: { array: 'students', index: 1, field: 'email', reason: /e-mail/ } },
  { name: 'a long list of one category', input: (f) => (at(f, 'instructors', 0).categories = Array<string>(262_144).fill('B'), f), expected: { array: 'instructors', index: 0, field: 'categories', reason: /distinct/ } },
  { name: 'an unknown category in a list', input: (f) => (at(f, 'instructors', 1).categories = ['A', 'Z'], f), expected: { array: 'instructors', index: 1, field: 'categories', reason: /categories/ } },
  { name: 'a non-boolean flag', input: (f) => (at(f, 'instructors', 0).is_active = 1, f), expected: { array: 'instructors', index: 0, field: 'is_active', reason: /true or false/ } },
  { name: 'a timestamp without offset', input: (f) => (at(f, 'students', 0).created_at = '2025-09-01T12:00:00', f), expected: { array: 'students', index: 0, field: 'created_at', reason: /RFC 3339/ } },
  { name: 'a timestamp with fractional seconds', input: (f) => (at(f, 'payments', 0).paid_at = '2025-10-01T10:00:00.500Z', f), expected: { array: 'payments', index: 0, field: 'paid_at', reason: /whole seconds/ } },
  { name: 'an impossible timestamp', input: (f) => (at(f, 'lessons', 0).starts_at = '2025-02-29T09:00:00Z', f), expected: { array: 'lessons', index: 0, field: 'starts_at', reason: /RFC 3339/ } },
  { name: 'an impossible date', input: (f) => (at(f, 'students', 0).birth_date = '2001-02-30', f), expected: { array: 'students', index: 0, field: 'birth_date', reason: /real calendar date/ } },
  { name: 'a date-time where a date belongs', input: (f) => (at(f, 'contracts', 0).signed_on = '2025-09-01T00:00:00Z', f), expected: { array: 'contracts', index: 0, field: 'signed_on', reason: /YYYY-MM-DD/ } },
  { name: 'money as a number', input: (f) => (at(f, 'contracts', 0).price = 50000, f), expected: { array: 'contracts', index: 0, field: 'price', reason: /decimal string/ } },
  { name: 'money with three decimals', input: (f) => (at(f, 'payments', 1).amount = '15000.505', f), expected: { array: 'payments', index: 1, field: 'amount', reason: /two fraction digits/ } },
  { name: 'money with a thousands separator', input: (f) => (at(f, 'expenses', 0).amount = '90 000.00', f), expected: { array: 'expenses', index: 0, field: 'amount', reason: /decimal string/ } },
  { name: 'a negative price', input: (f) => (at(f, 'contracts', 0).price = '-1.00', f), expected: { array: 'contracts', index: 0, field: 'price', reason: /0 or more/ } },
  { name: 'a zero payment', input: (f) => (at(f, 'payments', 0).amount = '0.00', f), expected: { array: 'payments', index: 0, field: 'amount', reason: /greater than 0/ } },
  { name: 'a negative refund', input: (f) => (at(f, 'payments', 2).amount = '-500.25', f), expected: { array: 'payments', index: 2, field: 'amount', reason: /greater than 0/ } },
  { name: 'a NUL in a name', input: (f) => (at(f, 'students', 1).full_name = 'Ann\u0000a', f), expected: { array: 'students', index: 1, field: 'full_name', reason: /without NUL or unpaired surrogates/ } },
  { name: 'half a surrogate pair in a comment', input: (f) => (at(f, 'expenses', 0).comment = 'fuel \ud83d', f), expected: { array: 'expenses', index: 0, field: 'comment', reason: /without NUL or unpaired surrogates/ } },
  { name: 'a NUL in an e-mail address', input: (f) => (at(f, 'students', 0).email = 'a\u0000b@example.com', f), expected: { array: 'students', index: 0, field: 'email', reason: /e-mail address/ } },
  { name: 'a zero expense', input: (f) => (at(f, 'expenses', 1).amount = '0', f), expected: { array: 'expenses', index: 1, field: 'amount', reason: /greater than 0/ } },
  { name: 'a malformed currency', input: (f) => (at(f, 'payments', 0).currency = 'rub', f), expected: { array: 'payments', index: 0, field: 'currency', reason: /3 capital letters/ } },
  { name: 'another currency than the school', input: (f) => (at(f, 'expenses', 0).currency = 'USD', f), expected: { array: 'expenses', index: 0, field: 'currency', reason: /school's currency RUB/ } },
  { name: 'a lesson ending before it starts', input: (f) => (at(f, 'lessons', 0).ends_at = '2025-10-01T08:59:00+03:00', f), expected: { array: 'lessons', index: 0, field: 'ends_at', reason: /after starts_at/ } },
  { name: 'a lesson ending as it starts', input: (f) => (at(f, 'lessons', 1).ends_at = '2025-10-02T18:00:00+03:00', f), expected: { array: 'lessons', index: 1, field: 'ends_at', reason: /after starts_at/ } },
  { name: 'a lesson of 2^31 minutes (over what its duration is stored in)', input: (f) => (at(f, 'lessons', 0).ends_at = '6108-10-24T08:08:00Z', f), expected: { array: 'lessons', index: 0, field: 'ends_at', reason: /less than 2147483648 minutes after starts_at/ } },
  { name: 'insurance ending before it starts', input: (f) => (at(f, 'vehicles', 0).insurance_valid_until = '2025-05-31', f), expected: { array: 'vehicles', index: 0, field: 'insurance_valid_until', reason: /not be before/ } },
  { name: 'a vintage vehicle', input: (f) => (at(f, 'vehicles', 0).year = 1949, f), expected: { array: 'vehicles', index: 0, field: 'year', reason: /from 1950 to next year/ } },
  { name: 'a vehicle from the future', input: (f) => (at(f, 'vehicles', 0).year = thisYear + 2, f), expected: { array: 'vehicles', index: 0, field: 'year', reason: /from 1950 to next year/ } },
  { name: 'a fractional year', input: (f) => (at(f, 'vehicles', 0).year = 2020.5, f), expected: { array: 'vehicles', index: 0, field: 'year', reason: /integer year/ } },
  { name: 'a student in a missing group', input: (f) => (at(f, 'students', 1).group_id = 'gr-9', f), expected: { array: 'students', index: 1, field: 'group_id', reason: /groups "gr-9".*neither in this file nor stored/ } },
  { name: 'a group in a missing branch', input: (f) => (at(f, 'groups', 1).branch_id = 'br-9', f), expected: { array: 'groups', index: 1, field: 'branch_id', reason: /branches "br-9"/ } },
  { name: 'an instructor with a missing vehicle', input: (f) => (at(f, 'instructors', 1).vehicle_id = 'veh-9', f), expected: { array: 'instructors', index: 1, field: 'vehicle_id', reason: /vehicles "veh-9"/ } },
  { name: 'a vehicle with a missing instructor', input: (f) => (at(f, 'vehicles', 0).instructor_id = 'in-9', f), expected: { array: 'vehicles', index: 0, field: 'instructor_id', reason: /instructors "in-9"/ } },
  { name: 'a lesson with a missing vehicle', input: (f) => (at(f, 'lessons', 0).vehicle_id = 'veh-9', f), expected: { array: 'lessons', index: 0, field: 'vehicle_id', reason: /vehicles "veh-9"/ } },
  { name: 'a contract of a missing student', input: (f) => (at(f, 'contracts', 1).student_id = 'st-9', f), expected: { array: 'contracts', index: 1, field: 'student_id', reason: /students "st-9"/ } },
  { name: 'a payment on a missing contract', input: (f) => (at(f, 'payments', 3).contract_id = 'ct-9', f), expected: { array: 'payments', index: 3, field: 'contract_id', reason: /contracts "ct-9"/ } },
  { name: "a payment on another student's contract", input: (f) => (at(f, 'payments', 3).contract_id = 'ct-1', f), expected: { array: 'payments', index: 3, field: 'contract_id', reason: /belongs to student "st-1", not to "st-2"/ } },
  { name: 'a lead of a missing student', input: (f) => (at(f, 'leads', 1).student_id = 'st-9', f), expected: { array: 'leads', index: 1, field: 'student_id', reason: /students "st-9"/ } },
  { name: 'a reference to a record of another array', input: (f) => (at(f, 'students', 1).instructor_id = 'veh-1', f), expected: { array: 'students', index: 1, field: 'instructor_id', reason: /instructors "veh-1"/ } },
];

describe('importer: bad files', () => {
  let store: TestStore;
  before(async () => {
    store = await createTestStore();
  });
  after(async () => {
    await store.close();
  });

  for (const { name, input, expected } of CASES) {
    it(`refuses ${name} and writes nothing`, async () => {
      const school = await addSchool(store.db);
      const result = await importData(store.db, school, input(sampleFile()));
      assert.equal(result.ok, false);
      if (result.ok) return;
      const { reason, ...where } = expected;
      const match = result.errors.find((e) => e.array === where.array && e.index === where.index && e.field === where.field);
      assert.ok(match, `expected an error at ${JSON.stringify(where)}, got ${JSON.stringify(result.errors)}`);
      assert.match(match.reason, reason);
      assert.deepEqual(Object.keys(match).sort(), ['array', 'field', 'index', 'reason'], 'exactly the ImportError fields');
      assert.equal(result.errors.length, 1, `one mistake, one error: ${JSON.stringify(result.errors)}`);
      assert.deepEqual(await rowCounts(store.db, school), NOTHING);
    });
  }

  it('refuses an unknown school', async () => {
    const result = await importData(store.db, 'no-such-school', sampleFile());
    assert.deepEqual(result, { ok: false, errors: [{ array: null, index: null, field: null, reason: 'school "no-such-school" does not exist' }] });
  });

  it('reports every field of a record, and records of several arrays, in one answer', async () => {
    const school = await addSchool(store.db);
    const file = sampleFile();
    Object.assign(at(file, 'students', 0), { phone: '', status: 'x', created_at: 'yesterday' });
    at(file, 'expenses', 1).category = 'coffee';
    const result = await importData(store.db, school, file);
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.deepEqual(
      result.errors.map((e) => `${e.array}[${e.index}].${e.field}`),
      ['students[0].phone', 'students[0].status', 'students[0].created_at', 'expenses[1].category'],
    );
  });

  it('lists an id given twice after the errors found while reading, on both stores alike', async () => {
    const school = await addSchool(store.db);
    const file = sampleFile();
    at(file, 'payments', 2).id = 'pm-1';
    // Many records read after the payments, so that a store indexing them meanwhile (PostgreSQL) has done so.
    const leads: Json[] = Array.from({ length: 20_000 }, (_, i) => ({ ...at(file, 'leads', 0), id: `ldx-${i}` }));
    leads[leads.length - 1]!.status = 'x';
    // Read from a file, as the CLI does: PostgreSQL indexes an array while the reading goes on.
    const path = `${store.dataDir}/repeats.json`;
    fs.writeFileSync(path, JSON.stringify({ ...file, leads }));
    const result = await importFile(store.db, school, path);
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.deepEqual(
      result.errors.map((e) => `${e.array}[${e.index}].${e.field}`),
      ['leads[19999].status', 'payments[2].id'],
    );
  });

  it(`stops after ${MAX_ERRORS} errors`, async () => {
    const school = await addSchool(store.db);
    const students = Array.from({ length: 80 }, (_, i) => ({ id: `st-${i}` }));
    const result = await importData(store.db, school, { students });
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.equal(result.errors.length, MAX_ERRORS);
    assert.ok(result.errors.every((e) => e.array === 'students' && e.reason === 'is required'));
  });

  it('leaves stored data untouched when a later file is refused', async () => {
    const school = await addSchool(store.db);
    assert.equal((await importData(store.db, school, sampleFile())).ok, true);
    const before = await snapshot(store.db, school);
    const file = sampleFile();
    at(file, 'students', 0).full_name = 'Изменённое Имя';
    at(file, 'payments', 0).amount = '999999.00';
    at(file, 'lessons', 1).group_id = 'gr-9';
    const result = await importData(store.db, school, file);
    assert.equal(result.ok, false);
    assert.deepEqual(await snapshot(store.db, school), before);
  });

  it('does not report a reference to a record that has errors of its own twice', async () => {
    const school = await addSchool(store.db);
    const file = sampleFile();
    at(file, 'groups', 0).category = 'Z';
    const result = await importData(store.db, school, file);
    assert.deepEqual(result, { ok: false, errors: [{ array: 'groups', index: 0, field: 'category', reason: result.ok ? '' : result.errors[0]!.reason }] });
  });
});

describe('importer: the rules of a phone and of text, one record at a time', () => {
  const lead = (fields: Record<string, unknown>) => ({ id: 'ld-1', full_name: 'Ann', phone: '+79161234567', email: null, category: null, source: 'website', status: 'new', student_id: null, created_at: '2026-01-01T00:00:00Z', ...fields });
  const problems = (fields: Record<string, unknown>) => checkRecord('leads', lead(fields), 'RUB').problems.map((p) => p.field);

  it('takes a phone of 5-32 characters of digits, spaces, ( ) - with at least one digit, and a leading +', () => {
    for (const phone of ['+1234', '12345', '(916) 123-45-67', '+7 (916) 123-45-67', '9'.repeat(32), `+${'9'.repeat(31)}`]) assert.deepEqual(problems({ phone }), [], phone);
    for (const phone of ['1234', '+123', '9'.repeat(33), `+${'9'.repeat(32)}`, '(---)', '12+345', '123 45 x', '++12345']) assert.deepEqual(problems({ phone }), ['phone'], phone);
  });

  it('takes any Unicode text but no NUL and no half of a surrogate pair', () => {
    for (const full_name of ['Иванов Иван', 'Ann 🚗', 'tab\tand\nnew line']) assert.deepEqual(problems({ full_name }), [], full_name);
    for (const full_name of ['\u0000', 'Ann\u0000', 'Ann \ud83d', '\ude97 Ann', '\ude97\ud83d']) assert.deepEqual(problems({ full_name }), ['full_name'], JSON.stringify(full_name));
  });
});

describe('importer: a database failure midway', () => {
  let store: TestStore;
  before(async () => {
    store = await createTestStore();
    // Lessons are written after branches, groups, students, ...: failing there shows the
    // rows already sent in the same transaction are rolled back.
    await refuseInserts(store, 'lessons');
  });
  after(async () => {
    await store.close();
  });

  it('throws and leaves nothing half-written', async () => {
    const school = await addSchool(store.db);
    await assert.rejects(importData(store.db, school, sampleFile()), /lessons refused/);
    assert.deepEqual(await rowCounts(store.db, school), NOTHING);
  });
});
