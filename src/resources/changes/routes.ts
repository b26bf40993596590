import type { Reader } from '../../db/index.js';
import { scopeBit, type ScopeSet } from '../../domain/scopes.js';
import { utf8 } from '../../edge/answer.js';
import { Problem } from '../../problems/index.js';
import { endpoint } from '../common/route.js';
import { LIST_TABLES, type ListTable } from '../items.js';
import { CURSOR_REFUSED, encodeCursor, placeIn, START, type Place } from './cursor.js';
import { changePage, cursorState, type ChangePage } from './repository.js';
import { ChangeList, ChangesQuery } from './schema.js';

const CURSOR_EXPIRED = new Problem(
  'cursor_expired',
  'This cursor is older than the deletions the feed still keeps (or from before the school\'s data was restored): drop your copy and read the feed again from the beginning, without "after".',
);

/** Per set of resources asked for outside the key's scopes: the 403, made once. */
const outsideScopes = new Map<string, Problem>();

function outsideScopesOf(names: ListTable[]): Problem {
  const text = names.join(', ');
  let problem = outsideScopes.get(text);
  if (problem === undefined) {
    problem = new Problem('insufficient_scope', `This key's scopes do not include: ${text}. Leave out "resources" to read every resource the key may read.`, {
      headers: { 'WWW-Authenticate': 'Bearer error="insufficient_scope"' },
    });
    outsideScopes.set(text, problem);
  }
  return problem;
}

/** The resources to read: those named, or all the key may read when none are; a name outside the key's scopes is a 403. */
function resourcesOf(names: ListTable[] | undefined, scopes: ScopeSet): ListTable[] {
  const inScope = (name: ListTable) => (scopes & scopeBit(name)) !== 0;
  if (names === undefined) return LIST_TABLES.filter(inScope);
  const outside = names.filter((n) => !inScope(n));
  if (outside.length > 0) throw outsideScopesOf(outside);
  return names;
}

/**
 * Checks the place a decoded `after` names against what the school's feed holds now, and
 * gives the seq of the last pruned tombstone it was checked against. A cursor before
 * deletions pruned since it was given out, ahead of the data, or at a seq whose batch has
 * another stamp (the data was restored from an older copy and imported into since) is
 * expired. The data version is the one read here, not the key row's: on PostgreSQL a server
 * may keep that row a moment after an import commits, while a page of it is already out.
 */
async function checkPlace(reads: Reader, place: Place, schoolId: string): Promise<number> {
  const { droppedThrough: through, beforeLastDropped, stamp, dataVersion } = await cursorState(reads, schoolId, place);
  if (place.seq > dataVersion) throw CURSOR_EXPIRED;
  // The beginning (an empty first page's cursor) misses nothing: a read from it sees what is
  // left. Nor does a cursor given out after the last pruning (a copy read from the beginning
  // since): tombstones pruned before its reader started were never the reader's to see. A
  // cursor of version 2 does not say when it was given out.
  const prunedSince = place.pruned === undefined || through > place.pruned;
  const missedTombstones = place.seq > 0 && prunedSince && (place.seq < through || (place.seq === through && beforeLastDropped));
  const otherBatch = place.seq > 0 && place.stamp !== undefined && place.stamp !== stamp;
  if ((through > 0 && missedTombstones) || otherBatch) throw CURSOR_EXPIRED;
  return through;
}

/** What a key reads whose scopes hold none of the feed's resources (finance only). */
const NOTHING: ChangePage = { items: [], more: false, last: null, pruned: 0 };

const COMMA = Buffer.from(',');

/** `head`, the parts of the page's items made by the database joined with commas, and `tail`: the body's bytes, copied once. */
function bodyOf(head: string, items: (string | Buffer)[], tail: string): Buffer {
  const pieces: Buffer[] = [Buffer.from(head)];
  for (const part of items) {
    if (pieces.length > 1) pieces.push(COMMA);
    pieces.push(typeof part === 'string' ? utf8(part) : part);
  }
  pieces.push(Buffer.from(tail));
  return Buffer.concat(pieces);
}

export const changeEndpoints = [
  endpoint<ChangesQuery>({
    url: '/changes',
    // Any key may read the feed; it carries only the resources of the key's scopes.
    scopes: [],
    operationId: 'listChanges',
    summary: 'What changed in the school\'s data',
    description:
      'Every change of the school\'s records, oldest first: each record once, at the place of its latest change, as its list serves it now, or as a deletion. Read from the beginning (no after) it is a full copy; read from a saved cursor, every change since. A cursor older than the deletions the feed keeps is 410 cursor_expired.',
    tags: ['changes'],
    querystring: ChangesQuery,
    response: ChangeList,
    extraStatuses: [410],
    answer: async ({ reads, tenant, query }) => {
      // The decoder read the names and the cursor; a cursor of another school's feed is
      // refused here, before the scopes (403) and the cursor's place (410) are
      // (docs/api/errors.md, "Which error wins").
      const cursor = query.after === undefined ? undefined : placeIn(tenant.id, query.after);
      if (cursor === null) throw Problem.invalid([{ name: 'after', reason: CURSOR_REFUSED }]);
      const resources = resourcesOf(query.resources, tenant.scopes);
      const checkedThrough = cursor === undefined ? 0 : await checkPlace(reads, cursor, tenant.id);
      const page = resources.length === 0 ? NOTHING : await changePage(reads, tenant.id, resources, cursor ?? START, query.limit);
      // On PostgreSQL the check and the page are two statements, each in a snapshot of its own
      // (on SQLite, one turn's): tombstones pruned between them are missing from the page. The
      // cursor is then checked again, in a snapshot at least as late as the page's: pruning
      // only moves on, so a place it still passes had nothing to see in what was pruned.
      if (cursor !== undefined && page !== NOTHING && page.pruned !== checkedThrough) await checkPlace(reads, cursor, tenant.id);
      // The place after the page's last item, or the place given when there is none: a
      // place in the school's whole sequence, whichever resources were read (with others,
      // it gives their changes after that place only).
      const next = page.last ? encodeCursor(tenant.id, page.last, page.pruned) : (query.after?.text ?? encodeCursor(tenant.id, START, page.pruned));
      return bodyOf('{"items":[', page.items, `],"meta":{"next_cursor":"${next}","has_more":${page.more},"limit":${query.limit}}}`);
    },
  }),
];
