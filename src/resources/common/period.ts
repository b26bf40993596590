/**
 * Periods: `period_from` / `period_to` as a date (a whole day in the school's time
 * zone) or an RFC 3339 date-time; both bounds inclusive. They become a half-open
 * range of UTC timestamps [from, until) that compares directly with stored text.
 */
import { compareWithinMillisecond, formatTimestamp, nextDay, parseDate, parseDateTime, startOfLocalDay, YEAR_0_MS, YEAR_10000_MS } from '../../domain/time.js';
import type { Tenant } from '../../domain/tenant.js';
import { Problem, type InvalidParam } from '../../problems/index.js';

export interface UtcRange {
  /** Inclusive lower bound, or null when open. */
  from: string | null;
  /** Exclusive upper bound, or null when open. */
  until: string | null;
}

/** Why a period bound of the right form is refused (the query decoder checks it first: src/resources/common/params.ts). */
export const NOT_A_REAL_DATE = 'is not a real date or date-time';

const LAST_STORED_SECOND = formatTimestamp(YEAR_10000_MS - 1000);

const MIDNIGHTS_KEPT = 10_000;
const midnights = new Map<string, number>();

/**
 * startOfLocalDay, remembered: each costs two Intl time-zone conversions, and clients ask
 * for the same months again and again (a time zone's past offsets do not change while
 * the process runs; the map is emptied when full, so it cannot grow without bound).
 */
function localMidnight(ymd: [number, number, number], timeZone: string): number {
  const key = `${timeZone} ${ymd[0]}-${ymd[1]}-${ymd[2]}`;
  let at = midnights.get(key);
  if (at === undefined) {
    if (midnights.size >= MIDNIGHTS_KEPT) midnights.clear();
    at = startOfLocalDay(ymd, timeZone);
    midnights.set(key, at);
  }
  return at;
}

/** The instant a bound names: a date's first (from) or last (to) millisecond, or the date-time itself. */
function instant(text: string, edge: 'from' | 'to', timeZone: string): number | null {
  const ymd = parseDate(text);
  if (!ymd) return parseDateTime(text);
  if (edge === 'from') return localMidnight(ymd, timeZone);
  return localMidnight(nextDay(ymd), timeZone) - 1;
}

/** Resolves the period parameters of a request, or throws 400 naming each bad one. */
export function resolvePeriod(from: string | undefined, to: string | undefined, timeZone: string): UtcRange {
  const invalid: InvalidParam[] = [];
  const start = from === undefined ? null : instant(from, 'from', timeZone);
  const end = to === undefined ? null : instant(to, 'to', timeZone);
  if (from !== undefined && start === null) invalid.push({ name: 'period_from', reason: NOT_A_REAL_DATE });
  if (to !== undefined && end === null) invalid.push({ name: 'period_to', reason: NOT_A_REAL_DATE });
  // Two dates in order are never refused, even when the clocks skipped the days between them.
  const datesInOrder = () => parseDate(from!) !== null && parseDate(to!) !== null && from! <= to!;
  // Looked at closer only when the start is not before the end (rarely): a date's end is its
  // last whole millisecond, and a date-time within it (`.9999`, read as that millisecond
  // and a half) is not after it; two date-times in one millisecond are ordered by all their digits.
  const after = start !== null && end !== null && start >= end && (parseDate(to!) !== null ? start >= end + 1 : start > end || compareWithinMillisecond(from!, to!) > 0);
  if (invalid.length === 0 && after && !datesInOrder()) {
    invalid.push({ name: 'period_from', reason: 'must not be after period_to' });
  }
  if (invalid.length > 0) throw Problem.invalid(invalid);
  // Stored times are whole seconds, so the inclusive bounds round inward to whole seconds.
  const first = start === null ? null : Math.ceil(start / 1000) * 1000;
  // A start past the four-digit years: no stored time is in the period (its six-digit year
  // would sort before them all as text).
  if (first !== null && first >= YEAR_10000_MS) return { from: LAST_STORED_SECOND, until: LAST_STORED_SECOND };
  // A date the clocks skipped whole (Pacific/Apia, 2011-12-30) ends where it starts: the
  // period is empty, not inverted.
  const last = end === null ? null : Math.max(end, (start ?? end) - 1);
  // An end past the four-digit years leaves the period open: every stored time is before it.
  const until = last === null ? null : Math.floor(last / 1000) * 1000 + 1000;
  return {
    // A start before the four-digit years is their first second (its six-digit form would not sort as a time).
    from: first === null ? null : formatTimestamp(Math.max(first, YEAR_0_MS)),
    until: until === null || until >= YEAR_10000_MS ? null : formatTimestamp(Math.max(until, YEAR_0_MS)),
  };
}

/**
 * A period's bounds as values of a prepared query (see `prepared` in src/db): a bound
 * that is open is left undefined, so each combination of bounds is its own query.
 */
export interface PeriodBounds {
  from?: string | undefined;
  until?: string | undefined;
}

export function periodBounds({ from, until }: UtcRange): PeriodBounds {
  return { from: from ?? undefined, until: until ?? undefined };
}

/** The period a query's `period_from` and `period_to` name, in the school's time zone. */
export function periodOf(query: { period_from?: string | undefined; period_to?: string | undefined }, tenant: Tenant): UtcRange {
  return resolvePeriod(query.period_from, query.period_to, tenant.timezone);
}
