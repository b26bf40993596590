/**
 * Days and wall-clock times in the school's time zone, relative to a fixed `now`, so the
 * demo school keeps its hours (lessons between 08:00 and 20:00 local time) whatever the
 * time zone, and the generator never reads the clock itself.
 */
import { formatTimestamp, localDate, parseDate, startOfLocalDay } from '../domain/time.js';

/** A calendar day as a count of days since 1970-01-01; plain integers are easy to step through. */
export type Day = number;

const DAY_MS = 86_400_000;

export class Calendar {
  /** The local calendar day that contains `now`. */
  readonly today: Day;
  /** Local midnights by day: a year of lessons asks for the same few hundred days again and again. */
  private readonly midnights = new Map<Day, number>();

  readonly now: number;
  readonly timezone: string;

  constructor(
    now: number,
    timezone: string,
  ) {
    this.now = now;
    this.timezone = timezone;
    this.today = Calendar.parse(localDate(now, timezone));
  }

  static parse(date: string): Day {
    const [y, m, d] = parseDate(date)!;
    return Date.UTC(y, m - 1, d) / DAY_MS;
  }

  /** `YYYY-MM-DD`. */
  date(day: Day): string {
    return new Date(day * DAY_MS).toISOString().slice(0, 10);
  }

  ymd(day: Day): [number, number, number] {
    const d = new Date(day * DAY_MS);
    return [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate()];
  }

  /** 0 = Sunday. */
  weekday(day: Day): number {
    return new Date(day * DAY_MS).getUTCDay();
  }

  /**
   * A day the school gives lessons on: not a Sunday, and not a day when the clocks change
   * (there `startOfLocalDay + minutes` would be off by the shift). Moves forward to the next one.
   */
  workday(day: Day): Day {
    let d = day;
    while (this.weekday(d) === 0 || this.dayLengthMs(d) !== DAY_MS) d++;
    return d;
  }

  /** The instant of local wall-clock `minutes` after midnight on `day`; exact on every workday. */
  at(day: Day, minutes: number): number {
    return this.midnight(day) + minutes * 60_000;
  }

  /** The API's UTC timestamp text of an instant. */
  timestamp(epochMs: number): string {
    return formatTimestamp(epochMs);
  }

  private dayLengthMs(day: Day): number {
    return this.midnight(day + 1) - this.midnight(day);
  }

  private midnight(day: Day): number {
    let instant = this.midnights.get(day);
    if (instant === undefined) {
      instant = startOfLocalDay(this.ymd(day), this.timezone);
      this.midnights.set(day, instant);
    }
    return instant;
  }
}
