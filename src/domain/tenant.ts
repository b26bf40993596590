import type { ScopeSet } from './scopes.js';

/** The school a request acts for, fixed by its key: every query is scoped by it. */
export interface Tenant {
  id: string;
  timezone: string;
  currency: string;
  /** The school's data version, read with the key: it keys the stored answers. */
  dataVersion: number;
  /** The stamp of the import that made that version: a version taken again after a restore has another. */
  dataStamp: string;
  /** The scopes of the request's key (src/domain/scopes.ts): the changes feed carries only these. */
  scopes: ScopeSet;
}
