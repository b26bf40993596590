/**
 * The finance summary: income by method and expense by category over a period, in one
 * statement. The whole UTC months of the period are read from the month totals the
 * importer keeps (src/importer/day-totals.ts), the whole UTC days around them from the day
 * totals, and only the partial days at its two edges, at most a day each, from the payment
 * and expense rows (their covering indexes (school_id, paid_at, ..., amount_minor) and
 * (school_id, spent_at, category, amount_minor)). So the cost follows the number of months
 * and days, not of payments: a year of the largest school is about a hundred total rows.
 */
import { sql, type Compilable, type Kysely, type RawBuilder } from 'kysely';
import type { Tenant } from '../../domain/tenant.js';
import { prepared, type Reader } from '../../db/index.js';
import { EXPENSE_CATEGORIES, PAYMENT_METHODS } from '../../domain/enums.js';
import { formatMoney, subtractMoney } from '../../domain/money.js';
import type { UtcRange } from '../common/period.js';
import type { FinanceSummary, FinanceSummaryQuery } from './schema.js';
import { FINANCE_SIDES, type FinanceSide } from './sides.js';

/** Minor-unit totals keyed by every name of `keys`, zero until added to. */
function zeroed<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

function formatAll<K extends string>(totals: Record<K, number>): Record<K, string> {
  return Object.fromEntries(Object.entries<number>(totals).map(([k, minor]) => [k, formatMoney(minor)])) as Record<K, string>;
}

const sumValues = (totals: Record<string, number>): number => Object.values(totals).reduce((a, b) => a + b, 0);

/**
 * A period cut into its whole UTC months, the whole UTC days around them and the partial
 * days at its two edges. A part the period does not have is undefined, both its bounds, so
 * that it is left out of the statement (its shape; see `prepared`).
 */
interface Split {
  schoolId: string;
  /** Rows summed one by one: [from, headEnd) and [tailStart, until). */
  from: string | undefined;
  headEnd: string | undefined;
  tailStart: string | undefined;
  until: string | undefined;
  /** Day totals of [firstDay, headDaysEnd) and [tailDaysStart, endDay); with no whole month, all the days in the first. */
  firstDay: string | undefined;
  headDaysEnd: string | undefined;
  tailDaysStart: string | undefined;
  endDay: string | undefined;
  /** Month totals of [firstMonth, endMonth) (`YYYY-MM`). */
  firstMonth: string | undefined;
  endMonth: string | undefined;
}

const DAY_MS = 86_400_000;
/** An end after every stored time: none has 60 seconds, so 23:59:59 sorts before it. */
const AFTER_LAST_SECOND = '9999-12-31T23:59:60Z';
const LAST_DAY_MS = Date.UTC(9999, 11, 31);
const dayText = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const startOf = (day: string) => `${day}T00:00:00Z`;

/** The totals' parts of a period that reads none. */
const NO_TOTALS = { firstDay: undefined, headDaysEnd: undefined, tailDaysStart: undefined, endDay: undefined, firstMonth: undefined, endMonth: undefined } as const;

/** [start, end) as a part's two bounds, or both undefined when it is empty. */
function part(start: string, end: string): [string, string] | [undefined, undefined] {
  return start < end ? [start, end] : [undefined, undefined];
}

/** The first day of a month at or after a UTC midnight, and the first day of the month of another. */
function monthsWithin(firstDayMs: number, endDayMs: number): [number, number] {
  const first = new Date(firstDayMs);
  // Date's setters keep years below 100 as they are (Date.UTC would read 5 as 1905).
  if (first.getUTCDate() !== 1) first.setUTCMonth(first.getUTCMonth() + 1, 1);
  const end = new Date(endDayMs);
  end.setUTCDate(1);
  return [first.getTime(), end.getTime()];
}

/**
 * [from, until) as UTC timestamps, or from `from` on when `until` is null: the whole months
 * inside it, the whole days around them, and the edges left over; null when it is empty.
 */
function splitPeriod(schoolId: string, from: string, end: string | null): Split | null {
  const fromMs = Date.parse(from);
  const until = end ?? AFTER_LAST_SECOND;
  const firstDayMs = Math.ceil(fromMs / DAY_MS) * DAY_MS;
  const endDayMs = end === null ? LAST_DAY_MS : Math.floor(Date.parse(end) / DAY_MS) * DAY_MS;
  if (firstDayMs >= endDayMs) {
    // No whole day inside: every row of the period is summed, and no total read.
    if (from >= until) return null;
    return { schoolId, from, headEnd: until, tailStart: undefined, until: undefined, ...NO_TOTALS };
  }
  const [firstDay, endDay] = [dayText(firstDayMs), dayText(endDayMs)];
  const [headFrom, headEnd] = part(from, startOf(firstDay));
  const [tailStart, tailUntil] = part(startOf(endDay), until);
  const [firstMonthMs, endMonthMs] = monthsWithin(firstDayMs, endDayMs);
  if (firstMonthMs >= endMonthMs) {
    return { schoolId, from: headFrom, headEnd, tailStart, until: tailUntil, ...NO_TOTALS, firstDay, headDaysEnd: endDay };
  }
  const [firstMonthDay, endMonthDay] = [dayText(firstMonthMs), dayText(endMonthMs)];
  const [headDaysFrom, headDaysEnd] = part(firstDay, firstMonthDay);
  const [tailDaysStart, tailDaysEnd] = part(endMonthDay, endDay);
  return {
    schoolId,
    from: headFrom,
    headEnd,
    tailStart,
    until: tailUntil,
    firstDay: headDaysFrom,
    headDaysEnd,
    tailDaysStart,
    endDay: tailDaysEnd,
    firstMonth: firstMonthDay.slice(0, 7),
    endMonth: endMonthDay.slice(0, 7),
  };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the two sides differ only in their table and column names
type Untyped = Kysely<any>;

interface SummaryRow {
  side: 'income' | 'expense';
  name: string;
  /** Minor units; null for an empty range; text where the driver returns sums as text. */
  total: number | string | null;
}

/**
 * Rows of (side, name, total): per side, the month totals of the whole months, the day
 * totals of the whole days around them, and the signed sums of the rows of each edge; only
 * the parts the period has. One round trip on PostgreSQL.
 */
const summaryRows = prepared((kdb, q: Split) => {
  const db = kdb as unknown as Untyped;
  const parts = (side: FinanceSide) => {
    const sum = (table: string, at: string, amount: RawBuilder<unknown>, start: string | undefined, end: string | undefined) =>
      start === undefined || end === undefined
        ? []
        : [
            db
              .selectFrom(table)
              .where('school_id', '=', q.schoolId)
              .where(at, '>=', start)
              .where(at, '<', end)
              .select([sql.lit(side.label).as('side'), `${side.name} as name`, sql<number>`sum(${amount})`.as('total')])
              .groupBy(side.name),
          ];
    const totals = sql`amount_minor`;
    return [
      ...sum(side.months, 'month', totals, q.firstMonth, q.endMonth),
      ...sum(side.totals, 'day', totals, q.firstDay, q.headDaysEnd),
      ...sum(side.totals, 'day', totals, q.tailDaysStart, q.endDay),
      ...sum(side.rows, side.at, side.amount, q.from, q.headEnd),
      ...sum(side.rows, side.at, side.amount, q.tailStart, q.until),
    ];
  };
  const [first, ...rest] = FINANCE_SIDES.flatMap(parts);
  return rest.reduce((all, part) => all.unionAll(part), first!) as Compilable<SummaryRow>;
});

export async function getFinanceSummary(reads: Reader, tenant: Tenant, q: FinanceSummaryQuery, period: UtcRange): Promise<FinanceSummary> {
  // Both bounds are required (the route's schema); an end past the four-digit years comes
  // open (resolvePeriod).
  const split = splitPeriod(tenant.id, period.from!, period.until);
  const rows = split === null ? [] : await summaryRows(reads, split);

  const byMethod = zeroed(PAYMENT_METHODS);
  const byCategory = zeroed(EXPENSE_CATEGORIES);
  for (const row of rows) {
    const total = Number(row.total ?? 0);
    if (row.side === 'expense') byCategory[row.name as keyof typeof byCategory] += total;
    else byMethod[row.name as keyof typeof byMethod] += total;
  }

  const income = sumValues(byMethod);
  const expense = sumValues(byCategory);
  return {
    period_from: q.period_from,
    period_to: q.period_to,
    currency: tenant.currency,
    income: formatMoney(income),
    expense: formatMoney(expense),
    profit: formatMoney(subtractMoney(income, expense)),
    income_by_method: formatAll(byMethod),
    expense_by_category: formatAll(byCategory),
  };
}
