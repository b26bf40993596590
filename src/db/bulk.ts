/**
 * A connection of its own for a bulk write (the importer): statements compiled by the
 * store's Kysely and run on one dedicated connection, rows loaded in bulk (COPY on
 * PostgreSQL, prepared multi-row INSERTs on SQLite), and no per-query timeout, so a large
 * transaction takes as long as it needs while the pool keeps serving requests.
 *
 * Rules: one user per connection; the caller begins and ends its transactions. On SQLite,
 * bulk connections to one file are taken one at a time within a process: better-sqlite3
 * waits for a write lock synchronously, so two of them in one thread could wait forever.
 */
import { createRequire } from 'node:module';
import type { Writable } from 'node:stream';
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
  close(): Promise<void>;
}

type Opener = () => Promise<BulkConnection>;

const openers = new WeakMap<Kysely<Database>, Opener>();

/** How `openBulkConnection(db)` reaches the store behind `db` (called by openStore). */
export function registerBulk(db: Kysely<Database>, target: { sqliteFile: string } | { driver: typeof pg; connection: pg.ClientConfig }): void {
  openers.set(db, 'sqliteFile' in target ? () => openSqlite(db, target.sqliteFile) : () => openPostgres(db, target.driver, target.connection));
}

/** A dedicated connection to the store of `db` (a store's `db`, from openStore). */
export function openBulkConnection(db: Kysely<Database>): Promise<BulkConnection> {
  const open = openers.get(db);
  if (!open) throw new Error('openBulkConnection: not a store opened by openStore');
  return open();
}

const compiled = (query: Compilable | CompiledQuery): CompiledQuery => ('compile' in query ? query.compile() : query);

// --- PostgreSQL ---------------------------------------------------------------------------

async function openPostgres(db: Kysely<Database>, driver: typeof pg, connection: pg.ClientConfig): Promise<BulkConnection> {
  const client = new driver.Client(connection);
  // A connection lost mid-statement fails that statement; the 'error' event must not end the process.
  client.on('error', () => undefined);
  await client.connect();
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
      const loader = copyLoader(previous.then(() => client.query(copyFrom(text))));
      previous = loader.ended;
      return loader;
    },
    close: () => client.end().catch(() => undefined),
  };
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** Bytes per write to the COPY stream: many rows a write, yet small enough to stay in V8's young generation. */
const COPY_CHUNK_BYTES = 32 * 1024;

/** COPY writes not yet taken by the connection, at most, before a writer is asked to wait. */
const MAX_WRITES_IN_FLIGHT = 8;

/**
 * A COPY load; `ended` settles (never rejects) once its COPY is over, successful or not.
 * Rows are joined into chunks; back-pressure counts the chunks the connection has not yet
 * taken (their write callbacks), which holds before the COPY has even started.
 */
function copyLoader(starting: Promise<Writable>): RowLoader & { ended: Promise<void> } {
  let stream: Writable | null = null;
  let failure: Error | null = null;
  let buffer = '';
  let inFlight = 0;
  let waiters: (() => void)[] = [];
  const waiting: string[] = [];
  const taken = (err?: Error | null) => {
    inFlight -= 1;
    if (err) failure = err;
    if (inFlight <= MAX_WRITES_IN_FLIGHT / 2 || failure) {
      const wake = waiters;
      waiters = [];
      for (const w of wake) w();
    }
  };
  const send = (chunk: string) => {
    inFlight += 1;
    if (stream) stream.write(chunk, taken);
    else waiting.push(chunk);
  };
  const opened = starting.then((s) => {
    stream = s;
    s.on('error', (err: Error) => {
      failure = err;
      const wake = waiters;
      waiters = [];
      for (const w of wake) w();
    });
    for (const chunk of waiting.splice(0)) s.write(chunk, taken);
    return s;
  });
  const finished = opened.then(
    (s) =>
      new Promise<void>((resolve, reject) => {
        s.on('finish', resolve);
        s.on('error', reject);
      }),
  );
  // Reported by the next write or by end(), never as unhandled.
  finished.catch(() => undefined);
  opened.catch(() => undefined);
  /** Sends what is buffered; resolves when the connection has taken enough (at once unless it lags). */
  const flush = (): Promise<void> | undefined => {
    if (failure) return Promise.reject(failure);
    if (buffer !== '') {
      send(buffer);
      buffer = '';
    }
    if (inFlight <= MAX_WRITES_IN_FLIGHT) return undefined;
    return new Promise<void>((resolve, reject) => waiters.push(() => (failure ? reject(failure) : resolve())));
  };
  const end = async (): Promise<void> => {
    const s = await opened;
    await flush();
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
