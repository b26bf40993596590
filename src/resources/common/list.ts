/**
 * The query behind every list: one statement per request answers both the page (its rows'
 * stored items, joined by the database in the list's order) and `meta.total`. See
 * src/resources/items.ts for the read model it reads.
 *
 * Two shapes, chosen by the filter:
 * - Narrowed by nothing but the school and, on lessons, payments and leads, a period: the
 *   rows are a run of consecutive positions (a period is a range of the list's order), so
 *   the page is a seek to a position and the total the difference of two. Neither grows
 *   with the offset or with the size of the list.
 * - Narrowed by other parameters (status, category, ids, is_active): the page is read
 *   through the filter's index in the list's order, and the total counts that index's
 *   entries, so both grow with the filter's matches, not with the list.
 */
import { sql, type ExpressionBuilder, type Kysely } from 'kysely';
import { asBytes, prepared, type Reader } from '../../db/index.js';
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
   * The filter's other parameters as `column = value` conditions; a parameter not given is
   * undefined. Every column here has an index led by (school_id, column) in the list's order.
   */
  equal?(filter: F): Partial<Record<keyof Database[T] & string, string | number | undefined>>;
}

/** What a list answers: the page's items as one JSON text (null for an empty page) and the total. */
export interface ListPage {
  total: number;
  items: string | Buffer | null;
}

/**
 * The response body of a list: items and meta, with the items inserted as the database
 * joined them. Routes send it as it is, under this content type; it is what Fastify's
 * serializer would have made of the same page, as every item was made by the item's schema.
 */
export type ListBody = string | Buffer;

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

const ITEMS_OPEN = Buffer.from('{"items":[');

export function listBody({ total, items }: ListPage, limit: number, offset: number): ListBody {
  const rest = `],"meta":{"total":${total},"limit":${limit},"offset":${offset}}}`;
  if (items === null) return `{"items":[${rest}`;
  if (typeof items === 'string') return `{"items":[${items}${rest}`;
  return Buffer.concat([ITEMS_OPEN, items, Buffer.from(rest)]);
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

/** Positions and items of a list, compiled once per combination of filters. */
export function pagedList<T extends ListTable, F extends ListFilter>(spec: ListSpec<T, F>) {
  const { table } = spec;
  // Built untyped: the table differs per list (each resource types its own filter).
  const name: string = table;
  const order: string = LIST_MODELS[table].order;
  type Window = F & { limit: number; offset: number };
  const equal = (filter: F): [string, unknown][] => Object.entries(spec.equal?.(filter) ?? {}).filter(([, value]) => value !== undefined);

  const joined = (eb: UntypedEb) => eb.fn.agg<string>('string_agg', ['item', sql.lit(',')]).orderBy('pos').as('joined');
  const inSchool = (db: Untyped, q: ListFilter) => db.selectFrom(name).where('school_id', '=', q.schoolId);

  const positioned = prepared((kdb, q: Window) => {
    const db = kdb as unknown as Untyped;
    // The list's length: one past the last position (the min/max optimisation of both
    // engines reads it from the end of the (school_id, pos) index).
    const length = (eb: UntypedEb) => eb(eb.fn.coalesce(inSchool(db, q).select((e: UntypedEb) => e.fn.max('pos').as('m')), sql.lit(-1)), '+', sql.lit(1));
    // The position of the first row at or after `at` in the list's order; the length when none is.
    const firstAt = (eb: UntypedEb, at: string) =>
      eb.fn.coalesce(inSchool(db, q).select('pos').where(order, '>=', at).orderBy(order).orderBy('id').limit(sql.lit(1)), length(eb));
    return db
      .with('bounds', (w) =>
        w.selectNoFrom((eb) => [
          sql<number>`${q.from === undefined ? sql.lit(0) : firstAt(eb, q.from)}`.as('first'),
          sql<number>`${q.until === undefined ? length(eb) : firstAt(eb, q.until)}`.as('end'),
        ]),
      )
      .selectFrom('bounds')
      .select((eb) => [
        eb('bounds.end', '-', eb.ref('bounds.first')).as('total'),
        asBytes(
          kdb,
          inSchool(db, q)
            .select(joined)
            .where('pos', '>=', eb(eb.ref('bounds.first'), '+', q.offset))
            .where('pos', '<', eb(eb(eb.ref('bounds.first'), '+', q.offset), '+', q.limit))
            .where('pos', '<', eb.ref('bounds.end')),
        ).as('items'),
      ]);
  });

  const matching = (db: Untyped, q: F) => {
    let query = inSchool(db, q);
    for (const [column, value] of equal(q)) query = query.where(column, '=', value);
    if (q.from !== undefined) query = query.where(order, '>=', q.from);
    if (q.until !== undefined) query = query.where(order, '<', q.until);
    return query;
  };

  const filtered = prepared((kdb, q: Window) => {
    const db = kdb as unknown as Untyped;
    const page = matching(db, q).orderBy(order).orderBy('id').limit(boundLimit(q.limit)).offset(q.offset);
    return db.selectNoFrom((eb) => [
      matching(db, q).select((e: UntypedEb) => e.fn.countAll().as('n')).as('total'),
      asBytes(kdb, eb.selectFrom(page.select(['item', 'pos']).as('page')).select(joined)).as('items'),
    ]);
  });

  // Past DEEP_OFFSET, the rows to skip are walked in the filter's index alone (ids only),
  // and only the page's rows are read: PostgreSQL would read every skipped row otherwise.
  const filteredDeep = prepared((kdb, q: Window) => {
    const db = kdb as unknown as Untyped;
    const ids = matching(db, q).select('id').orderBy(order).orderBy('id').limit(boundLimit(q.limit)).offset(q.offset);
    return db.selectNoFrom(() => [
      matching(db, q).select((e: UntypedEb) => e.fn.countAll().as('n')).as('total'),
      asBytes(kdb, inSchool(db, q).where('id', 'in', ids).select(joined)).as('items'),
    ]);
  });

  return async (reads: Reader, filter: F, limit: number, offset: number): Promise<ListPage> => {
    const window = { ...filter, limit, offset } as Window;
    const query = equal(filter).length > 0 ? (offset >= DEEP_OFFSET ? filteredDeep : filtered) : positioned;
    const [row] = await query(reads, window);
    return { total: Number(row?.total ?? 0), items: (row?.items as string | Buffer | null | undefined) ?? null };
  };
}
