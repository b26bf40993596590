/**
 * How each language writes times, days and counts. Times are in the school's own time
 * zone, to the minute: English keeps the ISO order (2026-03-12 14:05), Russian its own
 * (12.03.2026, 14:05). Formatters are made once per language and time zone.
 */
export const LANGS = ['en', 'ru'] as const;
export type Lang = (typeof LANGS)[number];

const TIME_LOCALE: Record<Lang, string> = { en: 'sv-SE', ru: 'ru-RU' };
const COUNT_LOCALE: Record<Lang, string> = { en: 'en-US', ru: 'ru-RU' };

const dateTimes = new Map<string, Intl.DateTimeFormat>();
const counts = new Map<Lang, Intl.NumberFormat>();

function dateTime(lang: Lang, timeZone: string): Intl.DateTimeFormat {
  const id = `${lang} ${timeZone}`;
  let f = dateTimes.get(id);
  if (!f) {
    f = new Intl.DateTimeFormat(TIME_LOCALE[lang], { timeZone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
    dateTimes.set(id, f);
  }
  return f;
}

/** A stored UTC timestamp as local date and time in `timeZone`. */
export function formatTime(lang: Lang, timestamp: string, timeZone: string): string {
  const ms = Date.parse(timestamp);
  return Number.isNaN(ms) ? timestamp : dateTime(lang, timeZone).format(ms);
}

/**
 * The moment something ends, as formatTime writes it, except that a local midnight is the
 * end of the day before (2026-12-01 24:00): a key chosen to work through 1 December does not
 * read as ending on the 2nd.
 */
export function formatEnd(lang: Lang, timestamp: string, timeZone: string): string {
  const ms = Date.parse(timestamp);
  const text = formatTime(lang, timestamp, timeZone);
  if (Number.isNaN(ms) || ms % 60_000 !== 0 || !text.endsWith(' 00:00')) return text;
  return `${dateTime(lang, timeZone).format(ms - 60_000).slice(0, -' 23:59'.length)} 24:00`;
}

/** A calendar day (`YYYY-MM-DD`) as the language writes it: as it is, or 12.03.2026. */
export function formatDay(lang: Lang, day: string): string {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day);
  return lang === 'ru' && m ? `${m[3]}.${m[2]}.${m[1]}` : day;
}

export function formatCount(lang: Lang, n: number): string {
  let f = counts.get(lang);
  if (!f) {
    f = new Intl.NumberFormat(COUNT_LOCALE[lang]);
    counts.set(lang, f);
  }
  return f.format(n);
}
