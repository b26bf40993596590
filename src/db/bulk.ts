/**
 * A connection of its own for a bulk write (the importer): statements compiled by the
 * store's Kysely and run on one dedicated connection, rows loaded in bulk (COPY on
 * PostgreSQL, prepared multi-row INSERTs on SQLite), and no per-query timeout, so a large
 * transaction takes as long as it needs while the pool keeps serving requests (a COPY that
 * PostgreSQL stops taking is the exception: openPostgres).
 *
 * Rules: one user per connection; the caller begins and ends its transactions. On SQLite,
 * bulk connections to one file are taken one at a time within a process: better-sqlite3
 * waits for a write lock synchronously, so two of them in one thread could wait forever.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Duplex, Writable } from 'node:stream';
import SQLite from 'better-sqlite3';
import type { CompiledQuery} from 'kysely';
import { type Compilable, type Kysely } from 'kysely';
import type pg from 'pg';
import type * as PgCopyStreams from 'pg-copy-streams';
import type { Database } from './schema.js';

export interface Statement {
  rows: Record<string, unknown>[];
  /** Rows inserted, updated or deleted (for RETURNING statements, the rows returned). */
  changed: number;
}

/** Rows appended to one table in the order of the columns given to `load`. */
export interface RowLoader {
  /** Resolves when the loader can take more (back-pressure). */
  write(row: readonly unknown[]): Promise<void> | void;
  end(): Promise<void>;
  /** Gives up: the rows written may or may not be in the table. */
  abort(): void;
}

export interface BulkConnection {
  readonly dialect: 'sqlite' | 'postgres';
  /** The store's Kysely: build and compile queries with it; run them with `run`. */
  readonly db: Kysely<Database>;
  run(query: Compilable | CompiledQuery): Promise<Statement>;
  load(table: string, columns: readonly string[]): RowLoader;
  /**
   * Runs `job` (statements through `run`) once every load begun before it has ended; a load
   * begun after waits for it. The rows given to such a load meanwhile are held, up to
   * LOAD_HELD_BYTES, so the reading goes on while the job runs.
   */
  exclusive<T>(job: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

type Opener = () => Promise<BulkConnection>;

const openers = new WeakMap<Kysely<Database>, Opener>();

/** How `openBulkConnection(db)` reaches the store behind `db` (called by openStore). */
export function registerBulk(db: Kysely<Database>, target: { sqliteFile: string } | { driver: typeof pg; connection: pg.ClientConfig; stallMs: number }): void {
  openers.set(db, 'sqliteFile' in target ? () => openSqlite(db, target.sqliteFile) : () => openPostgres(db, target.driver, target.connection, target.stallMs));
}

/** A dedicated connection to the store of `db` (a store's `db`, from openStore). */
export function openBulkConnection(db: Kysely<Database>): Promise<BulkConnection> {
  const open = openers.get(db);
  if (!open) throw new Error('openBulkConnection: not a store opened by openStore');
  return open();
}

const compiled = (query: Compilable | CompiledQuery): CompiledQuery => ('compile' in query ? query.compile() : query);

// --- PostgreSQL ---------------------------------------------------------------------------

/**
 * Run first on every PostgreSQL connection of a store: its transactions are READ COMMITTED
 * whatever the database's default, so a statement that waited for a lock reads what the
 * holder committed (the key limit, the importer's and the migrations' steps count on it).
 */
export const READ_COMMITTED = "set default_transaction_isolation = 'read committed'";

/**
 * `stallMs`: a COPY fails, and the connection is dropped, when PostgreSQL takes none of the
 * bytes waiting to go for that long, or does not confirm the COPY's end that long after its
 * last byte went. A partition while rows are sent leaves them unacknowledged, so the
 * connection's keepalive never starts, and only the kernel's retransmissions (some 15
 * minutes) would end the wait.
 */
async function openPostgres(db: Kysely<Database>, driver: typeof pg, connection: pg.ClientConfig, stallMs: number): Promise<BulkConnection> {
  let socket: Duplex | undefined;
  const open = connection.stream ?? (() => new net.Socket());
  const client = new driver.Client({ ...connection, stream: () => (socket = open()) });
  // A connection lost mid-statement fails that statement; the 'error' event must not end the process.
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query(READ_COMMITTED);
  } catch (err) {
    await client.end().catch(() => undefined);
    throw err;
  }
  const { from: copyFrom } = createRequire(import.meta.url)('pg-copy-streams') as typeof PgCopyStreams;
  // One COPY at a time on the connection: each load starts once the one before it has ended.
  let previous: Promise<void> = Promise.resolve();
  return {
    dialect: 'postgres',
    db,
    async run(query) {
      const { sql, parameters } = compiled(query);
      const result = await client.query(sql, parameters as unknown[]);
      return { rows: result.rows as Record<string, unknown>[], changed: result.rowCount ?? 0 };
    },
    load(table, columns) {
      const text = `COPY ${quoteIdent(table)} (${columns.map(quoteIdent).join(', ')}) FROM STDIN`;
      const loader = copyLoader(previous.then(() => client.query(copyFrom(text))), { stallMs, drop: (error) => socket?.destroy(error) });
      previous = loader.ended;
      return loader;
    },
    exclusive(job) {
      const done = previous.then(job);
      previous = done.then(
        () => undefined,
        () => undefined,
      );
      return done;
    },
    close: () => client.end().catch(() => undefined),
  };
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** How a COPY notices a connection that stopped taking its bytes, and drops it (openPostgres). */
interface CopyWatch {
  stallMs: number;
  drop: (error: Error) => void;
}

/** Characters per write to the COPY stream: many rows a write, yet small enough to stay in V8's young generation. */
const COPY_CHUNK_BYTES = 32 * 1024;

/** Bytes the COPY stream holds at most: more wait in the loader (`pump`). */
const STREAM_PIECE_BYTES = 1024 * 1024;

/**
 * Bytes of rows a load holds in memory, at most, that the connection has not taken. Past
 * them a writer waits for a running COPY; while the COPY has not begun (it waits for an
 * `exclusive` job), the rows go to a spill file instead, sent once it begins.
 */
export const LOAD_HELD_BYTES = 8 * 1024 * 1024;

/** Bytes read back from a spill file per write to the COPY. */
const SPILL_READ_BYTES = 1024 * 1024;

/**
 * A file of rows waiting for their COPY: in the temporary directory, removed as soon as it
 * is open (a process killed meanwhile leaves nothing behind; the descriptor holds it).
 */
class SpillFile {
  readonly fd: number;
  bytes = 0;

  constructor() {
    const file = path.join(os.tmpdir(), `school-data-load-${process.pid}-${randomBytes(8).toString('hex')}`);
    this.fd = fs.openSync(file, 'wx+', 0o600);
    fs.unlinkSync(file);
  }

  append(chunk: Buffer): void {
    // A write may take less than it is given (a disk nearly full): the rest follows.
    for (let at = 0; at < chunk.length; ) at += fs.writeSync(this.fd, chunk, at, chunk.length - at, this.bytes + at);
    this.bytes += chunk.length;
  }

  /** Up to SPILL_READ_BYTES from `at`. */
  read(at: number): Buffer {
    const piece = Buffer.allocUnsafe(Math.min(SPILL_READ_BYTES, this.bytes - at));
    const n = fs.readSync(this.fd, piece, 0, piece.length, at);
    if (n === 0) throw new Error('spill file ended early');
    return piece.subarray(0, n);
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}

/**
 * A COPY load; `ended` settles (never rejects) once its COPY is over, successful or not.
 * Rows are joined into chunks, held as UTF-8; back-pressure counts the bytes the
 * connection has not yet taken (their write callbacks). Rows need no order (each staged
 * row carries its index in the file), so spilled ones are sent after those held, and
 * rows given while the spill file is sent join it.
 */
function copyLoader(starting: Promise<Writable>, watch: CopyWatch): RowLoader & { ended: Promise<void> } {
  let stream: Writable | null = null;
  let failure: Error | null = null;
  let buffer = '';
  let inFlight = 0;
  /** Chunks given to the open COPY, not yet written to its stream (`pump`). */
  const queued: Buffer[] = [];
  /** When the connection last took a piece (or the COPY began, or was given bytes after taking all); when its end was sent. */
  let lastTaken = 0;
  let endSent: number | null = null;
  let waiters: (() => void)[] = [];
  const waiting: Buffer[] = [];
  let spill: SpillFile | null = null;
  let replaying: Promise<void> | null = null;
  const wakeAll = () => {
    const wake = waiters;
    waiters = [];
    for (const w of wake) w();
  };
  /**
   * Writes queued chunks while the stream holds less than STREAM_PIECE_BYTES: a write's
   * callback comes once the whole piece it went out with has been taken, so small pieces
   * are what lets the watchdog see a slow connection still taking bytes.
   */
  const pump = (s: Writable) => {
    while (queued.length > 0 && s.writableLength < STREAM_PIECE_BYTES && !failure) {
      const chunk = queued.shift()!;
      s.write(chunk, (err?: Error | null) => {
        lastTaken = Date.now();
        inFlight -= chunk.length;
        if (err) failure = err;
        pump(s);
        if (inFlight <= LOAD_HELD_BYTES / 2 || queued.length === 0 || failure) wakeAll();
      });
    }
  };
  const write = (s: Writable, chunk: Buffer) => {
    if (inFlight === 0) lastTaken = Date.now();
    inFlight += chunk.length;
    queued.push(chunk);
    pump(s);
  };
  const send = (text: string) => {
    const chunk = Buffer.from(text, 'utf8');
    // While a spill file is sent, rows join it: its pieces are not cut at rows' ends.
    if (spill) {
      spill.append(chunk);
    } else if (stream) {
      write(stream, chunk);
    } else if (inFlight + chunk.length <= LOAD_HELD_BYTES) {
      inFlight += chunk.length;
      waiting.push(chunk);
    } else {
      spill = new SpillFile();
      spill.append(chunk);
    }
  };
  const replay = async (s: Writable, file: SpillFile) => {
    try {
      for (let at = 0; at < file.bytes && !failure; ) {
        const piece = file.read(at);
        at += piece.length;
        write(s, piece);
        if (inFlight > LOAD_HELD_BYTES) await new Promise<void>((resolve) => waiters.push(resolve));
      }
    } finally {
      spill = null;
      file.close();
    }
  };
  const stalled = (now: number): boolean => {
    if (inFlight > 0) return now - lastTaken > watch.stallMs;
    return endSent !== null && now - Math.max(lastTaken, endSent) > watch.stallMs;
  };
  let watchdog: NodeJS.Timeout | undefined;
  const opened = starting.then((s) => {
    stream = s;
    lastTaken = Date.now();
    s.on('error', (err: Error) => {
      failure = err;
      wakeAll();
    });
    watchdog = setInterval(() => {
      if (!stalled(Date.now())) return;
      clearInterval(watchdog);
      failure ??= Object.assign(new Error(`PostgreSQL took nothing of a COPY for ${watch.stallMs / 1000} s: connection dropped`), { code: 'ETIMEDOUT' });
      wakeAll();
      watch.drop(failure);
    }, Math.min(1000, watch.stallMs / 3));
    watchdog.unref();
    for (const chunk of waiting.splice(0)) {
      inFlight -= chunk.length;
      write(s, chunk);
    }
    if (spill) {
      replaying = replay(s, spill);
      replaying.catch(() => undefined);
    }
    return s;
  });
  const finished = opened.then(
    (s) =>
      new Promise<void>((resolve, reject) => {
        s.on('finish', resolve);
        s.on('error', reject);
      }),
  );
  void finished.finally(() => clearInterval(watchdog)).catch(() => undefined);
  // Reported by the next write or by end(), never as unhandled.
  finished.catch(() => undefined);
  opened.catch(() => {
    if (spill && !replaying) {
      spill.close();
      spill = null;
    }
  });
  /** Sends what is buffered; resolves when the connection has taken enough (at once unless it lags). */
  const flush = (): Promise<void> | undefined => {
    if (failure) return Promise.reject(failure);
    if (buffer !== '') {
      send(buffer);
      buffer = '';
    }
    if (inFlight <= LOAD_HELD_BYTES) return undefined;
    return new Promise<void>((resolve, reject) => waiters.push(() => (failure ? reject(failure) : resolve())));
  };
  const end = async (): Promise<void> => {
    const s = await opened;
    try {
      await flush();
      await replaying;
      while (queued.length > 0 && !failure) await new Promise<void>((resolve) => waiters.push(resolve));
      if (failure) throw failure;
    } catch (err) {
      // The COPY is given up (CopyFail), so the connection is free for what follows.
      failure ??= err as Error;
      s.destroy(failure);
      await finished.catch(() => undefined);
      throw failure;
    }
    endSent = Date.now();
    s.end();
    await finished;
  };
  let ending: Promise<void> | null = null;
  return {
    write(row) {
      buffer += copyLine(row);
      if (buffer.length >= COPY_CHUNK_BYTES) return flush();
    },
    end() {
      ending ??= end();
      return ending;
    },
    abort() {
      failure ??= new Error('load aborted');
      wakeAll();
      void opened.then((s) => s.destroy(new Error('load aborted')), () => undefined);
    },
    get ended() {
      return finished.then(
        () => undefined,
        () => undefined,
      );
    },
  };
}

const SPECIAL = /[\\\n\r\t]/;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** One row in COPY's text format: tab-separated, `\N` for null, backslash escapes. */
function copyLine(row: readonly unknown[]): string {
  let line = '';
  for (let i = 0; i < row.length; i++) {
    const value = row[i];
    if (i > 0) line += '\t';
    if (value === null || value === undefined) line += '\\N';
    else if (typeof value === 'string') line += SPECIAL.test(value) ? value.replace(/[\\\n\r\t]/g, (c) => ESCAPES[c]!) : value;
    else line += typeof value === 'number' || typeof value === 'bigint' ? String(value) : JSON.stringify(value);
  }
  return `${line}\n`;
}

// --- SQLite -------------------------------------------------------------------------------

/** The tail of the chain of bulk connections to each file in this process. */
const sqliteTurns = new Map<string, Promise<void>>();

/** How long a bulk write waits for another process's write to end. */
const SQLITE_WAIT_MS = 10 * 60_000;

/** A bulk connection's settings; the import benchmark's SQLite baseline uses them too. */
export function setUpBulkSqlite(database: SQLite.Database): void {
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = NORMAL');
  database.pragma('foreign_keys = ON');
  // Small caches keep the import's memory bounded; a larger one measured no faster
  // (docs/performance.md, "Imports"). Staging tables live in a temporary file.
  database.pragma('cache_size = -8000');
  database.pragma('temp_store = FILE');
  database.pragma('temp.cache_size = -4000');
}

async function openSqlite(db: Kysely<Database>, file: string): Promise<BulkConnection> {
  const before = sqliteTurns.get(file) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => (release = resolve));
  const tail = before.then(() => mine);
  sqliteTurns.set(file, tail);
  await before;
  let database: SQLite.Database;
  try {
    database = new SQLite(file, { timeout: SQLITE_WAIT_MS });
    setUpBulkSqlite(database);
  } catch (err) {
    release();
    throw err;
  }
  const statements = new Map<string, SQLite.Statement>();
  const prepare = (text: string): SQLite.Statement => {
    let statement = statements.get(text);
    if (!statement) statements.set(text, (statement = database.prepare(text)));
    return statement;
  };
  return {
    dialect: 'sqlite',
    db,
    run(query) {
      const { sql, parameters } = compiled(query);
      const statement = prepare(sql);
      const values = parameters.map(sqliteValue);
      if (statement.reader) {
        const rows = statement.all(values) as Record<string, unknown>[];
        return Promise.resolve({ rows, changed: rows.length });
      }
      return Promise.resolve({ rows: [], changed: statement.run(values).changes });
    },
    load(table, columns) {
      return sqliteLoader(prepare, table, columns);
    },
    // Loads write as they are given rows: none is ever waiting.
    exclusive: (job) => job(),
    close() {
      try {
        if (database.inTransaction) database.exec('rollback');
        database.close();
      } finally {
        release();
        if (sqliteTurns.get(file) === tail) sqliteTurns.delete(file);
      }
      return Promise.resolve();
    },
  };
}

/** better-sqlite3 binds no booleans; integers stay integers (a REAL would compare the same, but sort as text in JSON). */
function sqliteValue(value: unknown): unknown {
  if (typeof value === 'boolean') return value ? 1 : 0;
  return value;
}

function sqliteLoader(prepare: (text: string) => SQLite.Statement, table: string, columns: readonly string[]): RowLoader {
  const perInsert = Math.max(1, Math.min(100, Math.floor(30_000 / columns.length)));
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  const text = (n: number) => `insert into ${quoteIdent(table)} (${columns.map(quoteIdent).join(', ')}) values ${Array.from({ length: n }, () => tuple).join(', ')}`;
  let values: unknown[] = [];
  let rows = 0;
  const flush = () => {
    if (rows === 0) return;
    prepare(text(rows)).run(values);
    values = [];
    rows = 0;
  };
  return {
    write(row) {
      for (const value of row) values.push(sqliteValue(value));
      if (++rows === perInsert) flush();
    },
    end() {
      flush();
      return Promise.resolve();
    },
    abort() {
      values = [];
      rows = 0;
    },
  };
}
