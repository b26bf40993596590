/**
 * Cursors of the changes feed: a place in the school's change order, (seq, resource, id),
 * or "after all of seq" (`resource` END). Opaque to clients: base64url of
 * `1.<school tag>.<seq>[.<resource>.<id>]`, where the school tag makes another school's
 * cursor a bad parameter rather than a wrong place.
 */
import { createHash } from 'node:crypto';
import { LIST_TABLES } from '../items.js';

/**
 * Sorts after every resource name in any collation (letters only): the place after all of
 * a seq's changes.
 */
export const END = 'zz';

export interface Place {
  seq: number;
  resource: string;
  id: string;
}

/** Before every change: where a feed read without `after` starts. */
export const START: Place = { seq: 0, resource: END, id: '' };

function schoolTag(schoolId: string): string {
  return createHash('sha256').update(schoolId).digest('base64url').slice(0, 8);
}

export function encodeCursor(schoolId: string, place: Place): string {
  const tail = place.resource === END ? '' : `.${place.resource}.${place.id}`;
  return Buffer.from(`1.${schoolTag(schoolId)}.${place.seq}${tail}`).toString('base64url');
}

/** The place a cursor names, or why it names none. */
export function decodeCursor(schoolId: string, cursor: string): Place | 'malformed' | 'other_school' {
  const parts = Buffer.from(cursor, 'base64url').toString('latin1').split('.');
  if (parts.length !== 3 && parts.length !== 5) return 'malformed';
  const [version, tag, seqText, resource, id] = parts;
  if (version !== '1' || !/^[0-9]{1,15}$/.test(seqText!)) return 'malformed';
  if (tag !== schoolTag(schoolId)) return 'other_school';
  if (resource === undefined) return { seq: Number(seqText), resource: END, id: '' };
  if (!(LIST_TABLES as readonly string[]).includes(resource) || !/^[A-Za-z0-9_-]{1,64}$/.test(id!)) return 'malformed';
  return { seq: Number(seqText), resource, id: id! };
}
