/**
 * The finance summary: income by method and expense by category over a period, in one
 * statement. The whole UTC days of the period are read from the day totals the importer
 * keeps (src/importer/day-totals.ts); only the partial days at its two edges, at most a
 * day each, from the payment and expense rows (their covering indexes
 * (school_id, paid_at, ..., amount_minor) and (school_id, spent_at, category, amount_minor)).
 * So the cost follows the number of days, not of payments: a year of the largest school
 * is a few hundred total rows.
 */
import { sql, type Compilable, type Kysely } from 'kysely';
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

/** A period cut into its whole UTC days and the partial days around them. */
interface Split {
  schoolId: string;
  /** The rows of [from, headEnd) and [tailStart, until) are summed one by one ... */
  from: string;
  headEnd: string;
  tailStart: string;
  until: string;
  /** ... and the day totals of [firstDay, endDay). */
  firstDay: string;
  endDay: string;
}

const DAY_MS = 86_400_000;
/** An end after every stored time: none has 60 seconds, so 23:59:59 sorts before it. */
const AFTER_LAST_SECOND = '9999-12-31T23:59:60Z';
const LAST_DAY_MS = Date.UTC(9999, 11, 31);
const dayText = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const startOf = (day: string) => `${day}T00:00:00Z`;

/**
 * [from, until) as UTC timestamps, or from `from` on when `until` is null: the whole days
 * inside it, and the edges left over.
 */
function splitPeriod(schoolId: string, from: string, end: string | null): Split {
  const fromMs = Date.parse(from);
  const until = end ?? AFTER_LAST_SECOND;
  const firstDayMs = Math.ceil(fromMs / DAY_MS) * DAY_MS;
  const endDayMs = end === null ? LAST_DAY_MS : Math.floor(Date.parse(end) / DAY_MS) * DAY_MS;
  if (firstDayMs >= endDayMs) {
    // No whole day inside: every row of the period is summed, and no total read.
    return { schoolId, from, headEnd: until, tailStart: until, until, firstDay: '', endDay: '' };
  }
  const [firstDay, endDay] = [dayText(firstDayMs), dayText(endDayMs)];
  return { schoolId, from, headEnd: startOf(firstDay), tailStart: startOf(endDay), until, firstDay, endDay };
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
 * Rows of (side, name, total): per side, the day totals of the whole days and the signed
 * sums of the rows of each edge. One round trip on PostgreSQL.
 */
const summaryRows = prepared((kdb, q: Split) => {
  const db = kdb as unknown as Untyped;
  const parts = (side: FinanceSide) => {
    const edge = (start: string, end: string) =>
      db
        .selectFrom(side.rows)
        .where('school_id', '=', q.schoolId)
        .where(side.at, '>=', start)
        .where(side.at, '<', end)
        .select([sql.lit(side.label).as('side'), `${side.name} as name`, sql<number>`sum(${side.amount})`.as('total')])
        .groupBy(side.name);
    const days = db
      .selectFrom(side.totals)
      .where('school_id', '=', q.schoolId)
      .where('day', '>=', q.firstDay)
      .where('day', '<', q.endDay)
      .select([sql.lit(side.label).as('side'), `${side.name} as name`, sql<number>`sum(amount_minor)`.as('total')])
      .groupBy(side.name);
    return [days, edge(q.from, q.headEnd), edge(q.tailStart, q.until)];
  };
  const [first, ...rest] = FINANCE_SIDES.flatMap(parts);
  return rest.reduce((all, part) => all.unionAll(part), first!) as Compilable<SummaryRow>;
});

export async function getFinanceSummary(reads: Reader, tenant: Tenant, q: FinanceSummaryQuery, period: UtcRange): Promise<FinanceSummary> {
  // Both bounds are required (the route's schema); an end past the four-digit years comes
  // open (resolvePeriod).
  const rows = await summaryRows(reads, splitPeriod(tenant.id, period.from!, period.until));

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
