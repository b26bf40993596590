import type { ScopeSet } from './scopes.js';

/**
 * The school a request acts for, fixed by its key: every query is scoped by it. Never
 * changed once made: one object serves all the requests of a key row (src/access/decide.ts),
 * and the stored answers key by it once (src/resources/cache.ts).
 */
export interface Tenant {
  readonly id: string;
  readonly timezone: string;
  readonly currency: string;
  /** The school's data version, read with the key: it keys the stored answers. */
  readonly dataVersion: number;
  /** The stamp of the import that made that version: a version taken again after a restore has another. */
  readonly dataStamp: string;
  /** The scopes of the request's key (src/domain/scopes.ts): the changes feed carries only these. */
  readonly scopes: ScopeSet;
}
