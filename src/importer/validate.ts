/**
 * What can be checked of one record alone: its schema (one problem per field, worded from
 * the field's schema) and the rules that relate its fields.
 */
import type { TSchema } from 'typebox';
import { Compile, type Validator } from 'typebox/compile';
import { parseDateTime } from '../domain/time.js';
import { ARRAY_NAMES, COMPUTED_FIELDS, RECORD_SCHEMAS, describe, type ArrayName, type RecordOf } from './schema.js';

export type Problem = { field: string | null; reason: string };

// Compiled once: a 300-student file has thousands of records.
const validators = new Map<ArrayName, Validator>(ARRAY_NAMES.map((name) => [name, Compile(RECORD_SCHEMAS[name])]));

function matchesSchema<K extends ArrayName>(array: K, value: unknown): value is RecordOf<K> {
  return validators.get(array)!.Check(value);
}

/**
 * Checks one record of `array` on its own: its schema, then the rules that relate its
 * fields. `record` is the record, typed, when it may be written (no problem found).
 */
export function checkRecord<K extends ArrayName>(array: K, value: unknown, currency: string): { record: RecordOf<K> | null; problems: Problem[] } {
  if (!matchesSchema(array, value)) return { record: null, problems: schemaProblems(array, value) };
  const problems = recordRules(array, value, currency);
  return { record: problems.length === 0 ? value : null, problems };
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Each field's own schema, compiled, with the words of its problem: a record that fails is told field by field, each
 * field's check stopping at its first broken rule. (TypeBox's `Errors` runs every rule of
 * every field: an e-mail over its length still went through its pattern, which backtracks
 * on a long text, and a long array of repeated categories through its list of repeats;
 * a record under the 1 MiB limit took minutes.)
 */
const fieldChecks = new Map<ArrayName, Map<string, { validator: Validator; reason: string }>>(
  ARRAY_NAMES.map((name) => [
    name,
    new Map(Object.entries(RECORD_SCHEMAS[name].properties as Record<string, TSchema>).map(([field, schema]) => [field, { validator: Compile(schema), reason: `must be ${describe(schema)}` }])),
  ]),
);

/**
 * One problem per field, worded from the field's schema: the required fields left out, the
 * fields the record may not have, then the fields that break their schema, in its order.
 */
function schemaProblems(array: ArrayName, record: unknown): Problem[] {
  if (!isObject(record)) return [{ field: null, reason: 'must be an object' }];
  const fields = fieldChecks.get(array)!;
  const problems: Problem[] = [];
  for (const field of (RECORD_SCHEMAS[array].required ?? []) as string[]) {
    if (!Object.hasOwn(record, field)) problems.push({ field, reason: 'is required' });
  }
  // Own properties only: a field named `constructor` or `__proto__` is no field of the record.
  for (const field of Object.keys(record)) {
    if (!fields.has(field)) problems.push({ field, reason: unknownField(array, field) });
  }
  for (const [field, { validator, reason }] of fields) {
    if (Object.hasOwn(record, field) && !validator.Check(record[field])) problems.push({ field, reason });
  }
  return problems;
}

function unknownField(array: ArrayName, field: string): string {
  return COMPUTED_FIELDS[array]?.includes(field)
    ? 'is computed by the service and cannot be imported'
    : `is not a field of ${array}`;
}

/**
 * The longest lesson, in minutes: its duration is stored as a 32-bit integer (PostgreSQL's
 * `integer`), about 4,000 years, so that both stores take the same files.
 */
const MAX_LESSON_MINUTES = 2 ** 31 - 1;

/** Rules that relate fields of one record; the schema checks each field alone. */
const RECORD_RULES: { [K in ArrayName]?: (record: RecordOf<K>) => Problem[] } = {
  lessons: (lesson) => {
    const ms = parseDateTime(lesson.ends_at)! - parseDateTime(lesson.starts_at)!;
    if (ms <= 0) return [{ field: 'ends_at', reason: 'must be after starts_at' }];
    return ms / 60_000 >= MAX_LESSON_MINUTES + 1 ? [{ field: 'ends_at', reason: `must be less than ${MAX_LESSON_MINUTES + 1} minutes after starts_at` }] : [];
  },
  vehicles: ({ insurance_valid_from: from, insurance_valid_until: until }) =>
    // Dates YYYY-MM-DD compare correctly as strings.
    from && until && until < from ? [{ field: 'insurance_valid_until', reason: 'must not be before insurance_valid_from' }] : [],
};

function recordRules<K extends ArrayName>(array: K, record: RecordOf<K>, currency: string): Problem[] {
  const problems = RECORD_RULES[array]?.(record) ?? [];
  // Money is stored without a per-row conversion, so every amount must be in the school's currency.
  if ('currency' in record && record.currency !== undefined && record.currency !== currency) {
    problems.push({ field: 'currency', reason: `must be the school's currency ${currency}` });
  }
  return problems;
}
