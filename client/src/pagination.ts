/**
 * A list call, stripe-node style: `await` it for one page (the API's envelope), or
 * iterate it with `for await` to walk every record of every page, or collect them
 * with `toArray()` (at most `max` with `toArray({ max })`). Nothing is sent until one
 * of those is used.
 */
import { unexpectedAnswer } from './errors.js';
import type { ListMeta } from './types.js';

/** The API's list envelope. */
export interface Page<T> {
  items: T[];
  meta: ListMeta;
}

export interface PageQuery {
  limit?: number;
  offset?: number;
}

/** The largest page the API serves; iteration uses it unless the query gives `limit`. */
export const MAX_PAGE_SIZE = 200;

export class ListRequest<T, Q extends PageQuery> implements PromiseLike<Page<T>>, AsyncIterable<T> {
  private first: Promise<Page<T>> | null = null;

  private readonly fetchPage: (query: Q) => Promise<Page<T>>;
  private readonly query: Q;

  constructor(
    fetchPage: (query: Q) => Promise<Page<T>>,
    query: Q,
  ) {
    this.fetchPage = fetchPage;
    this.query = query;
  }

  /**
   * The one page the query names (the API's default limit is 50).
   *
   * @example
   * const { items, meta } = await client.students.list({ limit: 20 }).page();
   * console.log(`${items.length} of ${meta.total}`);
   */
  page(): Promise<Page<T>> {
    this.first ??= this.fetchPage(this.query);
    return this.first;
  }

  /** Awaiting a list call gives its page: `const page = await client.students.list()`. */
  then<R1 = Page<T>, R2 = never>(
    onFulfilled?: ((page: Page<T>) => R1 | PromiseLike<R1>) | null,
    onRejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    return this.page().then(onFulfilled, onRejected);
  }

  /**
   * Every record from `offset` (default 0) to the end, page after page in the API's
   * stable order. Pages are `limit` records (200 when the query has none). Pages are read by
   * offset: a record removed (or no longer matching the filter) before the page being read
   * while the walk goes on makes it miss the record that moves up in its place, and one added
   * makes it see a record twice. For a complete copy use `client.changes.list()`.
   *
   * @example
   * for await (const student of client.students.list({ status: 'learning_practice' })) {
   *   console.log(student.full_name);
   * }
   */
  [Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    return this.walk(this.query.limit ?? MAX_PAGE_SIZE);
  }

  private async *walk(limit: number): AsyncGenerator<T, void, undefined> {
    let offset = this.query.offset ?? 0;
    for (;;) {
      const page = await this.fetchPage({ ...this.query, limit, offset });
      // Without its total a walk would not end while pages keep coming: not the service's answer.
      if (!Array.isArray(page.items) || typeof page.meta?.total !== 'number') {
        throw unexpectedAnswer('a list page came without its items or its meta.total');
      }
      yield* page.items;
      offset += page.items.length;
      // An empty page ends the walk too, should records vanish while it goes on.
      if (page.items.length === 0 || offset >= page.meta.total) return;
    }
  }

  /**
   * Collects records into an array: all of them, or at most `max`.
   *
   * @example
   * const all = await client.instructors.list().toArray();
   * const vehicles = await client.vehicles.list().toArray({ max: 1000 });
   */
  async toArray(options: { max?: number } = {}): Promise<T[]> {
    const max = options.max ?? Infinity;
    if (typeof max !== 'number' || Number.isNaN(max)) throw new TypeError('toArray: max must be a number (Infinity, or left out, for all)');
    const out: T[] = [];
    if (max <= 0) return out;
    // No larger pages than needed when the query leaves the page size open.
    const limit = this.query.limit ?? Math.min(MAX_PAGE_SIZE, Math.ceil(max));
    for await (const item of this.walk(limit)) {
      out.push(item);
      if (out.length >= max) break;
    }
    return out;
  }
}
