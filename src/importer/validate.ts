/**
 * Everything that can be checked without the database: the file's shape, every record
 * against its schema, the rules that span fields of one record, and duplicate ids.
 */
import type { TSchema } from 'typebox';
import { Compile, type Validator } from 'typebox/compile';
import type { TLocalizedValidationError } from 'typebox/error';
import { parseDateTime } from '../domain/time.js';
import type { ErrorList } from './errors.js';
import { ARRAY_NAMES, COMPUTED_FIELDS, RECORD_SCHEMAS, describe, type ArrayName, type RecordOf } from './schema.js';

/** A record that passed its schema, with its position in the file for later error reports. */
export type Entry<K extends ArrayName> = { index: number; record: RecordOf<K> };
export type Entries = { [K in ArrayName]: Entry<K>[] };

export interface CheckedFile {
  /** The records that passed every check of this module. */
  entries: Entries;
  /**
   * Every id the file declares, valid record or not: a reference to a record that has a
   * mistake of its own is not reported a second time as dangling.
   */
  declared: Record<ArrayName, Set<string>>;
  /**
   * Arrays where some id could not be read (not an array, a record that is not an object,
   * an id that is not a string). References into them are not judged: any of them might
   * name the record that is broken, and one mistake should give one error.
   */
  unreadable: Set<ArrayName>;
}

type Problem = { field: string | null; reason: string };

// Compiled once: a 300-student file has thousands of records.
const validators = new Map<ArrayName, Validator>(ARRAY_NAMES.map((name) => [name, Compile(RECORD_SCHEMAS[name])]));

function matchesSchema<K extends ArrayName>(array: K, value: unknown): value is RecordOf<K> {
  return validators.get(array)!.Check(value);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function checkFile(input: unknown, currency: string, errors: ErrorList): CheckedFile {
  const entries = Object.fromEntries(ARRAY_NAMES.map((name) => [name, []])) as unknown as Entries;
  const declared = Object.fromEntries(ARRAY_NAMES.map((name) => [name, new Set<string>()])) as Record<ArrayName, Set<string>>;
  const file: CheckedFile = { entries, declared, unreadable: new Set() };
  if (!isObject(input)) {
    errors.add({ array: null, index: null, field: null, reason: `the file must be a JSON object with the arrays ${ARRAY_NAMES.join(', ')}` });
    return file;
  }
  for (const key of Object.keys(input)) {
    if (!(ARRAY_NAMES as string[]).includes(key)) {
      errors.add({ array: key, index: null, field: null, reason: `is not an array of the import format (${ARRAY_NAMES.join(', ')})` });
    }
  }
  for (const array of ARRAY_NAMES) {
    const records = input[array];
    if (records === undefined) continue;
    if (!Array.isArray(records)) {
      errors.add({ array, index: null, field: null, reason: 'must be an array of records' });
      file.unreadable.add(array);
      continue;
    }
    checkArray(array, records, currency, file, errors);
    if (errors.full) break;
  }
  return file;
}

function checkArray<K extends ArrayName>(array: K, records: unknown[], currency: string, file: CheckedFile, errors: ErrorList): void {
  const seen = new Map<string, number>();
  for (const [index, record] of records.entries()) {
    if (errors.full) return;
    const valid = matchesSchema(array, record);
    const problems = valid ? recordRules(array, record, currency) : schemaProblems(array, record);
    const id = isObject(record) ? record.id : undefined;
    if (typeof id === 'string') {
      const earlier = seen.get(id);
      if (earlier === undefined) seen.set(id, index);
      else problems.push({ field: 'id', reason: `repeats the id "${id}" of ${array}[${earlier}]` });
      file.declared[array].add(id);
    } else {
      file.unreadable.add(array);
    }
    errors.addFor(array, index, problems);
    if (valid && problems.length === 0) file.entries[array].push({ index, record });
  }
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
  const schema = properties[field];
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

/** Rules that relate fields of one record; the schema checks each field alone. */
const RECORD_RULES: { [K in ArrayName]?: (record: RecordOf<K>) => Problem[] } = {
  lessons: (lesson) =>
    parseDateTime(lesson.ends_at)! <= parseDateTime(lesson.starts_at)! ? [{ field: 'ends_at', reason: 'must be after starts_at' }] : [],
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
