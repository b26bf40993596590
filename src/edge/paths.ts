/** Where the public API lives: every path under this prefix is the API's. */
export const API_PREFIX = '/api/public/v1/';

/** A request target's path: what comes before its query. */
export function pathOf(target: string): string {
  const queryAt = target.indexOf('?');
  return queryAt === -1 ? target : target.slice(0, queryAt);
}
