/** Which errors of a data store are an outage (503 `data_unavailable`) rather than a bug (500). */

const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', 'SQLITE_BUSY', 'SQLITE_CANTOPEN', 'SQLITE_IOERR']);

/**
 * True when an error means the data store could not be reached or did not answer
 * in time (the request gets 503 data_unavailable), as opposed to a bug (500).
 */
export function isStoreUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (isStoreRefusingConnection(err)) return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    // SQLITE_BUSY and its extended codes (SQLITE_BUSY_SNAPSHOT ...): another writer held the file.
    if (UNAVAILABLE_CODES.has(code) || code.startsWith('SQLITE_BUSY')) return true;
    // PostgreSQL: connection exceptions, too many connections, shutdown, query cancelled by timeout.
    if (code.startsWith('08') || code.startsWith('57P') || code === '53300' || code === '57014') return true;
  }
  return /timeout|Connection terminated|connect ECONN|Client has encountered a connection error/i.test(err.message);
}

/** PostgreSQL's refusals of a connection as configured: authentication, no such role or database. */
const REFUSAL_CODES = new Set(['28000', '28P01', '3D000']);
/** Node's TLS errors and OpenSSL's certificate checks (DEPTH_ZERO_SELF_SIGNED_CERT, UNABLE_TO_VERIFY_LEAF_SIGNATURE ...). */
const TLS_REFUSAL = /^ERR_(TLS|SSL)_|CERT|SIGNATURE|^INVALID_CA$|^HOSTNAME_MISMATCH$/;

/**
 * True when PostgreSQL was reached but will not take a connection as DATABASE_URL
 * describes it: the credentials, the database's name, or TLS (no TLS on the server, a
 * certificate that fails the check the URL's sslmode asks for). DATABASE_URL, or the
 * server's settings, must change; a request meanwhile gets 503 as in an outage.
 */
export function isStoreRefusingConnection(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && (REFUSAL_CODES.has(code) || TLS_REFUSAL.test(code))) return true;
  return err.message === 'The server does not support SSL connections';
}
