/**
 * The queries behind every paged list (students, contracts, lessons, payments, leads):
 * a page of rows in the list's order (`orderBy`, then id), the same page found through
 * the covering index first when the offset is deep, and the count of the whole filtered
 * list for `meta.total`. Each resource says only what differs: its table, columns,
 * order and filters.
 */
import type { Kysely, SelectQueryBuilder } from 'kysely';
import { prepared, type Reader } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { DEEP_OFFSET } from './params.js';

type ListTable = 'students' | 'contracts' | 'lessons' | 'payments' | 'leads';

/**
 * A list's filtered query before its columns are chosen. Its table differs per list, so
 * Kysely cannot type the columns here: each resource types its own filter (through
 * `filtered`, built on its table) and its rows.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type FilteredQuery = SelectQueryBuilder<any, any, object>;

export interface ListSpec<T extends ListTable, F extends { schoolId: string }> {
  table: T;
  columns: readonly (keyof Database[T] & string)[];
  /** The list's order; ties are broken by id, so pages never overlap or skip. */
  orderBy: keyof Database[T] & string;
  /** The list's rows of the filter's school, with the filter's conditions. */
  filtered: (db: Kysely<Database>, filter: F) => SelectQueryBuilder<Database, T, object>;
}

export interface ListPage<R> {
  rows: R[];
  total: number;
}

/** The page and count queries of a list, compiled once per combination of filters. */
export function pagedList<T extends ListTable, F extends { schoolId: string }, R>(spec: ListSpec<T, F>) {
  const { columns, orderBy } = spec;
  const filtered = spec.filtered as (db: Kysely<Database>, filter: F) => FilteredQuery;
  type Window = F & { limit: number; offset: number };

  const page = prepared((db, q: Window) => filtered(db, q).select(columns).orderBy(orderBy).orderBy('id').limit(q.limit).offset(q.offset));
  // Past DEEP_OFFSET, the rows to skip are walked in the index alone (ids only), and
  // only the page's rows are read from the table.
  const deepPage = prepared((db, q: Window) =>
    (db.selectFrom(spec.table) as FilteredQuery)
      .where('school_id', '=', q.schoolId)
      .where('id', 'in', filtered(db, q).select('id').orderBy(orderBy).orderBy('id').limit(q.limit).offset(q.offset))
      .select(columns)
      .orderBy(orderBy)
      .orderBy('id'),
  );
  const count = prepared((db, q: F) => filtered(db, q).select((eb) => eb.fn.countAll<number>().as('total')));

  return async (reads: Reader, filter: F, limit: number, offset: number): Promise<ListPage<R>> => {
    const [rows, [counted]] = await Promise.all([(offset >= DEEP_OFFSET ? deepPage : page)(reads, { ...filter, limit, offset }), count(reads, filter)]);
    return { rows: rows as R[], total: counted?.total ?? 0 };
  };
}
