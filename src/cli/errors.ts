/**
 * The one line a command's failure is said with, from whatever it threw: the operator's
 * words for a store that is down, full or locked, or not what its setting should point at
 * (and which setting to check), never a stack trace.
 */
import { ConfigError } from '../config/index.js';
import { isDiskFull, isLockWait, isSocketMissing, isStoreRefusingConnection, isStoreUnavailable, sqlitePath, StoreNewerError } from '../db/index.js';
import { redactKeys } from '../ops/request-log.js';
import { CliError } from './context.js';

const ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };
/** Control characters and line separators (an id typed with a line break) escaped, so the message stays whole on one line. */
export const printable = (text: string) =>
  text.replace(/[\p{Cc}\u2028\u2029]/gu, (c) => ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
export const firstLine = (text: string) => text.split('\n')[0]!;

/**
 * The one line a command's failure is reported with (after `school-data: `); `dataDir`, the
 * command's data directory when it has one, is where a full disk is looked for.
 */
export function describeError(err: unknown, dataDir?: string, room?: (dir: string) => number | null): string {
  if (err instanceof CliError || err instanceof ConfigError || err instanceof StoreNewerError) return printable(err.message);
  if (isStoreRefusingConnection(err)) return `PostgreSQL refused the connection: ${firstLine((err as Error).message)} (check DATABASE_URL)`;
  // Before an outage: SQLite's I/O errors are one too, but not what to say of a full disk.
  if (isDiskFull(err, dataDir, room)) return `the disk of the data store is full (${firstLine((err as Error).message)}): nothing is half-written; free some space and run it again`;
  const code = (err as { code?: unknown } | null)?.code;
  if (dataDir !== undefined && (code === 'SQLITE_READONLY' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_READONLY_DIRECTORY')) {
    return `cannot write the database in ${dataDir} (${firstLine((err as Error).message)}): this user needs to be able to write the directory and its files (SCHOOL_DATA_DIR, --data-dir)`;
  }
  if (isLockWait(err)) {
    return `the SQLite file stayed locked by another writer longer than this command waits (an import merging its records holds it until it commits): nothing was written; run it again once that ends`;
  }
  const file = dataDir === undefined ? 'the database file' : sqlitePath({ dataDir });
  if (code === 'SQLITE_NOTADB') {
    return `${file} is not a SQLite database (${firstLine((err as Error).message)}): check that SCHOOL_DATA_DIR (or --data-dir) names the data directory, or move the file away to start a new database there`;
  }
  if (typeof code === 'string' && code.startsWith('SQLITE_CORRUPT')) {
    return `${file} is damaged (${firstLine((err as Error).message)}): restore a copy of it (docs/operations.md, "Backups")`;
  }
  // PostgreSQL's invalid_schema_name: the tables would go in the first schema of the search_path that exists, and none does.
  if (code === '3F000') {
    return `PostgreSQL has no schema to create the tables in (${firstLine((err as Error).message)}): the search_path DATABASE_URL sets (options=-c search_path=...) names none that exists; create the schema, or correct DATABASE_URL`;
  }
  if (isSocketMissing(err)) {
    return `the data store is unavailable: no PostgreSQL socket at ${err.address ?? 'the directory DATABASE_URL names'} (${err.code}): PostgreSQL is not running, or keeps its socket in another directory (check the host in DATABASE_URL)`;
  }
  if (isStoreUnavailable(err)) return `the data store is unavailable: ${firstLine((err as Error).message)}`;
  if (err instanceof Error) return `unexpected error: ${firstLine(err.message)}`;
  return 'unexpected error';
}

/** describeError's line as it is shown: with any key pasted into it redacted. */
export const failureLine = (err: unknown, dataDir?: string): string => redactKeys(describeError(err, dataDir));
