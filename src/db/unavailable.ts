/** Which errors of a data store are an outage (503 `data_unavailable`) rather than a bug (500). */

const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', 'SQLITE_BUSY', 'SQLITE_CANTOPEN', 'SQLITE_IOERR']);

/**
 * True when an error means the data store could not be reached or did not answer
 * in time (the request gets 503 data_unavailable), as opposed to a bug (500).
 */
export function isStoreUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    // SQLITE_BUSY and its extended codes (SQLITE_BUSY_SNAPSHOT ...): another writer held the file.
    if (UNAVAILABLE_CODES.has(code) || code.startsWith('SQLITE_BUSY')) return true;
    // PostgreSQL: connection exceptions, too many connections, shutdown, query cancelled by timeout.
    if (code.startsWith('08') || code.startsWith('57P') || code === '53300' || code === '57014') return true;
  }
  return /timeout|Connection terminated|connect ECONN|Client has encountered a connection error/i.test(err.message);
}
