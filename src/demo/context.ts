/**
 * What every part of the demo generator shares: one random stream (so a seed fixes the
 * whole file), the school's calendar, and the year the data covers.
 */
import { formatMoney } from '../domain/money.js';
import type { Calendar, Day } from './calendar.js';
import type { Random } from './random.js';

export interface Demo {
  readonly random: Random;
  readonly calendar: Calendar;
  readonly currency: string;
  /** The first day of the twelve months of data before `now`. */
  readonly firstDay: Day;
  /** Car plate region codes of the school's area. */
  readonly regions: readonly string[];
}

/** A timestamp at a random local time in [fromMinutes, toMinutes] after midnight, on a 5-minute grid. */
export function timeOn(demo: Demo, day: Day, fromMinutes: number, toMinutes: number): string {
  const minutes = fromMinutes + 5 * demo.random.int(0, Math.floor((toMinutes - fromMinutes) / 5));
  return demo.calendar.timestamp(demo.calendar.at(day, minutes));
}

/** Whole roubles (or the currency's major unit) as the import format's money string. */
export function money(major: number): string {
  return formatMoney(Math.round(major * 100));
}

/** `value` rounded to a multiple of `step` (prices and payments are round numbers). */
export function roundTo(value: number, step: number): number {
  return Math.round(value / step) * step;
}

export const pad = (n: number, width: number): string => String(n).padStart(width, '0');

/** Minutes after local midnight of a wall-clock time. */
export const clock = (hours: number, minutes = 0): number => hours * 60 + minutes;
