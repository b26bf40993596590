/** How the cabinet shows times and counts: in the school's own time zone, to the minute. */
const dateTimes = new Map<string, Intl.DateTimeFormat>();
const counts = new Intl.NumberFormat('en-US');

function dateTime(timeZone: string): Intl.DateTimeFormat {
  let f = dateTimes.get(timeZone);
  if (!f) {
    // sv-SE writes dates the ISO way: 2026-03-12 14:05.
    f = new Intl.DateTimeFormat('sv-SE', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
    dateTimes.set(timeZone, f);
  }
  return f;
}

/** A stored UTC timestamp as local date and time in `timeZone`; `fallback` when there is none. */
export function formatWhen(timestamp: string | null, timeZone: string, fallback = 'never'): string {
  if (timestamp === null) return fallback;
  const ms = Date.parse(timestamp);
  return Number.isNaN(ms) ? timestamp : dateTime(timeZone).format(ms);
}

export function formatCount(n: number): string {
  return counts.format(n);
}
