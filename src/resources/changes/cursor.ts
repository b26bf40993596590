/**
 * Cursors of the changes feed: a place in the school's change order, (seq, resource, id),
 * or "after all of seq" (`resource` END). Opaque to clients: base64url of
 * `2.<school tag>.<seq>.<stamp>[.<resource>.<id>]`, where the school tag makes another
 * school's cursor a bad parameter rather than a wrong place, and the stamp is that of the
 * seq's batch (src/importer/write.ts): after a restored copy of the database, a seq taken
 * again by another import has another. Cursors of version 1, without a stamp, are read too.
 */
import { hash } from 'node:crypto';
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
  /** The stamp of the seq's batch; undefined in a cursor of version 1. */
  stamp?: string;
}

/** Before every change: where a feed read without `after` starts. */
export const START = { seq: 0, resource: END, id: '', stamp: '' } satisfies Place;

function schoolTag(schoolId: string): string {
  return hash('sha256', schoolId, 'base64url').slice(0, 8);
}

export function encodeCursor(schoolId: string, place: Place & { stamp: string }): string {
  const tail = place.resource === END ? '' : `.${place.resource}.${place.id}`;
  return Buffer.from(`2.${schoolTag(schoolId)}.${place.seq}.${place.stamp}${tail}`).toString('base64url');
}

/** Why a cursor is refused, whether it is no cursor at all or another school's. */
export const CURSOR_REFUSED = 'is not a cursor of this feed';

/** A cursor as given (`text`), with its school tag and place. */
export interface ReadCursor {
  text: string;
  tag: string;
  place: Place;
}

/** A cursor's school tag and place, or null when the text is no cursor of any feed. */
export function readCursor(cursor: string): ReadCursor | null {
  const parts = Buffer.from(cursor, 'base64url').toString('latin1').split('.');
  const version = parts[0];
  // Version 1 had no stamp: its parts are those of version 2 without the fourth.
  if (version === '1' && (parts.length === 3 || parts.length === 5)) parts.splice(3, 0, '');
  else if (version !== '2' || (parts.length !== 4 && parts.length !== 6)) return null;
  const [, tag, seqText, stampText, resource, id] = parts;
  // As encodeCursor writes them: a seq without leading zeros, and the start (seq 0, before
  // every batch) without a stamp.
  if (!/^(?:0|[1-9][0-9]{0,14})$/.test(seqText!) || !/^[A-Za-z0-9_-]{0,16}$/.test(stampText!) || (seqText === '0' && stampText !== '')) return null;
  const place = { seq: Number(seqText), ...(version === '2' ? { stamp: stampText! } : {}) };
  if (resource === undefined) return { text: cursor, tag: tag!, place: { ...place, resource: END, id: '' } };
  if (!(LIST_TABLES as readonly string[]).includes(resource) || !/^[A-Za-z0-9_-]{1,64}$/.test(id!)) return null;
  return { text: cursor, tag: tag!, place: { ...place, resource, id: id! } };
}

/**
 * The place a cursor names when it is one of this school's feed, else null. Another
 * school's cursor is then refused as a text that is no cursor: an answer never tells that
 * a text is a cursor of some other school's feed.
 */
export function placeIn(schoolId: string, cursor: ReadCursor): Place | null {
  return cursor.tag === schoolTag(schoolId) ? cursor.place : null;
}
