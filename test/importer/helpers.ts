/**
 * Shared pieces of the importer and demo tests: a school row, a small valid import file
 * that touches every array and every kind of field, and views of what a school has stored.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.js';
import { ARRAY_NAMES, type ArrayName, type ImportFile } from '../../src/importer/index.js';

/** Inserts a school with a fresh id, so every test has its own tenant in the shared store. */
export async function addSchool(db: Kysely<Database>, options: { currency?: string; timezone?: string } = {}): Promise<string> {
  const id = `school-${randomBytes(5).toString('hex')}`;
  await db
    .insertInto('schools')
    .values({ id, name: `Автошкола ${id}`, plan: 'VIP', timezone: options.timezone ?? 'Europe/Moscow', currency: options.currency ?? 'RUB', created_at: '2025-01-01T00:00:00Z' })
    .execute();
  return id;
}

/**
 * A small valid file. Contract ct-1 has 20000.00 + 15000.50 paid and 500.25 refunded, so
 * paid_minor = 3450025; pm-4 has no contract. Timestamps carry offsets on purpose.
 */
export function sampleFile(): ImportFile {
  return {
    branches: [
      { id: 'br-1', name: 'Центральный филиал' },
      { id: 'br-2', name: 'Северный филиал' },
    ],
    groups: [
      { id: 'gr-1', name: 'Группа B-01', category: 'B', branch_id: 'br-1' },
      { id: 'gr-2', name: 'Группа A-01', category: 'A' },
    ],
    students: [
      {
        id: 'st-1',
        full_name: 'Иванов Иван Иванович',
        phone: '+79161234567',
        email: 'ivanov@mail.ru',
        category: 'B',
        status: 'learning_practice',
        group_id: 'gr-1',
        branch_id: 'br-1',
        birth_date: '2001-05-17',
        instructor_id: 'in-1',
        transmission: 'manual',
        created_at: '2025-09-01T12:00:00+03:00',
      },
      {
        id: 'st-2',
        full_name: 'Петрова Анна Сергеевна',
        phone: '+7 (926) 765-43-21',
        email: 'anna.petrova@yandex.ru',
        category: 'A',
        status: 'enrolled',
        group_id: 'gr-2',
        branch_id: null,
        created_at: '2025-09-02T09:30:00Z',
      },
    ],
    instructors: [
      {
        id: 'in-1',
        full_name: 'Сидоров Пётр Николаевич',
        phone: '+79031112233',
        email: null,
        categories: ['B', 'C'],
        is_active: true,
        branch_id: 'br-1',
        vehicle_id: 'veh-1',
        hired_on: '2018-04-01',
        created_at: '2025-01-10T08:00:00Z',
      },
      {
        id: 'in-2',
        full_name: 'Козлов Олег Игоревич',
        phone: '+79035556677',
        categories: ['A'],
        is_active: false,
        created_at: '2025-01-10T08:05:00Z',
      },
    ],
    vehicles: [
      {
        id: 'veh-1',
        plate_number: 'А123ВС77',
        brand: 'Lada',
        model: 'Vesta',
        year: 2021,
        category: 'B',
        transmission: 'manual',
        status: 'active',
        instructor_id: 'in-1',
        branch_id: 'br-1',
        insurance_policy_number: 'ХХХ 0123456789',
        insurance_valid_from: '2025-06-01',
        insurance_valid_until: '2026-05-31',
        inspection_valid_until: '2026-02-28',
        created_at: '2025-01-10T08:00:00Z',
      },
    ],
    contracts: [
      {
        id: 'ct-1',
        number: 'ДОГ-2025-0001',
        student_id: 'st-1',
        category: 'B',
        status: 'active',
        signed_on: '2025-09-01',
        price: '50000.00',
        currency: 'RUB',
        created_at: '2025-09-01T12:00:00+03:00',
      },
      { id: 'ct-2', number: 'ДОГ-2025-0002', student_id: 'st-2', category: 'A', status: 'active', signed_on: '2025-09-02', price: '0', currency: 'RUB', created_at: '2025-09-02T09:30:00Z' },
    ],
    payments: [
      { id: 'pm-1', student_id: 'st-1', contract_id: 'ct-1', kind: 'payment', method: 'card', amount: '20000.00', currency: 'RUB', paid_at: '2025-10-01T10:00:00+03:00', created_at: '2025-10-01T10:00:00+03:00' },
      { id: 'pm-2', student_id: 'st-1', contract_id: 'ct-1', kind: 'payment', method: 'cash', amount: '15000.5', currency: 'RUB', paid_at: '2025-11-01T10:00:00Z', created_at: '2025-11-01T10:00:00Z' },
      { id: 'pm-3', student_id: 'st-1', contract_id: 'ct-1', kind: 'refund', method: 'bank_transfer', amount: '500.25', currency: 'RUB', paid_at: '2025-11-02T10:00:00Z', created_at: '2025-11-02T10:00:00Z' },
      { id: 'pm-4', student_id: 'st-2', kind: 'payment', method: 'online', amount: '2500', currency: 'RUB', paid_at: '2025-11-03T10:00:00Z', created_at: '2025-11-03T10:00:00Z' },
    ],
    lessons: [
      {
        id: 'ls-1',
        type: 'driving',
        status: 'completed',
        starts_at: '2025-10-01T09:00:00+03:00',
        ends_at: '2025-10-01T10:30:00+03:00',
        instructor_id: 'in-1',
        student_id: 'st-1',
        group_id: 'gr-1',
        vehicle_id: 'veh-1',
        branch_id: 'br-1',
        created_at: '2025-09-28T12:00:00Z',
      },
      // 45 minutes 59 seconds: stored as 45 whole minutes.
      { id: 'ls-2', type: 'theory', status: 'planned', starts_at: '2025-10-02T15:00:00Z', ends_at: '2025-10-02T15:45:59Z', instructor_id: 'in-1', group_id: 'gr-1', created_at: '2025-09-28T12:00:00Z' },
    ],
    leads: [
      { id: 'ld-1', full_name: 'Иванов Иван Иванович', phone: '+79161234567', email: 'ivanov@mail.ru', category: 'B', source: 'website', status: 'converted', student_id: 'st-1', created_at: '2025-08-25T18:00:00+03:00' },
      { id: 'ld-2', full_name: 'Смирнов Алексей', phone: '+79990001122', source: 'phone', status: 'new', created_at: '2025-11-10T10:00:00Z' },
    ],
    expenses: [
      { id: 'ex-1', category: 'rent', amount: '90000.00', currency: 'RUB', spent_at: '2025-10-01T10:00:00+03:00', comment: 'Аренда, октябрь' },
      { id: 'ex-2', category: 'fuel', amount: '12345.67', currency: 'RUB', spent_at: '2025-10-15T10:00:00Z' },
    ],
  };
}

/** Everything a school has stored, table by table, in id order: equal snapshots mean equal data. */
export async function snapshot(db: Kysely<Database>, schoolId: string): Promise<Record<ArrayName, unknown[]>> {
  const tables = {} as Record<ArrayName, unknown[]>;
  for (const table of ARRAY_NAMES) {
    tables[table] = await db.selectFrom(table).selectAll().where('school_id', '=', schoolId).orderBy('id').execute();
  }
  return tables;
}

/** Number of rows a school has in each table. */
export async function rowCounts(db: Kysely<Database>, schoolId: string): Promise<Record<ArrayName, number>> {
  const counts = {} as Record<ArrayName, number>;
  for (const [table, rows] of Object.entries(await snapshot(db, schoolId))) counts[table as ArrayName] = rows.length;
  return counts;
}

export const NOTHING = Object.fromEntries(ARRAY_NAMES.map((name) => [name, 0])) as Record<ArrayName, number>;
