/**
 * Cursors of the changes feed: a place in the school's change order, (seq, resource, id),
 * or "after all of seq" (`resource` END). Opaque to clients: base64url of
 * `3.<school tag>.<seq>.<stamp>.<pruned>[.<resource>.<id>]`, where the school tag makes
 * another school's cursor a bad parameter rather than a wrong place, the stamp is that of
 * the seq's batch (src/importer/write.ts): after a restored copy of the database, a seq
 * taken again by another import has another; and `pruned` is the seq of the last
 * tombstone the school had pruned when the page was read: pruning before it cost the
 * reader nothing, only pruning since can. Cursors of versions 1 (no stamp) and 2 (no
 * `pruned`) are read too.
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
  /** The seq of the school's last pruned tombstone when the cursor was given out; undefined in cursors of versions 1 and 2. */
  pruned?: number;
}

/** Before every change: where a feed read without `after` starts. */
export const START = { seq: 0, resource: END, id: '', stamp: '' } satisfies Place;

function schoolTag(schoolId: string): string {
  return hash('sha256', schoolId, 'base64url').slice(0, 8);
}

/** The cursor of `place`, read when the school's last pruned tombstone was at seq `pruned`. */
export function encodeCursor(schoolId: string, place: Place & { stamp: string }, pruned: number): string {
  const tail = place.resource === END ? '' : `.${place.resource}.${place.id}`;
  return Buffer.from(`3.${schoolTag(schoolId)}.${place.seq}.${place.stamp}.${pruned}${tail}`).toString('base64url');
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
  // Version 1 had no stamp and version 2 no `pruned`: their parts are those of version 3
  // without the fourth and fifth, or the fifth.
  if (version === '1' && (parts.length === 3 || parts.length === 5)) parts.splice(3, 0, '', '');
  else if (version === '2' && (parts.length === 4 || parts.length === 6)) parts.splice(4, 0, '');
  else if (version !== '3' || (parts.length !== 5 && parts.length !== 7)) return null;
  const [, tag, seqText, stampText, prunedText, resource, id] = parts;
  // As encodeCursor writes them: numbers without leading zeros, and the start (seq 0, before
  // every batch) without a stamp.
  const number = /^(?:0|[1-9][0-9]{0,14})$/;
  if (!number.test(seqText!) || !/^[A-Za-z0-9_-]{0,16}$/.test(stampText!) || (seqText === '0' && stampText !== '')) return null;
  if (version === '3' && !number.test(prunedText!)) return null;
  const place = { seq: Number(seqText), ...(version !== '1' ? { stamp: stampText! } : {}), ...(version === '3' ? { pruned: Number(prunedText) } : {}) };
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
