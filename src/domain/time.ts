/**
 * Time: stored timestamps are UTC text `YYYY-MM-DDTHH:MM:SSZ` (whole seconds), dates
 * `YYYY-MM-DD`. Periods are read in the school's time zone.
 */

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2}))$/;

/** Formats an instant as the API's UTC timestamp, dropping milliseconds. */
export function formatTimestamp(epochMs: number): string {
  return new Date(epochMs).toISOString().slice(0, 19) + 'Z';
}

export function nowTimestamp(): string {
  return formatTimestamp(Date.now());
}

/**
 * Date.UTC for every year of the four-digit range: Date.UTC reads the years 0-99 as
 * 1900-1999. Months from 0; days and hours may overflow as with Date.UTC.
 */
export function utcMs(year: number, month: number, day: number, hour = 0, minute = 0, second = 0): number {
  if (year >= 100) return Date.UTC(year, month, day, hour, minute, second);
  const at = new Date(0);
  at.setUTCFullYear(year, month, day);
  return at.setUTCHours(hour, minute, second, 0);
}

/** The calendar day after [year, month, day] (months from 1), across month and year ends. */
export function nextDay([year, month, day]: [number, number, number]): [number, number, number] {
  const next = new Date(utcMs(year, month - 1, day + 1));
  return [next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate()];
}

const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function validYmd(y: number, m: number, d: number): boolean {
  if (m < 1 || m > 12 || d < 1) return false;
  const leap = m === 2 && y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  return d <= MONTH_DAYS[m - 1]! + (leap ? 1 : 0);
}

/** A calendar date as [year, month, day], or null when malformed or impossible (2026-02-30). */
export function parseDate(text: string): [number, number, number] | null {
  const m = DATE.exec(text);
  if (!m) return null;
  const ymd: [number, number, number] = [Number(m[1]), Number(m[2]), Number(m[3])];
  return validYmd(...ymd) ? ymd : null;
}

/** Already in the stored form, `YYYY-MM-DDTHH:MM:SSZ`: UTC whole seconds (validity aside). */
const STORED_FORM = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

/** The number the two digits at `i` of `text` make. */
const twoDigits = (text: string, i: number): number => (text.charCodeAt(i) - 48) * 10 + text.charCodeAt(i + 1) - 48;

/**
 * An RFC 3339 date-time with offset as epoch milliseconds (fractions kept), or null
 * when malformed or impossible. The stored form, which most import files use, is read
 * digit by digit (an import reads several per record); any other through DATE_TIME.
 */
export function parseDateTime(text: string): number | null {
  if (STORED_FORM.test(text)) {
    const y = twoDigits(text, 0) * 100 + twoDigits(text, 2);
    const mo = twoDigits(text, 5);
    const d = twoDigits(text, 8);
    const h = twoDigits(text, 11);
    const mi = twoDigits(text, 14);
    const s = twoDigits(text, 17);
    return validYmd(y, mo, d) && h <= 23 && mi <= 59 && s <= 59 ? utcMs(y, mo - 1, d, h, mi, s) : null;
  }
  const m = DATE_TIME.exec(text);
  if (!m) return null;
  const [y, mo, d, h, mi, s] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number, number];
  if (!validYmd(y, mo, d) || h > 23 || mi > 59 || s > 59) return null;
  let offsetMin = 0;
  if (m[9]) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return null;
    offsetMin = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const fraction = m[7] ? fractionMs(m[7]) : 0;
  return utcMs(y, mo - 1, d, h, mi, s) + fraction - offsetMin * 60_000;
}

/**
 * A fraction of a second (`.123456`, any number of digits) in milliseconds. Digits past
 * the third count as half a millisecond: an instant between two milliseconds stays
 * strictly between them, where adding 0.000001 ms to an epoch would be lost.
 */
function fractionMs(text: string): number {
  const ms = Number(text.slice(1, 4).padEnd(3, '0'));
  return /[1-9]/.test(text.slice(4)) ? ms + 0.5 : ms;
}

/**
 * Orders two date-times that parseDateTime puts in the same millisecond by the digits of
 * their fractions past the third (an offset moves whole minutes, so those digits alone
 * decide): negative, zero or positive as `a` is before, at or after `b`.
 */
export function compareWithinMillisecond(a: string, b: string): number {
  const beyond = (text: string) => /\.\d{3}(\d*)/.exec(text)?.[1] ?? '';
  const [x, y] = [beyond(a), beyond(b)];
  const width = Math.max(x.length, y.length);
  const [px, py] = [x.padEnd(width, '0'), y.padEnd(width, '0')];
  return px < py ? -1 : px > py ? 1 : 0;
}

/** The first instant of the four-digit years the stored form has, and the first after them. */
export const YEAR_0_MS = utcMs(0, 0, 1);
export const YEAR_10000_MS = utcMs(10000, 0, 1);

/**
 * A timestamp from the import format: an RFC 3339 date-time, normalised to UTC whole
 * seconds; null when its UTC instant falls outside the years 0000-9999 the stored form has.
 */
export function normaliseTimestamp(text: string): string | null {
  const ms = parseDateTime(text);
  if (ms === null || ms % 1000 !== 0 || ms < YEAR_0_MS || ms >= YEAR_10000_MS) return null;
  // Most files already give UTC: the text is then the stored form as it is.
  return STORED_FORM.test(text) ? text : formatTimestamp(ms);
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      era: 'short',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/**
 * A time zone's IANA name as the runtime's time zone data spells it (`europe/moscow` is
 * Europe/Moscow, a link such as `US/Eastern` its zone), or null when it names none. Intl
 * also takes UTC offsets (`+03:00`, `-0500`): they are no IANA name and no place's rules.
 */
export function canonicalTimeZone(name: string): string | null {
  if (/^[+-]/.test(name)) return null;
  try {
    return formatter(name).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/** Offset of `timeZone` from UTC at the instant `epochMs`, in milliseconds. */
function zoneOffset(timeZone: string, epochMs: number): number {
  const parts = { year: 0, month: 1, day: 1, hour: 0, minute: 0, second: 0 };
  let beforeCommonEra = false;
  for (const p of formatter(timeZone).formatToParts(new Date(epochMs))) {
    if (p.type in parts) parts[p.type as keyof typeof parts] = Number(p.value);
    else if (p.type === 'era') beforeCommonEra = p.value === 'BC';
  }
  // The year 0 is 1 BC to Intl.
  const year = beforeCommonEra ? 1 - parts.year : parts.year;
  const local = utcMs(year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second);
  return local - (epochMs - (((epochMs % 1000) + 1000) % 1000));
}

const HOUR_MS = 3_600_000;

/**
 * The instant a local calendar day begins in `timeZone`, as epoch milliseconds: the first
 * instant whose local date is that day. Where the clocks jump over midnight, that is the
 * jump itself; where midnight comes twice, the first one.
 */
export function startOfLocalDay([y, m, d]: [number, number, number], timeZone: string): number {
  const wall = utcMs(y, m - 1, d);
  // Local midnight lies within [wall - 14 h, wall + 12 h]: the offsets at the window's ends
  // are the ones it can have, since zones change their clocks at most once in a day.
  const before = zoneOffset(timeZone, wall - 14 * HOUR_MS);
  const after = zoneOffset(timeZone, wall + 12 * HOUR_MS);
  if (before === after) return wall - before;
  // A candidate is a real local midnight when the offset in force at it is the one it assumed.
  const early = wall - before;
  const late = wall - after;
  const candidates = [early, late].filter((at, i) => zoneOffset(timeZone, at) === (i === 0 ? before : after));
  if (candidates.length > 0) return Math.min(...candidates);
  // Midnight was skipped: the day begins at the change, the first second on the later offset.
  let lo = Math.floor(late / 1000);
  let hi = Math.ceil(early / 1000);
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (zoneOffset(timeZone, mid * 1000) === after) hi = mid;
    else lo = mid + 1;
  }
  return lo * 1000;
}

/** The calendar date of an instant in `timeZone`, as `YYYY-MM-DD`. */
export function localDate(epochMs: number, timeZone: string): string {
  return new Date(epochMs + zoneOffset(timeZone, epochMs)).toISOString().slice(0, 10);
}
