/**
 * The changes feed, read from a saved cursor: iterate it with `for await` for every change
 * since the cursor (page after page until the feed has no more), or walk its `pages()` to
 * apply and save page by page. `cursor` is the place to save once the changes read so far
 * are applied: after a page is done, its `next_cursor`.
 */
import { unexpectedAnswer } from './errors.js';
import type { Change, ChangeList } from './types.js';

export interface ChangesQuery {
  /** A cursor saved from an earlier read (`feed.cursor`); left out: from the beginning (a full copy). */
  after?: string;
  /** Changes per page, 1-1000 (the service's default is 100; the feed reads 1000). */
  limit?: number;
  /**
   * Only these resources (default: all the key may read): an array, or a comma-separated
   * list as the API takes it (`'students,payments'`).
   */
  resources?: readonly Change['resource'][] | string;
}

/** `resources` as the API's comma-separated list. */
function resourceList(resources: ChangesQuery['resources']): string | undefined {
  if (resources === undefined) return undefined;
  if (typeof resources === 'string') return resources.replace(/\s*,\s*/g, ',').trim();
  if (Array.isArray(resources)) return resources.join(',');
  throw new TypeError('resources must be an array of resource names or a comma-separated string, e.g. \'students,payments\'');
}

/** One page of the feed, and the cursor to save once it is applied. */
export interface ChangesPage {
  changes: Change[];
  cursor: string;
  hasMore: boolean;
}

/** The largest page the feed serves. */
export const MAX_CHANGES_PAGE = 1000;

export class ChangeFeed implements AsyncIterable<Change> {
  private saved: string | undefined;

  private readonly fetchPage: (query: { after?: string; limit: number; resources?: string }) => Promise<ChangeList>;
  private readonly query: ChangesQuery;

  constructor(
    fetchPage: (query: { after?: string; limit: number; resources?: string }) => Promise<ChangeList>,
    query: ChangesQuery,
  ) {
    this.fetchPage = fetchPage;
    this.query = query;
    this.saved = query.after;
  }

  /**
   * Where the changes read so far end: save it, and pass it as `after` next time.
   * Undefined until a page was read when the feed was started from the beginning.
   */
  get cursor(): string | undefined {
    return this.saved;
  }

  /**
   * Page after page from the cursor until the feed has no more now; the cursor moves on
   * when the next page is asked for, so one that is not applied is read again next time.
   *
   * @example
   * for await (const page of client.changes.list({ after: saved }).pages()) {
   *   applyInOneTransaction(page.changes);
   *   save(page.cursor);
   * }
   */
  async *pages(): AsyncGenerator<ChangesPage, void, undefined> {
    const limit = this.query.limit ?? MAX_CHANGES_PAGE;
    const resources = resourceList(this.query.resources);
    for (;;) {
      const answer = await this.fetchPage({ after: this.saved, limit, resources });
      // A feed that gives no cursor, or says there is more but moves on by nothing, would be read
      // again from its start, or forever: not the service's answer (a proxy's, another server's).
      const cursor: unknown = answer.meta?.next_cursor;
      if (typeof cursor !== 'string' || cursor === '' || (answer.meta.has_more && answer.items.length === 0 && cursor === this.saved)) {
        throw unexpectedAnswer('the changes feed answered without a cursor to go on from, or with more to come but no change and the same cursor');
      }
      const page = { changes: answer.items, cursor, hasMore: answer.meta.has_more };
      yield page;
      this.saved = page.cursor;
      if (!page.hasMore) return;
    }
  }

  /**
   * Every change since the cursor, oldest first.
   *
   * @example
   * const feed = client.changes.list({ after: saved });
   * for await (const change of feed) apply(change);
   * save(feed.cursor);
   */
  async *[Symbol.asyncIterator](): AsyncGenerator<Change, void, undefined> {
    for await (const page of this.pages()) yield* page.changes;
  }
}
