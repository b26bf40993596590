/**
 * Query strings are decoded by a validator compiled from the route's TypeBox schema.
 * It is stricter than a JSON Schema validator with coercion: names are exact, a
 * parameter given twice or empty is refused, integers are decimal digits only, and
 * every bad parameter is reported with a reason a person can act on.
 */
import querystring from 'node:querystring';
import type { TSchema } from 'typebox';
import { redactKeys } from '../../ops/request-log.js';
import { Problem, type InvalidParam } from '../../problems/index.js';

type Raw = Record<string, string | string[] | undefined>;

/**
 * A query string's parameters, as the app's router reads them (app.ts): every one of them
 * (Node's default stops at 1,000, ignoring the rest silently; SCHOOL_DATA_MAX_URL_BYTES
 * bounds how many there can be), a name given twice as an array.
 */
export function parseQuery(text: string): Raw {
  return querystring.parse(text, '&', '=', { maxKeys: 0 });
}
type Parse = (value: string) => unknown;

interface PropertySchema {
  type?: string;
  enum?: readonly string[];
  pattern?: string;
  minimum?: number;
  maximum?: number;
  default?: unknown;
  description?: string;
}

const INVALID = Symbol('invalid');

/**
 * A reading of a parameter's value beyond its schema's pattern: the value the endpoint is
 * given (a date that exists, a list's names, a cursor's parts), or null when there is none,
 * refused with `reason`.
 */
export interface ValueCheck {
  read(value: string): unknown;
  reason: string;
}

/**
 * Where a parameter's schema carries its ValueCheck: a symbol, which TypeBox's wrappers
 * copy with the schema and JSON (the OpenAPI document) leaves out.
 */
const VALUE_CHECK = Symbol('valueCheck');

/**
 * Adds to `schema` (the object itself, returned) a reading of each value that its pattern
 * lets through; give it a schema of its own. The decoder reports a value it cannot read
 * with every other bad parameter, in the same 400, and hands the endpoint what it read.
 */
export function checked<T extends TSchema>(schema: T, check: ValueCheck): T {
  return Object.assign(schema, { [VALUE_CHECK]: check });
}

function parserFor(schema: PropertySchema): { parse: Parse; reason: string } {
  if (schema.type === 'integer') {
    const min = schema.minimum ?? 0;
    const max = schema.maximum ?? Number.MAX_SAFE_INTEGER;
    return {
      reason: `must be an integer from ${min} to ${max}`,
      parse: (v) => {
        if (!/^[0-9]+$/.test(v)) return INVALID;
        // Leading zeros change nothing; past 16 significant digits a number is out of any range here.
        const significant = v.length > 16 ? v.replace(/^0+(?=[0-9])/, '') : v;
        if (significant.length > 16) return INVALID;
        const n = Number(significant);
        return n >= min && n <= max ? n : INVALID;
      },
    };
  }
  if (schema.type === 'boolean') {
    return { reason: 'must be true or false', parse: (v) => (v === 'true' ? true : v === 'false' ? false : INVALID) };
  }
  if (schema.enum) {
    const allowed = new Set(schema.enum);
    return { reason: `must be one of: ${schema.enum.join(', ')}`, parse: (v) => (allowed.has(v) ? v : INVALID) };
  }
  if (schema.pattern) {
    const re = new RegExp(schema.pattern, 'u');
    return { reason: `must be ${schema.description ?? `a string matching ${schema.pattern}`}`, parse: (v) => (re.test(v) ? v : INVALID) };
  }
  return { reason: 'must be a string', parse: (v) => v };
}

export type QueryDecoder = (raw: Raw) => Record<string, unknown>;

/** Compiles the decoder for one route's querystring schema (an object of optional parameters). */
export function compileQueryDecoder(schema: TSchema): QueryDecoder {
  const properties = (schema as { properties?: Record<string, PropertySchema> }).properties ?? {};
  const required = new Set((schema as { required?: string[] }).required ?? []);
  const fields = Object.entries(properties).map(([name, prop]) => ({ name, prop, check: (prop as { [VALUE_CHECK]?: ValueCheck })[VALUE_CHECK], ...parserFor(prop) }));
  const known = new Set(Object.keys(properties));

  return (raw) => {
    const out: Record<string, unknown> = {};
    const invalid: InvalidParam[] = [];
    for (const name of Object.keys(raw)) {
      // Unknown names are echoed back, but never at any length, and never a key pasted as one.
      if (name === '') {
        invalid.push({ name, reason: 'a value was sent without a parameter name ("=" with nothing before it)' });
      } else if (!known.has(name)) {
        const shown = [...redactKeys(name)];
        invalid.push({ name: shown.length > 64 ? `${shown.slice(0, 64).join('')}...` : shown.join(''), reason: 'is not a parameter of this endpoint' });
      }
    }
    for (const { name, prop, check, parse, reason } of fields) {
      const value = raw[name];
      if (value === undefined) {
        if (required.has(name)) invalid.push({ name, reason: 'is required' });
        else if (prop.default !== undefined) out[name] = prop.default;
        continue;
      }
      if (typeof value !== 'string') {
        invalid.push({ name, reason: 'must be given only once' });
        continue;
      }
      if (value === '') {
        invalid.push({ name, reason: 'must not be empty' });
        continue;
      }
      const parsed = parse(value);
      const read = parsed === INVALID || check === undefined ? parsed : check.read(value);
      if (parsed === INVALID) invalid.push({ name, reason });
      else if (read === null) invalid.push({ name, reason: check!.reason });
      else out[name] = read;
    }
    if (invalid.length > 0) throw Problem.invalid(invalid);
    return out;
  };
}

/**
 * Fastify's validator compiler for the API's routes: query strings by their decoder. Path
 * parameters pass: Fastify checks them before the query, but one that cannot name anything
 * is a missing object (404), which comes after a bad query's 400, so the route checks them
 * (`paramsCheck`).
 */
export function validatorCompiler({ schema, httpPart }: { schema: TSchema; httpPart?: string }) {
  if (httpPart === 'querystring') {
    const decode = compileQueryDecoder(schema);
    return (data: unknown) => {
      try {
        return { value: decode((data ?? {}) as Raw) };
      } catch (error) {
        return { error: error as Error };
      }
    };
  }
  if (httpPart === 'params') return (data: unknown) => ({ value: data });
  throw new Error(`no validator for ${httpPart}`);
}

/** Whether path parameters match the patterns of their schema (when not, they name no object). */
export function paramsCheck(schema: TSchema): (params: unknown) => boolean {
  const props = (schema as { properties?: Record<string, { pattern?: string }> }).properties ?? {};
  const checks = Object.entries(props).map(([name, p]) => [name, new RegExp(p.pattern ?? '.*', 'u')] as const);
  return (data) => {
    const params = data as Record<string, string>;
    return checks.every(([name, re]) => re.test(params[name] ?? ''));
  };
}
