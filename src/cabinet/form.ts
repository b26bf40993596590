/**
 * Reading submitted forms. A body is parsed strictly (`parseForm`): a malformed one is a
 * 400, never read as something the director did not send. A field is one string, or it is
 * absent (repeated fields count as absent); a checkbox is ticked when its field is there
 * at all, once or more.
 */
import { isUtf8 } from 'node:buffer';

/** A form body that is not `application/x-www-form-urlencoded` text: answered 400, nothing changed. */
export class MalformedForm extends Error {
  override name = 'MalformedForm';
  readonly statusCode = 400;

  constructor() {
    super('the form body is not valid URL-encoded UTF-8 text');
  }
}

/** A field's name or value, `+` as a space and every escape decoded; a malformed one refuses the form. */
function decoded(part: string): string {
  try {
    return decodeURIComponent(part.replaceAll('+', ' '));
  } catch {
    // A `%` without two hex digits, or escapes that are not UTF-8 (`%FF%FE`).
    throw new MalformedForm();
  }
}

/**
 * The fields of a URL-encoded form body (a browser's form, or curl's `-d`), as the WHATWG URL
 * standard encodes them, but refusing what a lenient parser would keep as text: bytes that
 * are not UTF-8, a `%` without two hex digits, escapes that decode to no UTF-8 text. A field
 * given more than once keeps its values in a list. The object has no prototype, so a field
 * named `__proto__` or `constructor` is a field like any other.
 */
export function parseForm(body: Buffer): Record<string, string | string[]> {
  if (!isUtf8(body)) throw new MalformedForm();
  const fields: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  for (const pair of body.toString('utf8').split('&')) {
    if (pair === '') continue;
    const at = pair.indexOf('=');
    const name = decoded(at === -1 ? pair : pair.slice(0, at));
    const value = decoded(at === -1 ? '' : pair.slice(at + 1));
    const earlier = fields[name];
    if (earlier === undefined) fields[name] = value;
    else if (Array.isArray(earlier)) earlier.push(value);
    else fields[name] = [earlier, value];
  }
  return fields;
}

export function formField(body: unknown, name: string): string | null {
  if (typeof body !== 'object' || body === null || !Object.hasOwn(body, name)) return null;
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : null;
}

export function formTicked(body: unknown, name: string): boolean {
  return typeof body === 'object' && body !== null && Object.hasOwn(body, name);
}
