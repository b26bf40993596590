import { Type, type Static } from 'typebox';
import { checked } from '../common/query.js';
import { LIST_TABLES, type ListTable } from '../items.js';
import { CURSOR_REFUSED, readCursor, type ReadCursor } from './cursor.js';
import { Contract } from '../contracts/schema.js';
import { Instructor } from '../instructors/schema.js';
import { Lead } from '../leads/schema.js';
import { Lesson } from '../lessons/schema.js';
import { Payment } from '../payments/schema.js';
import { Timestamp } from '../common/responses.js';
import { Student } from '../students/schema.js';
import { Vehicle } from '../vehicles/schema.js';

/** The most changes one page of the feed holds, and the default. */
export const MAX_CHANGES = 1000;
export const DEFAULT_CHANGES = 100;

/** The resources a `resources` parameter names, or null when it is not a list of distinct names of the feed. */
function resourceNames(text: string): ListTable[] | null {
  const names = text.split(',');
  const known = names.every((n) => (LIST_TABLES as readonly string[]).includes(n));
  return known && new Set(names).size === names.length ? (names as ListTable[]) : null;
}

export const ChangesQuery = Type.Object(
  {
    // Whether a well-formed cursor is one of this school's feed is known once the key is: the route checks that.
    after: Type.Optional(
      checked(Type.String({ pattern: '^[A-Za-z0-9_-]{1,200}$', description: 'a cursor from an earlier answer\'s meta.next_cursor' }), {
        read: readCursor,
        reason: CURSOR_REFUSED,
      }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_CHANGES, default: DEFAULT_CHANGES, description: 'changes per page' })),
    resources: Type.Optional(
      checked(
        Type.String({
          pattern: '^[a-z]+(,[a-z]+)*$',
          description: `a comma-separated list of ${LIST_TABLES.join(', ')} (default: all of them)`,
        }),
        { read: resourceNames, reason: `must be a comma-separated list of distinct names from: ${LIST_TABLES.join(', ')}` },
      ),
    ),
  },
  { additionalProperties: false },
);
/** The feed's query as decoded: the cursor read, the resources named. */
export type ChangesQuery = Omit<Static<typeof ChangesQuery>, 'after' | 'resources'> & { limit: number; after?: ReadCursor; resources?: ListTable[] };

export const Change = Type.Object(
  {
    resource: Type.Enum([...LIST_TABLES], { type: 'string' }),
    id: Type.String(),
    change: Type.Enum(['upsert', 'delete'], { type: 'string', description: 'upsert: the record as it is now; delete: it is gone (record is null)' }),
    changed_at: { ...Timestamp, description: 'when the import that made the change committed (UTC, whole seconds)' },
    record: Type.Union([Student, Instructor, Vehicle, Lesson, Contract, Payment, Lead, Type.Null()], {
      description: 'the record exactly as its list serves it, or null for a deletion',
    }),
  },
  { additionalProperties: false, title: 'Change' },
);

export const ChangeList = Type.Object(
  {
    items: Type.Array(Change),
    meta: Type.Object(
      {
        next_cursor: Type.String({ description: 'the place after the last change of this page (the `after` given when there is none): save it and pass it as `after`' }),
        has_more: Type.Boolean({ description: 'whether another page is waiting now' }),
        limit: Type.Integer({ description: 'page size applied' }),
      },
      { additionalProperties: false, title: 'ChangeMeta' },
    ),
  },
  { additionalProperties: false, title: 'ChangeList' },
);
