/**
 * The import file (docs/import-format.md), one TypeBox schema per array. These schemas are
 * the single source of the per-record rules: the importer validates with them, the demo
 * generator is typed by them (`ImportFile`), and each field's `description` is the text
 * of the error an operator reads ("must be <description>"), so rule and message cannot
 * drift apart.
 *
 * The rules that relate a record's fields or need the school (ends_at after starts_at,
 * the school's currency) live in validate.ts; those that need more than one record or the
 * database in intake.ts and stage.ts (duplicate ids) and references.ts (references).
 */
import { Type, type Static, type TEnum, type TSchema } from 'typebox';
import {
  CATEGORIES,
  CONTRACT_STATUSES,
  EXPENSE_CATEGORIES,
  LEAD_SOURCES,
  LEAD_STATUSES,
  LESSON_STATUSES,
  LESSON_TYPES,
  PAYMENT_KINDS,
  PAYMENT_METHODS,
  STUDENT_STATUSES,
  TRANSMISSIONS,
  VEHICLE_STATUSES,
} from '../domain/enums.js';
import { CURRENCY, parseMoney } from '../domain/money.js';
import { isText } from '../domain/text.js';
import { normaliseTimestamp, parseDate } from '../domain/time.js';
import { ID_PATTERN } from '../domain/ids.js';

// Field types. Every description completes the sentence "<field> must be ...".

const Id = Type.String({ pattern: ID_PATTERN, description: 'an id of 1-64 characters A-Z a-z 0-9 _ -' });

const Text = (max: number) =>
  Type.Refine(
    Type.String({ minLength: 1, maxLength: max, description: `a non-empty string of at most ${max} characters, without NUL or unpaired surrogates` }),
    isText,
  );

const Phone = Type.String({
  pattern: '^(?=.{5,32}$)\\+?[0-9 ()-]*[0-9][0-9 ()-]*$',
  description: 'a phone number of 5-32 characters: digits (at least one), spaces, ( ) -, optionally a leading +',
});

const Email = Type.Refine(
  Type.String({
    pattern: '^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$',
    maxLength: 254,
    description: 'an e-mail address (name@domain.tld, at most 254 characters)',
  }),
  isText,
);

/** Written as a function with this signature so the record types keep the literal values. */
function OneOf<V extends string[]>(values: readonly [...V]): TEnum<V> {
  return Type.Enum(values, { description: `one of ${values.join(', ')}` });
}

const DateText = Type.Refine(
  Type.String({ description: 'a real calendar date YYYY-MM-DD' }),
  (text) => parseDate(text) !== null,
);

/** Whole seconds only: the store keeps `YYYY-MM-DDTHH:MM:SSZ`, and silently dropping a fraction would alter the data. */
const Timestamp = Type.Refine(
  Type.String({ description: 'an RFC 3339 date-time with offset and whole seconds (2026-03-01T09:00:00+03:00), in the years 0000-9999 once in UTC' }),
  (text) => normaliseTimestamp(text) !== null,
);

/** A decimal string, parsed by the same parseMoney the API's money format is built on. */
const Money = (sign: 'positive' | 'non-negative') =>
  Type.Refine(
    Type.String({
      description: `a decimal string of at most 13 integer digits and two fraction digits (15000.00), ${sign === 'positive' ? 'greater than 0' : '0 or more'}`,
    }),
    (text) => {
      const minor = parseMoney(text);
      return minor !== null && (sign === 'positive' ? minor > 0 : minor >= 0);
    },
  );

const Currency = Type.String({ pattern: CURRENCY.source, description: 'a currency code of 3 capital letters' });

/** Checked when a file is validated, so the bound moves with the calendar. */
const Year = Type.Refine(
  Type.Integer({ minimum: 1950, description: 'an integer year from 1950 to next year' }),
  (year) => year <= new Date().getUTCFullYear() + 1,
);

// maxItems says no more than uniqueItems does, but is checked before it: a long list of repeats is refused without listing them.
const Categories = Type.Array(OneOf(CATEGORIES), {
  minItems: 1,
  maxItems: CATEGORIES.length,
  uniqueItems: true,
  description: `a non-empty array of distinct categories (${CATEGORIES.join(', ')})`,
});

const Flag = Type.Boolean({ description: 'true or false' });

/** A field shown as "or null" in docs/api/resources.md: it may be null or left out (stored as null). */
const Nullable = <T extends TSchema>(type: T) =>
  Type.Optional(Type.Union([type, Type.Null()], { description: `${describe(type)} or null` }));

/** The error text of a field schema; every field type above carries one. */
export function describe(schema: TSchema): string {
  return (schema as { description?: string }).description ?? 'valid';
}

const record = <P extends Record<string, TSchema>>(properties: P) =>
  Type.Object(properties, { additionalProperties: false });

// Records, with the API field names of docs/api/resources.md.

export const BranchRecord = record({ id: Id, name: Text(200) });

export const GroupRecord = record({
  id: Id,
  name: Text(200),
  category: OneOf(CATEGORIES),
  branch_id: Nullable(Id),
});

export const StudentRecord = record({
  id: Id,
  full_name: Text(200),
  phone: Phone,
  email: Email,
  category: OneOf(CATEGORIES),
  status: OneOf(STUDENT_STATUSES),
  group_id: Id,
  branch_id: Nullable(Id),
  birth_date: Nullable(DateText),
  instructor_id: Nullable(Id),
  transmission: Nullable(OneOf(TRANSMISSIONS)),
  created_at: Timestamp,
});

export const InstructorRecord = record({
  id: Id,
  full_name: Text(200),
  phone: Phone,
  email: Nullable(Email),
  categories: Categories,
  is_active: Flag,
  branch_id: Nullable(Id),
  vehicle_id: Nullable(Id),
  hired_on: Nullable(DateText),
  created_at: Timestamp,
});

export const VehicleRecord = record({
  id: Id,
  plate_number: Text(20),
  brand: Text(100),
  model: Text(100),
  year: Year,
  category: OneOf(CATEGORIES),
  transmission: OneOf(TRANSMISSIONS),
  status: OneOf(VEHICLE_STATUSES),
  instructor_id: Nullable(Id),
  branch_id: Nullable(Id),
  insurance_policy_number: Nullable(Text(64)),
  insurance_valid_from: Nullable(DateText),
  insurance_valid_until: Nullable(DateText),
  inspection_valid_until: Nullable(DateText),
  created_at: Timestamp,
});

export const ContractRecord = record({
  id: Id,
  number: Text(64),
  student_id: Id,
  category: OneOf(CATEGORIES),
  status: OneOf(CONTRACT_STATUSES),
  signed_on: DateText,
  price: Money('non-negative'),
  currency: Type.Optional(Currency),
  created_at: Timestamp,
});

export const PaymentRecord = record({
  id: Id,
  student_id: Id,
  contract_id: Nullable(Id),
  kind: OneOf(PAYMENT_KINDS),
  method: OneOf(PAYMENT_METHODS),
  amount: Money('positive'),
  currency: Type.Optional(Currency),
  paid_at: Timestamp,
  created_at: Timestamp,
});

export const LessonRecord = record({
  id: Id,
  type: OneOf(LESSON_TYPES),
  status: OneOf(LESSON_STATUSES),
  starts_at: Timestamp,
  ends_at: Timestamp,
  instructor_id: Id,
  student_id: Nullable(Id),
  group_id: Nullable(Id),
  vehicle_id: Nullable(Id),
  branch_id: Nullable(Id),
  created_at: Timestamp,
});

export const LeadRecord = record({
  id: Id,
  full_name: Text(200),
  phone: Phone,
  email: Nullable(Email),
  category: Nullable(OneOf(CATEGORIES)),
  source: OneOf(LEAD_SOURCES),
  status: OneOf(LEAD_STATUSES),
  student_id: Nullable(Id),
  created_at: Timestamp,
});

export const ExpenseRecord = record({
  id: Id,
  category: OneOf(EXPENSE_CATEGORIES),
  amount: Money('positive'),
  currency: Type.Optional(Currency),
  spent_at: Timestamp,
  comment: Nullable(Text(1000)),
});

/**
 * The arrays of an import file, in the order they are validated and written: a record's
 * parents come before it wherever references allow (instructors and vehicles refer to
 * each other, which is why the store has no foreign keys between resources). Each name
 * is also the name of the table the array is written to.
 */
export const RECORD_SCHEMAS = {
  branches: BranchRecord,
  groups: GroupRecord,
  students: StudentRecord,
  instructors: InstructorRecord,
  vehicles: VehicleRecord,
  contracts: ContractRecord,
  payments: PaymentRecord,
  lessons: LessonRecord,
  leads: LeadRecord,
  expenses: ExpenseRecord,
} as const;

export type ArrayName = keyof typeof RECORD_SCHEMAS;
export const ARRAY_NAMES = Object.keys(RECORD_SCHEMAS) as ArrayName[];

/** One record of the array `K`, as it appears in a valid file. */
export type RecordOf<K extends ArrayName> = Static<(typeof RECORD_SCHEMAS)[K]>;

/** Derived values the API shows but the importer computes itself; named so the error can say so. */
export const COMPUTED_FIELDS: Partial<Record<ArrayName, readonly string[]>> = {
  contracts: ['paid', 'debt'],
  lessons: ['duration_minutes'],
};

export const ImportFileSchema = Type.Object(
  {
    branches: Type.Optional(Type.Array(BranchRecord)),
    groups: Type.Optional(Type.Array(GroupRecord)),
    students: Type.Optional(Type.Array(StudentRecord)),
    instructors: Type.Optional(Type.Array(InstructorRecord)),
    vehicles: Type.Optional(Type.Array(VehicleRecord)),
    contracts: Type.Optional(Type.Array(ContractRecord)),
    payments: Type.Optional(Type.Array(PaymentRecord)),
    lessons: Type.Optional(Type.Array(LessonRecord)),
    leads: Type.Optional(Type.Array(LeadRecord)),
    expenses: Type.Optional(Type.Array(ExpenseRecord)),
  },
  { additionalProperties: false },
);

/** A valid import file, as the demo generator produces it. */
export type ImportFile = Static<typeof ImportFileSchema>;

// The file schema names the arrays once more so TypeBox can type it; this fails to compile
// if it and RECORD_SCHEMAS ever list different arrays.
type SameKeys<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const arraysAgree: SameKeys<ArrayName, keyof ImportFile> = true;
void arraysAgree;
