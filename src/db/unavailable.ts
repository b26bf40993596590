/** Which errors of a data store are an outage (503 `data_unavailable`) rather than a bug (500), and which a full disk. */
import fs from 'node:fs';

/** The network's failures to reach a store (a name not resolved now, no route, a connection refused or cut), and SQLite's file not opened. */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EHOSTUNREACH', 'EHOSTDOWN', 'ENETUNREACH', 'ENETDOWN', 'EADDRNOTAVAIL',
  'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', 'SQLITE_CANTOPEN',
]);

/** SQLITE_BUSY or one of its extended codes (SQLITE_BUSY_SNAPSHOT ...): another connection holds a lock this one needs. */
export function isLockWait(err: unknown): boolean {
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * True when PostgreSQL's Unix socket is not there (DATABASE_URL's host a directory): the server
 * is not running (it removes its socket as it stops), or keeps it in another directory.
 */
export function isSocketMissing(err: unknown): err is NodeJS.ErrnoException & { address?: string } {
  const e = err as NodeJS.ErrnoException | null | undefined;
  return e?.code === 'ENOENT' && e.syscall === 'connect';
}

/**
 * True when an error means the data store could not be reached or did not answer
 * in time (the request gets 503 data_unavailable), as opposed to a bug (500).
 */
export function isStoreUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (isStoreRefusingConnection(err) || isSocketMissing(err)) return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    // SQLITE_IOERR's extended codes (SQLITE_IOERR_SHMSIZE ...): the file could not be read or written.
    if (UNAVAILABLE_CODES.has(code) || isLockWait(err) || code.startsWith('SQLITE_IOERR')) return true;
    // PostgreSQL: connection exceptions, too many connections, shutdown, query cancelled by timeout.
    if (code.startsWith('08') || code.startsWith('57P') || code === '53300' || code === '57014') return true;
  }
  return /timeout|Connection terminated|connect ECONN|Client has encountered a connection error/i.test(err.message);
}

/** PostgreSQL's refusals of a connection as configured: authentication, no such role or database. */
const REFUSAL_CODES = new Set(['28000', '28P01', '3D000']);
/**
 * Refusals whose codes are wider than a connection's: a database that takes no connections
 * (`ALLOW_CONNECTIONS false`, 55000) and a role without CONNECT on it (42501). Told by the
 * server's routine that checks a new connection's database, which no language setting changes,
 * or by the words of an English-speaking server.
 */
const CONNECTION_CHECK_ROUTINE = 'CheckMyDatabase';
const REFUSAL_MESSAGES: ReadonlyMap<string, RegExp> = new Map([
  ['55000', /is not currently accepting connections/],
  ['42501', /^permission denied for database/],
]);
/** OpenSSL's checks of the server's certificate, as Node names their failures, and Node's host name check. */
const CERTIFICATE_REFUSALS = new Set([
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY', 'UNABLE_TO_GET_CRL', 'CERT_SIGNATURE_FAILURE', 'CERT_NOT_YET_VALID', 'CERT_HAS_EXPIRED',
  'ERROR_IN_CERT_NOT_BEFORE_FIELD', 'ERROR_IN_CERT_NOT_AFTER_FIELD', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_CHAIN_TOO_LONG', 'CERT_REVOKED', 'INVALID_CA', 'PATH_LENGTH_EXCEEDED', 'INVALID_PURPOSE', 'CERT_UNTRUSTED', 'CERT_REJECTED',
  'HOSTNAME_MISMATCH', 'ERR_TLS_CERT_ALTNAME_INVALID', 'ERR_SSL_WRONG_VERSION_NUMBER',
]);
/** A TLS alert the server sent during the handshake (ERR_SSL_TLSV1_ALERT_UNKNOWN_CA ...): it refused the client's side. */
const HANDSHAKE_ALERT = /^ERR_SSL_(TLSV1|SSLV3)_ALERT_/;

/**
 * True when PostgreSQL was reached but will not take a connection as DATABASE_URL
 * describes it: the credentials, the database's name, or TLS (no TLS on the server, a
 * certificate that fails the check the URL's sslmode asks for). DATABASE_URL, or the
 * server's settings, must change; a request meanwhile gets 503 as in an outage.
 */
export function isStoreRefusingConnection(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && (REFUSAL_CODES.has(code) || CERTIFICATE_REFUSALS.has(code) || HANDSHAKE_ALERT.test(code))) return true;
  if (typeof code === 'string' && REFUSAL_MESSAGES.has(code)) {
    if ((err as { routine?: unknown }).routine === CONNECTION_CHECK_ROUTINE || REFUSAL_MESSAGES.get(code)!.test(err.message)) return true;
  }
  return err.message === 'The server does not support SSL connections';
}

/** Room under which a file system counts as full: SQLite's shared-memory file alone takes 32 KiB. */
const NO_ROOM_BYTES = 1 << 20;

/** The bytes this process may still write on the file system of `dir` (root may use the reserved blocks); null when it cannot be told. */
export function roomIn(dir: string): number | null {
  try {
    const stats = fs.statfsSync(dir);
    return (process.getuid?.() === 0 ? stats.bfree : stats.bavail) * stats.bsize;
  } catch {
    return null;
  }
}

/**
 * True when an error means the disk under the data store is full: SQLite's SQLITE_FULL,
 * PostgreSQL's disk_full (53100), Node's ENOSPC, or one of SQLite's I/O errors while the
 * data directory has no room left (a full disk is an I/O error to SQLite where its
 * shared-memory file or journal cannot grow, SQLITE_IOERR_SHMSIZE say).
 */
export function isDiskFull(err: unknown, dataDir?: string, room: (dir: string) => number | null = roomIn): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'SQLITE_FULL' || code === '53100' || code === 'ENOSPC') return true;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_IOERR') || dataDir === undefined) return false;
  const left = room(dataDir);
  return left !== null && left < NO_ROOM_BYTES;
}
