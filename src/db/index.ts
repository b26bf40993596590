/**
 * The data store: one Kysely instance over SQLite (embedded default) or PostgreSQL,
 * chosen by configuration. Every query in the project is written once against it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import { CompiledQuery, Kysely, PostgresAdapter, PostgresDialect, sql, SqliteAdapter, SqliteDialect, type SqliteDriver, type Compilable, type DatabaseConnection, type Driver, type TransactionSettings, type Expression, type RawBuilder, type SqliteDatabase, type SqliteStatement, type Transaction } from 'kysely';
import { Migrator, type Migration } from 'kysely/migration';
import { createRequire } from 'node:module';
import type pg from 'pg';
import { ConfigError, ensureDirectory, settingNamed, type Config } from '../config/index.js';
import * as m0001 from './migrations/0001_initial.js';
import * as m0002 from './migrations/0002_cabinet.js';
import * as m0003 from './migrations/0003_read_model.js';
import * as m0004 from './migrations/0004_data_version.js';
import * as m0005 from './migrations/0005_day_totals.js';
import * as m0006 from './migrations/0006_change_log.js';
import * as m0007 from './migrations/0007_key_activity.js';
import * as m0009 from './migrations/0009_list_blocks.js';
import * as m0008 from './migrations/0008_key_options.js';
import * as m0010 from './migrations/0010_request_log_ring.js';
import * as m0011 from './migrations/0011_data_stamps.js';
import * as m0012 from './migrations/0012_form_nonces.js';
import * as m0013 from './migrations/0013_tombstone_place.js';
import * as m0014 from './migrations/0014_key_watchers.js';
import * as m0015 from './migrations/0015_month_totals.js';
import * as m0016 from './migrations/0016_list_changes.js';
import * as m0017 from './migrations/0017_import_tables_unchecked.js';
import * as m0018 from './migrations/0018_list_changes_feed_order.js';
import { READ_COMMITTED, registerBulk } from './bulk.js';
import { openMigrationConnection } from './postgres-migrations.js';
import { objectRows, PgReader, SqliteReader, withParameters, type Reader } from './reader.js';
import { Sockets } from './sockets.js';
import type { Database } from './schema.js';
import { isLockWait } from './unavailable.js';
import { DEFAULT_LEASE_MS, KeyWatch, type KeyWatchOptions } from './watch.js';

export type { Reader } from './reader.js';
export { announceKeyChanges, KeyWatch } from './watch.js';
export { isDiskFull, isLockWait, isSocketMissing, isStoreRefusingConnection, isStoreUnavailable } from './unavailable.js';
export { openBulkConnection, type BulkConnection, type RowLoader } from './bulk.js';

export type Dialect = 'sqlite' | 'postgres';

/**
 * A caller's part of a change, run in the change's own transaction so that both commit
 * together: what it throws undoes the whole change.
 */
export type Step<T = void> = (trx: Transaction<Database>) => Promise<T>;

export interface Store {
  /** Migrations, imports, management and the cabinet: everything that writes. */
  readonly db: Kysely<Database>;
  /** The public API's queries (reader.ts): compiled by Kysely, run straight on the driver. */
  readonly reads: Reader;
  readonly dialect: Dialect;
  /** Human-readable location, without credentials. */
  readonly location: string;
  /**
   * Applies every pending migration (or those up to `to`, for tests of an upgrade);
   * idempotent. Returns the names applied now. On PostgreSQL it runs on a connection of
   * its own, without the per-query timeout (postgres-migrations.ts).
   */
  migrate(to?: string): Promise<string[]>;
  /**
   * Applies every pending migration, then `derive` (the read-model rebuild the command line
   * passes) on the same connection: on PostgreSQL the migrations' own, without the per-query
   * timeout, so a long rebuild, or a wait for another instance's, is not cut off.
   */
  upgrade<T>(derive: (db: Kysely<Database>) => Promise<T>): Promise<{ applied: string[]; derived: T }>;
  /**
   * On PostgreSQL, a watch of the changes key lookups read (watch.ts), not yet started, for
   * a server that keeps the keys it looked up; null on SQLite.
   */
  watchKeys(options?: Omit<KeyWatchOptions, 'client'>): KeyWatch | null;
  close(): Promise<void>;
}

const migrations: Record<string, Migration> = {
  '0001_initial': m0001,
  '0002_cabinet': m0002,
  '0003_read_model': m0003,
  '0004_data_version': m0004,
  '0005_day_totals': m0005,
  '0006_change_log': m0006,
  '0007_key_activity': m0007,
  '0009_list_blocks': m0009,
  '0010_request_log_ring': m0010,
  '0008_key_options': m0008,
  '0011_data_stamps': m0011,
  '0012_form_nonces': m0012,
  '0013_tombstone_place': m0013,
  '0014_key_watchers': m0014,
  '0015_month_totals': m0015,
  '0016_list_changes': m0016,
  '0017_import_tables_unchecked': m0017,
  '0018_list_changes_feed_order': m0018,
};

export function sqlitePath(config: Pick<Config, 'dataDir'>): string {
  return path.join(config.dataDir, 'school-data.db');
}

/** How long closing a PostgreSQL store waits for the server to close its connections: milliseconds when it answers. */
const SOCKETS_CLOSE_MS = 1000;
/**
 * Silence on a connection after which TCP asks the server whether it is there (then once a
 * second, ten times: libuv's settings): a connection with no timeout of its own, the
 * import's, learns of a partition in about 20 s instead of the system's two hours.
 */
const KEEPALIVE_IDLE_MS = 10_000;

/** A driver's error (or an optional setting's refusal) that is handled by other means. */
const noop = (): void => undefined;

// int8 (counts, sums, money) and numeric (sums of int8) arrive as text from pg; every
// value this service stores or sums fits a double exactly (money: src/importer/money-bound.ts),
// so both become numbers.
function pgTypes(driver: typeof pg) {
  return {
    getTypeParser(oid: number, format?: string): (value: string) => unknown {
      if (oid === 20 || oid === 1700) return (v: string) => Number(v);
      return driver.types.getTypeParser(oid, format as 'text') as (value: string) => unknown;
    },
  };
}

/**
 * How long an import's COPY may go without PostgreSQL taking its bytes (src/db/bulk.ts): ten
 * query timeouts, and 30 s at least, longer than a busy server's pauses and than it takes to
 * read the rows in the sockets' buffers after the last was sent.
 */
const copyStallMs = (dbTimeoutMs: number) => Math.max(30_000, 10 * dbTimeoutMs);

/**
 * DATABASE_URL with `sslmode` read as libpq (psql) reads it: `require` encrypts without
 * checking the server's certificate, `verify-full` checks it and the host name. pg alone
 * would check for `require` too, and print a warning that its next major version will not.
 * pg's own `no-verify`, which libpq's reading does not know, is `require`.
 */
function withLibpqSslModes(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  url.searchParams.set('uselibpqcompat', 'true');
  if (url.searchParams.get('sslmode') === 'no-verify') url.searchParams.set('sslmode', 'require');
  return url.toString();
}

/**
 * How long a write on SQLite waits for another process's write lock (an import's merge holds
 * it for minutes): `lockWaitMs`, SCHOOL_DATA_DB_TIMEOUT_MS unless given; `onLockWait` is told
 * when a statement has waited a second for it.
 */
export interface LockWait {
  lockWaitMs?: number;
  onLockWait?: () => void;
}

export function openStore(config: Pick<Config, 'databaseUrl' | 'dataDir' | 'dbTimeoutMs' | 'dbPoolSize'>, lockWait: LockWait = {}): Store {
  if (config.databaseUrl) {
    // Loaded when PostgreSQL is configured: an embedded (SQLite) process never loads the driver.
    const driver = createRequire(import.meta.url)('pg') as typeof pg;
    const sockets = new Sockets();
    const connection = {
      connectionString: withLibpqSslModes(config.databaseUrl),
      connectionTimeoutMillis: config.dbTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
      types: pgTypes(driver),
      stream: sockets.stream,
    };
    const pool = new driver.Pool({
      ...connection,
      max: config.dbPoolSize,
      // Bounds a query on the server and on the client, so a blackholed database
      // turns into a 503 rather than a hanging request.
      statement_timeout: config.dbTimeoutMs,
      query_timeout: config.dbTimeoutMs + 500,
      idleTimeoutMillis: 30_000,
      // Every statement on the pool is planned without its values: a named one once per
      // connection, as SQLite's reads are. Left to choose, PostgreSQL plans the key lookup
      // again on every run where a turn has few keys (docs/decisions.md, "PostgreSQL plans
      // each read once"). The pool waits for it before it hands the connection out (a
      // query sent meanwhile would be queued behind it on the client, which pg 9 refuses);
      // a server without the setting keeps its own choice. READ_COMMITTED comes first (bulk.ts).
      // eslint-disable-next-line @typescript-eslint/no-misused-promises -- pg-pool waits for the promise; @types/pg types the hook as void
      onConnect: async (client) => {
        await client.query(READ_COMMITTED);
        await client.query('set plan_cache_mode = force_generic_plan').then(noop, noop);
      },
    });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    pool.on('error', noop);
    // Nor a client in use: the pool listens only to idle ones, and pg emits 'error' on a
    // client whose connection drops mid-query (an unhandled 'error' would end the process).
    // Its query fails by itself (503), and the pool discards the client when it comes back.
    pool.on('connect', (client) => client.on('error', noop));
    const url = new URL(config.databaseUrl);
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    registerBulk(db, { driver, connection, stallMs: copyStallMs(config.dbTimeoutMs) });
    const reads = new PgReader(db, pool);
    const onMigrationConnection = async <T>(work: (migrationDb: Kysely<Database>) => Promise<T>) => {
      const migrationDb = openMigrationConnection(driver, connection);
      try {
        return await work(migrationDb);
      } finally {
        await migrationDb.destroy();
      }
    };
    const migrate = (to?: string) => onMigrationConnection((migrationDb) => runMigrations(migrationDb, to));
    const upgrade = <T>(derive: (db: Kysely<Database>) => Promise<T>) => onMigrationConnection((migrationDb) => migrateThen(migrationDb, derive));
    const close = async () => {
      await db.destroy();
      // Kysely ends the pool only if it ran a query itself: a process that served only
      // reads (PgReader uses the pool directly) would otherwise keep an idle connection,
      // and stay alive, until the pool's idle timeout.
      if (!pool.ending) await pool.end();
      // The pool's, the watch's and the migrations' connections: those whose server has not
      // closed them by then (a partition) are dropped, so none keeps the process alive.
      await sockets.closeWithin(SOCKETS_CLOSE_MS);
    };
    // The watch's own connection: a query that does not answer within half a lease ends it,
    // and the watch starts again on a new one (a blackholed database is seen as lost).
    const watchKeys = (options: Omit<KeyWatchOptions, 'client'> = {}) =>
      new KeyWatch({ ...options, client: (name) => new driver.Client({ ...connection, application_name: name, query_timeout: (options.leaseMs ?? DEFAULT_LEASE_MS) / 2 }) });
    return { db, reads, dialect: 'postgres', location: `postgres://${url.host}${url.pathname}`, migrate, upgrade, watchKeys, close };
  }
  const named = settingNamed(config, 'dataDir');
  ensureDirectory(config.dataDir, named);
  const file = sqlitePath(config);
  const database = new SQLite(file, { timeout: config.dbTimeoutMs });
  try {
    useWal(database, config.dbTimeoutMs, named);
    database.pragma('synchronous = NORMAL');
    database.pragma('foreign_keys = ON');
    // The writing connection (usage counts, imports, the cabinet) needs no more than SQLite's
    // own default; better-sqlite3 would give it 16 MiB (see READER_CACHE_KIB in reader.ts).
    database.pragma('cache_size = -2000');
    // Opened and set up with SQLite's own (blocking) busy wait; from here on the dialect waits.
    database.pragma('busy_timeout = 0');
  } catch (error) {
    database.close();
    throw error;
  }
  const db = new Kysely<Database>({
    dialect: new WritingSqliteDialect(withStatementCache(database), () => database.inTransaction, lockWait.lockWaitMs ?? config.dbTimeoutMs, lockWait.onLockWait),
  });
  registerBulk(db, { sqliteFile: file });
  const reads = new SqliteReader(db, file, config.dbTimeoutMs);
  return {
    db,
    reads,
    dialect: 'sqlite',
    location: file,
    migrate: (to) => runMigrations(db, to),
    upgrade: (derive) => migrateThen(db, derive),
    watchKeys: () => null,
    close: async () => {
      await reads.close();
      await db.destroy();
    },
  };
}

/**
 * Transactions on the writing connection begin IMMEDIATE, taking the write lock first: a
 * deferred one that read before it wrote fails at once with "database is locked" when
 * another process wrote in between (its snapshot is stale, so SQLite cannot wait), where
 * an immediate one waits its turn for up to the busy timeout. Two CLI commands, or the
 * CLI and a running server, then write one after the other. A transaction begun read only
 * (`setAccessMode('read only')`) never writes: it begins deferred, takes no lock, and reads
 * one snapshot while another process writes.
 *
 * Its adapter declares DDL transactional (SQLite's is), so the migrator applies the pending
 * migrations in one such transaction and reads which are pending inside it: commands
 * started at once on a new or older data file migrate it one after the other, the later
 * ones finding nothing left to do.
 *
 * While another process holds the write lock (an import's merge may hold it for minutes),
 * a statement begun outside a transaction (a write, or the `begin immediate` of one) is
 * tried again after a pause, up to `timeoutMs`, then fails with SQLITE_BUSY. SQLite's own
 * busy wait would do the same but block the thread, and with it every request of a server.
 * A statement begun within `withoutLockWait` is tried once.
 */
class WritingSqliteDialect extends SqliteDialect {
  private readonly inTransaction: () => boolean;

  constructor(
    database: SqliteDatabase,
    inTransaction: () => boolean,
    timeoutMs: number,
    onLockWait?: () => void,
  ) {
    super({
      database,
      onCreateConnection: (connection) => {
        const execute = connection.executeQuery.bind(connection);
        connection.executeQuery = <R>(query: CompiledQuery) =>
          inTransaction() || unwaitedWork.getStore() === true ? execute<R>(query) : whenNotBusy(() => execute<R>(query), timeoutMs, onLockWait);
        return Promise.resolve();
      },
    });
    this.inTransaction = inTransaction;
  }

  override createAdapter(): SqliteAdapter {
    return new TransactionalDdlSqliteAdapter();
  }

  override createDriver(): SqliteDriver {
    const driver = super.createDriver() as SqliteDriver;
    // Kysely's Driver passes the transaction's settings; SqliteDriver's own type leaves them out.
    (driver as Driver).beginTransaction = async (connection: DatabaseConnection, settings: TransactionSettings) => {
      await connection.executeQuery(CompiledQuery.raw(settings.accessMode === 'read only' ? 'begin' : 'begin immediate'));
    };
    // SQLite ends a transaction itself on some errors (a full disk, an I/O error): a rollback
    // sent then would fail, and its "no transaction is active" would hide the error itself.
    driver.rollbackTransaction = async (connection: DatabaseConnection) => {
      if (this.inTransaction()) await connection.executeQuery(CompiledQuery.raw('rollback'));
    };
    return driver;
  }
}

/** Set while `withoutLockWait` runs its work: the statements it begins are tried once. */
const unwaitedWork = new AsyncLocalStorage<boolean>();

/**
 * Runs `work`, writes better put off than waited for (a cabinet session's upkeep, the usage
 * flush, each retried by a later request or flush): on SQLite, its statements and the
 * `begin immediate` of its transactions fail at once with SQLITE_BUSY while another process
 * holds the write lock, instead of waiting up to the store's timeout while the writing
 * connection's other queries (the cabinet's pages) queue behind them. On PostgreSQL nothing
 * changes.
 */
export function withoutLockWait<T>(work: () => Promise<T>): Promise<T> {
  return unwaitedWork.run(true, work);
}

/** Pauses between tries of a statement that found the database busy, as SQLite's own busy handler's; then the last, repeated. */
const BUSY_PAUSES_MS = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];

/** The pause after the `tries`-th try that found the lock held, at most the `left` ms before the deadline. */
const busyPause = (tries: number, left: number): number => Math.min(BUSY_PAUSES_MS[Math.min(tries, BUSY_PAUSES_MS.length - 1)]!, left);

/** A wait for the lock this long is told to `onLockWait` (shorter ones are two writers taking turns). */
const LOCK_WAIT_TOLD_MS = 1000;

/** A cell to wait on that nothing ever wakes: Atomics.wait on it is a pause of the thread. */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/**
 * Sets the file's journal to WAL, in which readers and the writer do not block each other.
 * A new file is changed to WAL under an exclusive lock, and when several processes open a
 * new file at once (commands started together on a new data directory), SQLite answers one
 * that would wait for another doing the same SQLITE_BUSY at once, skipping its busy wait
 * where waiting could deadlock: it is tried again after a pause, until `timeoutMs`. The
 * thread waits, as SQLite's own busy wait does: nothing is served before the store is open.
 * `named` is how its refusal names the data directory's setting.
 */
export function useWal(database: SQLite.Database, timeoutMs: number, named: string): void {
  const deadline = performance.now() + timeoutMs;
  let mode: unknown;
  for (let tries = 0; ; tries++) {
    try {
      // SQLite's own busy wait, where it does wait, ends at the same deadline.
      database.pragma(`busy_timeout = ${Math.max(1, Math.ceil(deadline - performance.now()))}`);
      mode = database.pragma('journal_mode = WAL', { simple: true });
      break;
    } catch (error) {
      const left = deadline - performance.now();
      if (!isLockWait(error) || left <= 0) throw error;
      Atomics.wait(PAUSE, 0, 0, busyPause(tries, left));
    }
  }
  // SQLite keeps the journal it has where it cannot keep a WAL (a file system without shared
  // memory, some network ones): readers would then block the writer and the usage counts.
  if (mode !== 'wal') {
    throw new ConfigError(`${named}: SQLite cannot keep its write-ahead log for ${database.name} (the journal stayed "${String(mode)}"): put the data directory on a local file system`);
  }
}

/**
 * Runs `attempt`, again after a pause each time it fails with SQLITE_BUSY, until `timeoutMs`
 * has passed; `onWait` hears once of a wait past LOCK_WAIT_TOLD_MS.
 */
async function whenNotBusy<R>(attempt: () => Promise<R>, timeoutMs: number, onWait?: () => void): Promise<R> {
  const started = performance.now();
  const deadline = started + timeoutMs;
  let told = false;
  for (let tries = 0; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      const left = deadline - performance.now();
      if (!isLockWait(error) || left <= 0) throw error;
      if (!told && performance.now() - started >= LOCK_WAIT_TOLD_MS) {
        told = true;
        onWait?.();
      }
      await delay(busyPause(tries, left));
    }
  }
}

class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

/** Distinct query texts kept prepared; the service has a few dozen, so this is only a backstop. */
const STATEMENT_CACHE_SIZE = 500;

/**
 * Kysely asks better-sqlite3 to prepare (parse and plan) every query it runs, which on a
 * small indexed read costs more than the read. The service runs a few dozen distinct
 * query texts, so each is prepared once and the statement reused. Sharing one statement
 * is safe: better-sqlite3 runs it synchronously, and a streamed query holds Kysely's
 * connection lock until it ends.
 */
function withStatementCache(database: SQLite.Database): SqliteDatabase {
  const statements = new Map<string, SqliteStatement>();
  return {
    close: () => database.close(),
    prepare(text: string) {
      let statement = statements.get(text);
      if (statement === undefined) {
        if (statements.size >= STATEMENT_CACHE_SIZE) statements.clear();
        const prepared = database.prepare(text);
        statement = prepared.reader ? objectRows(prepared) : prepared;
        statements.set(text, statement);
      }
      return statement;
    },
  };
}

/**
 * Stands in for a value while a prepared query is compiled. Turning it into a string or a
 * number throws, so a builder that computes with a value (rather than passing it to
 * Kysely) fails at once instead of baking one request's value into the SQL.
 */
class Slot {
  readonly name: string;

  constructor(name: string) {
    this.name = name;
  }
  [Symbol.toPrimitive](): never {
    throw new Error(`prepared query: the value "${this.name}" may only be handed to Kysely, not computed with`);
  }
}

interface Template {
  sql: string;
  /** Per parameter of the SQL: the index in `names` of the value that fills it, or -1 for a constant of the query. */
  sources: number[];
  constants: unknown[];
}

/**
 * A query that Kysely builds and compiles once per shape, then runs with each request's
 * values. Building and compiling a query tree costs more than a small indexed read, and
 * the API's queries differ between requests only in their values.
 *
 * `build` gets a stand-in for every value that is not undefined and returns the query. The
 * shape is which values are defined: `if (q.status !== undefined) f = f.where(...)` gives
 * one compiled query per combination of filters. Values may only be passed to Kysely as
 * values (where, limit, offset ...): never branched on beyond `!== undefined`, never
 * computed with. The SQL text is still Kysely's, one text per dialect.
 *
 * Every call passes the same keys (a value not given is undefined, not left out): the
 * shape is then a bit per key, worked out without building anything per request.
 *
 * On PostgreSQL a value the query uses in several places is one parameter, sent (and, in a
 * batch of reads, put in an array) once; its uses must then be of one type.
 */
export function prepared<P extends object, R>(build: (db: Kysely<Database>, values: P) => Compilable<R>): (reader: Reader, values: P) => R[] | Promise<R[]> {
  const templates = new WeakMap<Kysely<Database>, Map<number, Template>>();
  let names: string[] | null = null;
  return (reader, values) => {
    const given = values as Record<string, unknown>;
    names ??= Object.keys(given);
    if (names.length > 30) throw new Error('prepared query: at most 30 values');
    let shape = 0;
    for (let i = 0; i < names.length; i++) if (given[names[i]!] !== undefined) shape |= 1 << i;
    let perDb = templates.get(reader.db);
    if (perDb === undefined) templates.set(reader.db, (perDb = new Map<number, Template>()));
    let template = perDb.get(shape);
    if (template === undefined) {
      template = compileTemplate(reader.db, build, names, given);
      perDb.set(shape, template);
    }
    const { sql: text, sources, constants } = template;
    const parameters = new Array<unknown>(sources.length);
    for (let i = 0; i < sources.length; i++) {
      const source = sources[i]!;
      parameters[i] = source < 0 ? constants[i] : given[names[source]!];
    }
    return reader.run<R>(text, parameters);
  };
}

function compileTemplate<P extends object>(db: Kysely<Database>, build: (db: Kysely<Database>, values: P) => Compilable<unknown>, names: string[], given: Record<string, unknown>): Template {
  const keys = Object.keys(given);
  if (keys.length !== names.length || keys.some((k, i) => k !== names[i])) {
    throw new Error(`prepared query: every call must pass the same keys (${names.join(', ')}), got ${keys.join(', ')}`);
  }
  const stand: Record<string, Slot> = {};
  for (const name of names) if (given[name] !== undefined) stand[name] = new Slot(name);
  const compiled = build(db, stand as P).compile();
  const parameters = compiled.parameters;
  if (!onPostgres(db)) {
    return { sql: compiled.sql, sources: parameters.map((p) => (p instanceof Slot ? names.indexOf(p.name) : -1)), constants: [...parameters] };
  }
  // PostgreSQL numbers its parameters: a value the query uses in several places is sent once.
  const sources: number[] = [];
  const constants: unknown[] = [];
  const numberOf = new Map<string, number>();
  const renumbered = parameters.map((p) => {
    const known = p instanceof Slot ? numberOf.get(p.name) : undefined;
    if (known !== undefined) return known;
    sources.push(p instanceof Slot ? names.indexOf(p.name) : -1);
    constants.push(p);
    if (p instanceof Slot) numberOf.set(p.name, sources.length);
    return sources.length;
  });
  return { sql: withParameters(compiled.sql, (n) => `$${renumbered[n - 1]}`), sources, constants };
}

/** Whether a Kysely instance (or transaction) talks to PostgreSQL rather than SQLite. */
export function onPostgres(db: { getExecutor(): { adapter: unknown } }): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/**
 * A text expression as bytes where the driver hands bytes over as they are (SQLite: a
 * Buffer), else as text (PostgreSQL, whose driver decodes text results). A response body
 * made by the database is sent as it is read: decoding it into a JavaScript string only to
 * encode it again for the socket would be work for nothing.
 */
export function asBytes<T>(db: Kysely<Database>, text: Expression<T>): RawBuilder<T | Buffer> {
  return onPostgres(db) ? sql<T>`${text}` : sql<Buffer>`cast(${text} as blob)`;
}

/** The store was migrated by a newer version of the program: this one refuses to run on it. */
export class StoreNewerError extends Error {
  readonly migrations: string[];

  constructor(migrations: string[]) {
    super(`the data store was upgraded by a newer school-data (its migration ${migrations.join(', ')} is unknown here): run that version or a later one`);
    this.migrations = migrations;
    this.name = 'StoreNewerError';
  }
}

/**
 * The names of the migrations the store has run, read from Kysely's bookkeeping table
 * (on PostgreSQL, the one in `schema`); null when that table is not there (a new store).
 */
async function executedMigrations(db: Kysely<Database>, schema: string | undefined): Promise<string[] | null> {
  const pg = onPostgres(db);
  if (pg && schema === undefined) return null;
  const present = pg
    ? sql`select 1 where to_regclass(quote_ident(${schema}) || '.kysely_migration') is not null`
    : sql`select 1 from sqlite_master where type = 'table' and name = 'kysely_migration'`;
  if ((await present.execute(db)).rows.length === 0) return null;
  const table = pg ? sql.id(schema!, 'kysely_migration') : sql.id('kysely_migration');
  return (await sql<{ name: string }>`select name from ${table}`.execute(db)).rows.map((r) => r.name);
}

/** Every pending migration, then `derive`, on `db` (a store's `upgrade`). */
async function migrateThen<T>(db: Kysely<Database>, derive: (db: Kysely<Database>) => Promise<T>): Promise<{ applied: string[]; derived: T }> {
  const applied = await runMigrations(db, undefined);
  return { applied, derived: await derive(db) };
}

async function runMigrations(db: Kysely<Database>, to: string | undefined): Promise<string[]> {
  // On PostgreSQL the bookkeeping tables go in the connection's own schema: without it,
  // Kysely would take a migration table in any schema on the search path for its own.
  // Null when the search_path names no existing schema: Kysely's migrator then says why.
  const schema = onPostgres(db)
    ? ((await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db)).rows[0]?.schema ?? undefined)
    : undefined;
  // Nothing pending, nothing to lock: a command or server start on a current store does
  // not wait for the write lock (on SQLite, an import may hold it for minutes), nor list
  // every column of the schema, as Kysely's migrator does before it looks.
  if (to === undefined) {
    const executed = await executedMigrations(db, schema);
    if (executed !== null && Object.keys(migrations).every((name) => executed.includes(name))) {
      // A store a newer version migrated holds read models this one would not keep up to
      // date (an import here would leave them stale): refused, as Kysely refuses it when
      // something is pending.
      const newer = executed.filter((name) => !Object.hasOwn(migrations, name));
      if (newer.length > 0) throw new StoreNewerError(newer);
      return [];
    }
  }
  const migrator = new Migrator({
    db,
    provider: { getMigrations: () => Promise.resolve(migrations) },
    ...(schema ? { migrationTableSchema: schema } : {}),
  });
  const { error, results } = await (to === undefined ? migrator.migrateToLatest() : migrator.migrateTo(to));
  if (error) throw error instanceof Error ? error : new Error(`migration failed: ${JSON.stringify(error)}`);
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/**
 * Refreshes the planner's statistics after a bulk write, so that each filter picks
 * the index made for it rather than the one that only matches the order. `run` runs
 * the statements (default: on `db` itself; an import runs them on its own connection).
 * `written`: on PostgreSQL, only these tables (an import's), and of each only the columns
 * its indexes hold, which choose the plans; the free text and the items' JSON took half
 * the time and weigh only in cost estimates, left to autovacuum's ANALYZE. Without
 * `written`, every column of every table of the service's schema. SQLite's `pragma
 * optimize` picks the tables that need it itself.
 */
export async function refreshStatistics(
  db: Kysely<Database>,
  run: (query: CompiledQuery) => Promise<{ rows: unknown[] }> = (q) => db.executeQuery(q),
  written?: readonly (keyof Database)[],
): Promise<void> {
  if (onPostgres(db)) {
    // Only this service's tables: a bare ANALYZE reads every table of every schema in the
    // database, which can outlast statement_timeout and fail an import already committed.
    if (!written) {
      const tables = ((await run(sql`select tablename as name from pg_tables where schemaname = current_schema()`.compile(db))).rows as { name: string }[]).map((t) => t.name);
      if (tables.length > 0) await run(sql`analyze ${sql.join(tables.map((name) => sql.id(name)))}`.compile(db));
      return;
    }
    if (written.length === 0) return;
    // A table with an index on an expression or a part of its rows is analyzed whole: its
    // columns are not all in indkey, and PostgreSQL skips an expression's statistics
    // when ANALYZE names columns.
    const indexed = (
      await run(
        sql`select t.relname as name, array_agg(distinct a.attname::text order by a.attname::text) as columns,
                   bool_or(i.indexprs is not null or i.indpred is not null) as whole
              from pg_index i
              join pg_class t on t.oid = i.indrelid
              join pg_namespace n on n.oid = t.relnamespace and n.nspname = current_schema()
              left join pg_attribute a on a.attrelid = t.oid and a.attnum = any(i.indkey) and a.attnum > 0
             where t.relname in (${sql.join(written)})
             group by t.relname`.compile(db),
      )
    ).rows as { name: string; columns: (string | null)[]; whole: boolean }[];
    const byName = new Map(indexed.map((t) => [t.name, t]));
    const targets = written.map((name) => {
      const columns = (byName.get(name)?.columns ?? []).filter((c): c is string => c !== null);
      const whole = byName.get(name)?.whole !== false || columns.length === 0;
      return whole ? sql.id(name) : sql`${sql.id(name)} (${sql.join(columns.map((c) => sql.id(c)))})`;
    });
    await run(sql`analyze ${sql.join(targets)}`.compile(db));
  } else {
    await run(sql`pragma optimize`.compile(db));
  }
}
