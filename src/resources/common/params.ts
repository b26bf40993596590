/**
 * Query parameter schemas shared by the routes. They are plain JSON Schema: the
 * query decoder validates with them and the OpenAPI document publishes them.
 */
import { Type } from 'typebox';
import { ID_PATTERN } from '../../domain/ids.js';
import { parseDate, parseDateTime } from '../../domain/time.js';
import { NOT_A_REAL_DATE } from './period.js';
import { checked } from './query.js';

export const PERIOD_PATTERN = '^\\d{4}-\\d{2}-\\d{2}([Tt]\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?([Zz]|[+-]\\d{2}:\\d{2}))?$';

export const MAX_LIMIT = 200;
export const DEFAULT_LIMIT = 50;
export const MAX_OFFSET = 1_000_000;

export const Limit = Type.Integer({ minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: 'page size' });
export const Offset = Type.Integer({ minimum: 0, maximum: MAX_OFFSET, default: 0, description: 'number of records to skip' });

/** An id filter. The description completes the sentence "must be ...". */
export const IdParam = (what: string) =>
  Type.String({ pattern: ID_PATTERN, description: `an identifier of 1-64 characters A-Z a-z 0-9 _ - (${what})` });

/** A date or date-time of the period pattern that names a real day and time (not 2026-02-30, not 24:00), kept as text. */
const REAL_DATE = { read: (v: string) => (parseDate(v) !== null || parseDateTime(v) !== null ? v : null), reason: NOT_A_REAL_DATE };

export const Period = (edge: 'start' | 'end') =>
  checked(
    Type.String({
      pattern: PERIOD_PATTERN,
      description:
        edge === 'start'
          ? 'a date YYYY-MM-DD (from the start of that day in the school time zone) or an RFC 3339 date-time with offset; inclusive'
          : 'a date YYYY-MM-DD (to the end of that day in the school time zone) or an RFC 3339 date-time with offset; inclusive',
    }),
    REAL_DATE,
  );

export const Flag = Type.Boolean();

/** For endpoints without parameters: any query parameter is unknown, so 400. */
export const NoQuery = Type.Object({}, { additionalProperties: false });

export const Paging = { limit: Type.Optional(Limit), offset: Type.Optional(Offset) };

/** A decoded list query: paging always present (the decoder applies the defaults). */
export type Paged<Q> = Q & { limit: number; offset: number };

/**
 * From this offset on, a filtered list finds its page's ids in the filter's index alone and
 * then reads only those rows: a plain LIMIT/OFFSET makes the database read every skipped
 * row from the table, and on a shallow page the extra lookup is not worth it
 * (docs/performance.md has the figures).
 */
export const DEEP_OFFSET = 1000;
