/** Where the public API lives: every path under this prefix is the API's. */
export const API_PREFIX = '/api/public/v1/';

/** A request target's path: what comes before its query. */
export function pathOf(target: string): string {
  const queryAt = target.indexOf('?');
  return queryAt === -1 ? target : target.slice(0, queryAt);
}

/** The target is addressed under the API prefix (in origin or absolute form). */
export function underPrefix(target: string): boolean {
  return target.startsWith(API_PREFIX) || (target[0] !== '/' && targetPath(target).startsWith(API_PREFIX));
}

/** An absolute-form target's scheme and authority (`https://host`), before its path. */
const ABSOLUTE_ORIGIN = /^[a-z][a-z0-9+.-]*:\/\/[^/]*/i;

/**
 * Whether a request target has a form a GET or HEAD may have (RFC 9112, section 3.2): a path
 * (`/a/b?q`), an absolute URL (`https://host/a/b?q`) or the asterisk alone.
 */
export function wellFormedTarget(target: string): boolean {
  return target[0] === '/' || target === '*' || ABSOLUTE_ORIGIN.test(target);
}

/**
 * The path of a request target in origin form (`/a/b?q`) or absolute form
 * (`https://host/a/b?q`), without its query: where the request is addressed.
 */
export function targetPath(target: string): string {
  const path = pathOf(target);
  if (path.startsWith('/')) return path;
  const origin = ABSOLUTE_ORIGIN.exec(path);
  return origin ? path.slice(origin[0].length) || '/' : path;
}
