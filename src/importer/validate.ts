/**
 * What can be checked of one record alone: its schema (one problem per field, worded from
 * the field's schema) and the rules that relate its fields.
 */
import type { TSchema } from 'typebox';
import { Compile, type Validator } from 'typebox/compile';
import type { TLocalizedValidationError } from 'typebox/error';
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

/** Turns TypeBox's errors into one problem per field, worded from the field's schema. */
function schemaProblems(array: ArrayName, record: unknown): Problem[] {
  if (!isObject(record)) return [{ field: null, reason: 'must be an object' }];
  const properties = RECORD_SCHEMAS[array].properties as Record<string, TSchema>;
  const byField = new Map<string, string>();
  for (const error of validators.get(array)!.Errors(record)) {
    for (const [field, reason] of fieldErrors(array, properties, error)) {
      if (!byField.has(field)) byField.set(field, reason);
    }
  }
  return [...byField].map(([field, reason]) => ({ field, reason }));
}

function fieldErrors(array: ArrayName, properties: Record<string, TSchema>, error: TLocalizedValidationError): [string, string][] {
  if (error.instancePath === '') {
    if (error.keyword === 'required') {
      return error.params.requiredProperties.map((field) => [field, 'is required']);
    }
    if (error.keyword === 'additionalProperties') {
      return error.params.additionalProperties.map((field) => [field, unknownField(array, field)]);
    }
    return [];
  }
  const field = decodePointer(error.instancePath.split('/')[1] ?? '');
  // Own properties only: a field named `constructor` or `__proto__` is no field of the
  // record, not a schema inherited from Object.prototype.
  const schema = Object.hasOwn(properties, field) ? properties[field] : undefined;
  // An unknown field is also reported at its own path ("schema is false"); the
  // additionalProperties error above already names it.
  return schema ? [[field, `must be ${describe(schema)}`]] : [];
}

function unknownField(array: ArrayName, field: string): string {
  return COMPUTED_FIELDS[array]?.includes(field)
    ? 'is computed by the service and cannot be imported'
    : `is not a field of ${array}`;
}

/** JSON Pointer escapes (RFC 6901), so a field named "a/b" is reported as such. */
function decodePointer(segment: string): string {
  return segment.replaceAll('~1', '/').replaceAll('~0', '~');
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
