/**
 * The query behind every list: one statement answers both the page (its rows' stored
 * items, joined by the database in the list's order: src/resources/items.ts) and
 * `meta.total`. Two shapes, chosen by the filter:
 * - by the school alone, or a period: the rows are a run of positions, so the page is a
 *   seek and the total the difference of two ranks, read from the list's blocks (`positioned`);
 * - by other parameters: the page is read through the filter's index in the list's order
 *   and the total counts that index's entries (`filtered`, and `filteredDeep` past DEEP_OFFSET).
 * A list kept whole (`readRun`, src/resources/cache.ts) gives any page narrowed by the school
 * alone without a query (`cutPage`), to the same bytes.
 */
import { sql, type ExpressionBuilder, type Kysely } from 'kysely';
import { asBytes, onPostgres, prepared, type Reader } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { LIST_MODELS, type ListTable } from '../items.js';
import { DEEP_OFFSET } from './params.js';

/** The school and the period every list filter has; a list without a period leaves it out. */
export interface ListFilter {
  schoolId: string;
  /** Inclusive lower bound on the list's order column (UTC text), when given. */
  from?: string | undefined;
  /** Exclusive upper bound on the list's order column, when given. */
  until?: string | undefined;
}

export interface ListSpec<T extends ListTable, F extends ListFilter> {
  table: T;
  /**
   * The filter's other parameters, each named after its column and meaning `column = value`
   * when given (not undefined). Every one has an index led by (school_id, column) in the
   * list's order.
   */
  filters?: readonly (keyof F & keyof Database[T] & string)[];
}

/**
 * The response body of a list, `{"items":[...],"meta":{"total","limit","offset"}}`, made
 * whole by the database: routes send it as it is, under this content type. It is what
 * Fastify's serializer would make of the same page, as every item was made by the item's
 * schema; and the body is one value read from the driver, not assembled per request.
 */
export type ListBody = string | Buffer;

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * A list's whole run of items, in the list's order, as a page's body holds them: any page
 * of the list narrowed by nothing but the school is cut from it (`cutPage`) to the same
 * bytes its query would make.
 */
export interface Run {
  /** The items joined with commas. */
  items: Buffer;
  /** Where each item ends in `items`; the next begins after its comma. Its length is the list's. */
  ends: Uint32Array;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the table differs per list; each resource types its own filter
type Untyped = Kysely<any>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type UntypedEb = ExpressionBuilder<any, any>;

/**
 * A LIMIT given as a value. SQLite reads a bare bound LIMIT while it plans and then expires
 * the statement whenever the value is bound again, so every run would parse and plan it
 * anew; `? + 0` is an expression it evaluates at run time instead.
 */
const boundLimit = (value: number) => sql<number>`${value} + 0`;

/** A list's table, order column and filter columns, untyped: the table differs per list. */
interface Shape {
  name: string;
  order: string;
  filters: readonly string[];
}

/** A list filter with its page: every query below is given one. */
type Window = ListFilter & Record<string, unknown> & { limit: number; offset: number };

const inSchool = (db: Untyped, shape: Shape, q: ListFilter) => db.selectFrom(shape.name).where('school_id', '=', q.schoolId);

/**
 * The items of `page` (a subquery of item and pos, in the list's order) joined with commas,
 * in that order. PostgreSQL is told the order in the aggregate, as its documentation asks.
 * SQLite would sort the page through a temporary B-tree for that (a third of the cost of a
 * page); it keeps a FROM-subquery's ORDER BY for an aggregate such as this one (see "omit
 * ORDER BY" in its select.c) and reads the rows in it, so the order holds as it is.
 */
function joinedItems(db: Untyped, page: ReturnType<typeof inSchool>) {
  const items = (eb: UntypedEb) => eb.fn.agg<string>('string_agg', ['item', sql.lit(',')]);
  const postgres = onPostgres(db);
  return db.selectFrom(page.as('page')).select((eb: UntypedEb) => (postgres ? items(eb).orderBy('pos') : items(eb)).as('items'));
}

/**
 * The body: the joined items (none: null) and the meta, `limit` and `offset` echoed. Each
 * part is parenthesised: SQLite's `||` binds tighter than `-`, so a bare `end - first`
 * there would subtract two concatenations. `limit` and `offset` are cast: better-sqlite3
 * binds every JavaScript number as a REAL, which SQLite writes as text as `50.0`. The meta
 * is made whole before it is joined to the items: each `||` copies both its sides, so the
 * items (kilobytes) are copied once per `||` they stand beside.
 */
function listBody(db: Untyped, total: unknown, items: unknown, q: Window) {
  const meta = sql<string>`'],"meta":{"total":' || (${total}) || ',"limit":' || cast(${q.limit} as integer) || ',"offset":' || cast(${q.offset} as integer) || '}}'`;
  return asBytes(db as Kysely<Database>, sql<string>`'{"items":[' || coalesce((${items}), '') || (${meta})`).as('body');
}

/** The largest position: the end of a page that no row after the period bounds. */
const NO_STOP = sql.lit(2_147_483_647);

/** The school's blocks of a list (src/resources/items.ts). */
const blocksOf = (db: Untyped, shape: Shape, q: ListFilter) => db.selectFrom('list_blocks').where('school_id', '=', q.schoolId).where('list', '=', sql.lit(shape.name));

/**
 * The page of a list narrowed by nothing but the school and a period. Positions rise with
 * the list's order in blocks of consecutive ones (src/resources/items.ts), so a row's rank
 * is its block's first rank plus its slot, and a rank's position its block's first
 * position plus the same: each a seek in `list_blocks`. The period's bounds are the
 * positions of its first row and of the first row after it (each a seek in the order's
 * index); the page is the `limit` rows from the position of the period's first rank plus
 * `offset`, before the bound; the total the difference of the bounds' ranks.
 *
 * Each seek is made once: the period's positions (`at`), then their ranks (`ranks`), then
 * the page's bounds, each a CTE over the one before, materialized: a CTE read once is
 * otherwise inlined, and every reference to its columns planned as a copy of their
 * subqueries (docs/performance.md, "A period's bounds, each sought once").
 */
function positionedQuery(shape: Shape) {
  return prepared((kdb, q: Window) => {
    const db = kdb as unknown as Untyped;
    const int = (value: number) => sql<number>`cast(${value} as integer)`;
    // The list's length: the last block's first rank plus its size.
    const length = (eb: UntypedEb) =>
      eb.fn.coalesce(blocksOf(db, shape, q).select((e: UntypedEb) => e(e.ref('first_rank'), '+', e.ref('n')).as('n')).orderBy('first_rank', 'desc').limit(sql.lit(1)), sql.lit(0));
    // The position of the first row at or after `at` in the list's order; null when none is.
    const firstAt = (at: string) => inSchool(db, shape, q).select('pos').where(shape.order, '>=', at).orderBy(shape.order).orderBy('id').limit(sql.lit(1));
    // The rank of the row at position `pos` (a column of `at`); the list's length when it is null.
    const rankOf = (eb: UntypedEb, pos: string) =>
      eb.fn.coalesce(
        blocksOf(db, shape, q)
          .select((e: UntypedEb) => e(e.ref('first_rank'), '+', e(e.ref(pos), '-', e.ref('first_pos'))).as('r'))
          .where('first_pos', '<=', eb.ref(pos))
          .orderBy('first_pos', 'desc')
          .limit(sql.lit(1)),
        length(eb),
      );
    // The position of the row of rank `rank`: past the last row when the list is shorter.
    const positionOf = (rank: unknown) =>
      blocksOf(db, shape, q)
        .select((e: UntypedEb) => e(e.ref('first_pos'), '+', e(rank as never, '-', e.ref('first_rank'))).as('p'))
        .where('first_rank', '<=', rank as never)
        .orderBy('first_rank', 'desc')
        .limit(sql.lit(1));
    const page = (eb: UntypedEb) =>
      inSchool(db, shape, q)
        .select(['item', 'pos'])
        .where('pos', '>=', eb.ref('bounds.start'))
        .where('pos', '<', eb.ref('bounds.stop'))
        .orderBy('pos')
        .limit(boundLimit(q.limit));
    const body = (eb: UntypedEb) => [listBody(db, eb('bounds.end', '-', eb.ref('bounds.first')), joinedItems(db, page(eb)), q)];

    if (q.from === undefined && q.until === undefined) {
      // The whole list: one seek for the length, one for the page's first position. On
      // PostgreSQL materialized, as its references would be planned as copies otherwise.
      const bounds = db.with((cte) => (onPostgres(kdb) ? cte('bounds').materialized() : cte('bounds')), (w) =>
        w.selectNoFrom((eb) => [
          sql.lit(0).as('first'),
          sql<number>`${length(eb)}`.as('end'),
          sql<number>`${positionOf(int(q.offset))}`.as('start'),
          NO_STOP.as('stop'),
        ]),
      );
      return bounds.selectFrom('bounds').select(body);
    }
    // Typed: a bare null in a CTE is text to PostgreSQL.
    const null_ = sql<number | null>`cast(null as integer)`;
    return db
      .with(
        (cte) => cte('at').materialized(),
        (w) =>
          w.selectNoFrom([
            (q.from === undefined ? null_ : sql<number | null>`${firstAt(q.from)}`).as('from_pos'),
            (q.until === undefined ? null_ : sql<number | null>`${firstAt(q.until)}`).as('until_pos'),
          ]),
      )
      .with(
        (cte) => cte('ranks').materialized(),
        (w) =>
          w.selectFrom('at').select((eb) => [
            sql<number>`${q.from === undefined ? sql.lit(0) : rankOf(eb, 'at.from_pos')}`.as('first'),
            sql<number>`${q.until === undefined ? length(eb) : rankOf(eb, 'at.until_pos')}`.as('end'),
            eb.fn.coalesce('at.until_pos', NO_STOP).as('stop'),
          ]),
      )
      .with(
        (cte) => cte('bounds').materialized(),
        (w) =>
          w.selectFrom('ranks').select((eb) => [
            'ranks.first as first',
            'ranks.end as end',
            sql<number>`${positionOf(eb('ranks.first', '+', int(q.offset)))}`.as('start'),
            'ranks.stop as stop',
          ]),
      )
      .selectFrom('bounds')
      .select(body);
  });
}

/** The rows of the school that match the filter's given parameters and period. */
function matching(db: Untyped, shape: Shape, q: Window) {
  let query = inSchool(db, shape, q);
  for (const column of shape.filters) {
    const value = q[column];
    if (value !== undefined) query = query.where(column, '=', value);
  }
  if (q.from !== undefined) query = query.where(shape.order, '>=', q.from);
  if (q.until !== undefined) query = query.where(shape.order, '<', q.until);
  return query;
}

/** The page of a filtered list: read through the filter's index in the list's order. */
function filteredQuery(shape: Shape) {
  return prepared((kdb, q: Window) => {
    const db = kdb as unknown as Untyped;
    const page = matching(db, shape, q).select(['item', 'pos']).orderBy(shape.order).orderBy('id').limit(boundLimit(q.limit)).offset(q.offset);
    return db.selectNoFrom(() => [listBody(db, matching(db, shape, q).select((e: UntypedEb) => e.fn.countAll().as('n')), joinedItems(db, page), q)]);
  });
}

/**
 * Past DEEP_OFFSET: the rows to skip are walked in the filter's index alone (ids only), and
 * only the page's rows are read; PostgreSQL would read every skipped row otherwise.
 */
function filteredDeepQuery(shape: Shape) {
  return prepared((kdb, q: Window) => {
    const db = kdb as unknown as Untyped;
    const ids = matching(db, shape, q).select('id').orderBy(shape.order).orderBy('id').limit(boundLimit(q.limit)).offset(q.offset);
    const page = inSchool(db, shape, q).where('id', 'in', ids).select(['item', 'pos']).orderBy('pos');
    return db.selectNoFrom(() => [listBody(db, matching(db, shape, q).select((e: UntypedEb) => e.fn.countAll().as('n')), joinedItems(db, page), q)]);
  });
}

const ITEMS_OPEN = Buffer.from('{"items":[');

/** The body of the page at `offset` of `limit` items of the list `run` holds, as `listBody` makes it. */
export function cutPage(run: Run, limit: number, offset: number): Buffer {
  const total = run.ends.length;
  const first = Math.min(offset, total);
  const last = Math.min(offset + limit, total);
  const start = first === 0 ? 0 : run.ends[first - 1]! + 1;
  const end = last === first ? start : run.ends[last - 1]!;
  const meta = `],"meta":{"total":${total},"limit":${limit},"offset":${offset}}}`;
  const body = Buffer.allocUnsafe(ITEMS_OPEN.length + (end - start) + meta.length);
  ITEMS_OPEN.copy(body, 0);
  if (end > start) run.items.copy(body, ITEMS_OPEN.length, start, end);
  body.write(meta, ITEMS_OPEN.length + end - start, 'latin1');
  return body;
}

/** The first `limit` items of the school's list, in its order. */
function runQuery(shape: Shape) {
  return prepared((kdb, q: { schoolId: string; limit: number }) => {
    const db = kdb as unknown as Untyped;
    return inSchool(db, shape, q)
      .select([asBytes(kdb, sql.ref('item')).as('item'), 'pos'])
      .orderBy('pos')
      .limit(boundLimit(q.limit));
  });
}

/** The school's list's length, from its blocks: one seek. */
function lengthQuery(shape: Shape) {
  return prepared((kdb, q: { schoolId: string }) => {
    const db = kdb as unknown as Untyped;
    return db.selectNoFrom((eb: UntypedEb) =>
      eb.fn.coalesce(blocksOf(db, shape, q).select((e: UntypedEb) => e(e.ref('first_rank'), '+', e.ref('n')).as('n')).orderBy('first_rank', 'desc').limit(sql.lit(1)), sql.lit(0)).as('n'),
    );
  });
}

const runQueries = new Map<ListTable, { length: ReturnType<typeof lengthQuery>; items: ReturnType<typeof runQuery> }>();

/**
 * The school's whole list `table` as a run, or null when it has more than `maxItems`
 * items (known from its length, before any item is read) or they come to more than `maxBytes`.
 */
export async function readRun(reads: Reader, table: ListTable, schoolId: string, maxItems: number, maxBytes: number): Promise<Run | null> {
  let queries = runQueries.get(table);
  if (queries === undefined) {
    const shape: Shape = { name: table, order: LIST_MODELS[table].order, filters: [] };
    runQueries.set(table, (queries = { length: lengthQuery(shape), items: runQuery(shape) }));
  }
  const [length] = (await queries.length(reads, { schoolId })) as { n: number | string }[];
  if (Number(length!.n) > maxItems) return null;
  // Its length may have changed since, on PostgreSQL: the read is bounded all the same.
  const rows = (await queries.items(reads, { schoolId, limit: maxItems + 1 })) as { item: string | Buffer; pos: number | string }[];
  if (rows.length > maxItems) return null;
  // In order as read; a batch of PostgreSQL's reads (db/reader.ts) has no order of its own to keep it.
  if (rows.some((row, i) => i > 0 && Number(row.pos) < Number(rows[i - 1]!.pos))) rows.sort((a, b) => Number(a.pos) - Number(b.pos));
  const items = rows.map(({ item }) => (typeof item === 'string' ? Buffer.from(item) : item));
  let bytes = Math.max(0, items.length - 1);
  for (const item of items) bytes += item.length;
  if (bytes + items.length * 4 > maxBytes) return null;
  const run: Run = { items: Buffer.allocUnsafeSlow(bytes), ends: new Uint32Array(items.length) };
  let at = 0;
  items.forEach((item, i) => {
    if (i > 0) run.items[at++] = 0x2c;
    at += item.copy(run.items, at);
    run.ends[i] = at;
  });
  return run;
}

/** A list's page query, compiled once per combination of filters, as a function of the filter and the page. */
export function pagedList<T extends ListTable, F extends ListFilter>(spec: ListSpec<T, F>) {
  const shape: Shape = { name: spec.table, order: LIST_MODELS[spec.table].order, filters: spec.filters ?? [] };
  const positioned = positionedQuery(shape);
  const filtered = filteredQuery(shape);
  const filteredDeep = filteredDeepQuery(shape);
  const narrowed = (filter: Record<string, unknown>): boolean => shape.filters.some((column) => filter[column] !== undefined);

  return async (reads: Reader, filter: F, limit: number, offset: number): Promise<ListBody> => {
    const window = { ...filter, limit, offset } as Window;
    const query = narrowed(window) ? (offset >= DEEP_OFFSET ? filteredDeep : filtered) : positioned;
    const [row] = await query(reads, window);
    return (row as { body: ListBody }).body;
  };
}
