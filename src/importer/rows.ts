/**
 * From a validated record to its table row: money to minor units, timestamps to UTC
 * whole seconds, booleans to 0/1, categories to JSON text, and the derived columns
 * (lesson duration). The records have passed their schema, so every parse here succeeds.
 */
import type { Insertable } from 'kysely';
import type { Database } from '../db/schema.js';
import { parseMoney } from '../domain/money.js';
import { normaliseTimestamp, parseDateTime } from '../domain/time.js';
import type { ArrayName, RecordOf } from './schema.js';

/** A table row as the file gives it: the read model (item, pos) and change seq are added when it is written. */
export type RowOf<K extends ArrayName> = Omit<Insertable<Database[K]>, 'item' | 'pos' | 'change_seq'>;

const minor = (money: string): number => parseMoney(money)!;
const utc = (timestamp: string): string => normaliseTimestamp(timestamp)!;
/** A left-out nullable field is stored as null. */
const orNull = <T>(value: T | null | undefined): T | null => value ?? null;

/** Floor: "whole minutes, rounded down" (docs/api/resources.md, "Lesson"); ends_at > starts_at is already checked. */
function durationMinutes(startsAt: string, endsAt: string): number {
  return Math.floor((parseDateTime(endsAt)! - parseDateTime(startsAt)!) / 60_000);
}

/** Money records may leave out `currency`: it defaults to the school's (validation refuses any other). */
type RowMappers = { [K in ArrayName]: (record: RecordOf<K>, schoolId: string, currency: string) => RowOf<K> };

export const TO_ROW: RowMappers = {
  branches: (r, school_id) => ({ school_id, id: r.id, name: r.name }),
  groups: (r, school_id) => ({ school_id, id: r.id, name: r.name, category: r.category, branch_id: orNull(r.branch_id) }),
  students: (r, school_id) => ({
    school_id,
    id: r.id,
    full_name: r.full_name,
    phone: r.phone,
    email: r.email,
    category: r.category,
    status: r.status,
    group_id: r.group_id,
    branch_id: orNull(r.branch_id),
    birth_date: orNull(r.birth_date),
    instructor_id: orNull(r.instructor_id),
    transmission: orNull(r.transmission),
    created_at: utc(r.created_at),
  }),
  instructors: (r, school_id) => ({
    school_id,
    id: r.id,
    full_name: r.full_name,
    phone: r.phone,
    email: orNull(r.email),
    categories: JSON.stringify(r.categories),
    is_active: r.is_active ? 1 : 0,
    branch_id: orNull(r.branch_id),
    vehicle_id: orNull(r.vehicle_id),
    hired_on: orNull(r.hired_on),
    created_at: utc(r.created_at),
  }),
  vehicles: (r, school_id) => ({
    school_id,
    id: r.id,
    plate_number: r.plate_number,
    brand: r.brand,
    model: r.model,
    year: r.year,
    category: r.category,
    transmission: r.transmission,
    status: r.status,
    instructor_id: orNull(r.instructor_id),
    branch_id: orNull(r.branch_id),
    insurance_policy_number: orNull(r.insurance_policy_number),
    insurance_valid_from: orNull(r.insurance_valid_from),
    insurance_valid_until: orNull(r.insurance_valid_until),
    inspection_valid_until: orNull(r.inspection_valid_until),
    created_at: utc(r.created_at),
  }),
  // paid_minor is left out: it is recomputed from the payments after every import.
  contracts: (r, school_id, currency) => ({
    school_id,
    id: r.id,
    number: r.number,
    student_id: r.student_id,
    category: r.category,
    status: r.status,
    signed_on: r.signed_on,
    price_minor: minor(r.price),
    currency: r.currency ?? currency,
    created_at: utc(r.created_at),
  }),
  payments: (r, school_id, currency) => ({
    school_id,
    id: r.id,
    student_id: r.student_id,
    contract_id: orNull(r.contract_id),
    kind: r.kind,
    method: r.method,
    amount_minor: minor(r.amount),
    currency: r.currency ?? currency,
    paid_at: utc(r.paid_at),
    created_at: utc(r.created_at),
  }),
  lessons: (r, school_id) => ({
    school_id,
    id: r.id,
    type: r.type,
    status: r.status,
    starts_at: utc(r.starts_at),
    ends_at: utc(r.ends_at),
    duration_minutes: durationMinutes(r.starts_at, r.ends_at),
    instructor_id: r.instructor_id,
    student_id: orNull(r.student_id),
    group_id: orNull(r.group_id),
    vehicle_id: orNull(r.vehicle_id),
    branch_id: orNull(r.branch_id),
    created_at: utc(r.created_at),
  }),
  leads: (r, school_id) => ({
    school_id,
    id: r.id,
    full_name: r.full_name,
    phone: r.phone,
    email: orNull(r.email),
    category: orNull(r.category),
    source: r.source,
    status: r.status,
    student_id: orNull(r.student_id),
    created_at: utc(r.created_at),
  }),
  expenses: (r, school_id, currency) => ({
    school_id,
    id: r.id,
    category: r.category,
    amount_minor: minor(r.amount),
    currency: r.currency ?? currency,
    spent_at: utc(r.spent_at),
    comment: orNull(r.comment),
  }),
};

/** The columns of each table's row, in the order the rows are staged and merged. */
export const ROW_COLUMNS: { [K in ArrayName]: readonly (keyof RowOf<K> & string)[] } = {
  branches: ['school_id', 'id', 'name'],
  groups: ['school_id', 'id', 'name', 'category', 'branch_id'],
  students: ['school_id', 'id', 'full_name', 'phone', 'email', 'category', 'status', 'group_id', 'branch_id', 'birth_date', 'instructor_id', 'transmission', 'created_at'],
  instructors: ['school_id', 'id', 'full_name', 'phone', 'email', 'categories', 'is_active', 'branch_id', 'vehicle_id', 'hired_on', 'created_at'],
  vehicles: [
    'school_id', 'id', 'plate_number', 'brand', 'model', 'year', 'category', 'transmission', 'status', 'instructor_id', 'branch_id',
    'insurance_policy_number', 'insurance_valid_from', 'insurance_valid_until', 'inspection_valid_until', 'created_at',
  ],
  contracts: ['school_id', 'id', 'number', 'student_id', 'category', 'status', 'signed_on', 'price_minor', 'currency', 'created_at'],
  payments: ['school_id', 'id', 'student_id', 'contract_id', 'kind', 'method', 'amount_minor', 'currency', 'paid_at', 'created_at'],
  lessons: ['school_id', 'id', 'type', 'status', 'starts_at', 'ends_at', 'duration_minutes', 'instructor_id', 'student_id', 'group_id', 'vehicle_id', 'branch_id', 'created_at'],
  leads: ['school_id', 'id', 'full_name', 'phone', 'email', 'category', 'source', 'status', 'student_id', 'created_at'],
  expenses: ['school_id', 'id', 'category', 'amount_minor', 'currency', 'spent_at', 'comment'],
};
