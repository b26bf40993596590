/**
 * The API's read path: Kysely builds and compiles every query (`prepared`), and the
 * compiled statement runs straight on the driver, without Kysely's executor (it costs more
 * than the API's small indexed reads: docs/performance.md).
 * - SQLite: a read-only connection of its own, opened on first use; each query text is
 *   prepared and planned once (its parameters hidden from the planner: opaqueParameters);
 *   the reads of one turn of the event loop share one read transaction.
 * - PostgreSQL: the store's pool, each query text a named prepared statement, planned
 *   once per connection (its generic plan: src/db/index.ts); the reads of one turn that
 *   run the same statement go out together as one (PgReader).
 */
import SQLite from 'better-sqlite3';
import type { Kysely, SqliteStatement } from 'kysely';
import type pg from 'pg';
import type { Database } from './schema.js';
import { isStoreUnavailable } from './unavailable.js';

export interface Reader {
  /** Builds and compiles the queries; they never run through it. */
  readonly db: Kysely<Database>;
  readonly dialect: 'sqlite' | 'postgres';
  /**
   * Runs a compiled query. SQLite's driver is synchronous and answers at once (a failure
   * is thrown); PostgreSQL answers with a promise. `await` takes either; the access check
   * uses the first to decide a request without a promise (src/access/decide.ts).
   */
  run<R>(sql: string, parameters: readonly unknown[]): R[] | Promise<R[]>;
  close(): Promise<void>;
}

/** Distinct query texts kept prepared; the service has a few dozen, so this is only a backstop. */
const STATEMENT_CACHE_SIZE = 500;

const NO_PARAMETERS: readonly unknown[] = [];

/**
 * The read connection's page cache, in KiB. better-sqlite3 builds SQLite with 16 MiB per
 * connection, which a large database fills, in every server process; the pages are in
 * the operating system's cache anyway, and 4 MiB (the upper levels of the indexes the
 * API reads) answers as fast in the benchmark (docs/performance.md, "Memory").
 */
const READER_CACHE_KIB = 4096;

/**
 * Reading rows as arrays and naming their fields here is about a quarter cheaper than
 * better-sqlite3 building each row object through V8's C++ API.
 */
export function objectRows(statement: SQLite.Statement): SqliteStatement {
  statement.raw(true);
  const names = statement.columns().map((c) => c.name);
  const toObject = (row: unknown[]) => {
    const out: Record<string, unknown> = {};
    for (let i = 0; i < names.length; i++) out[names[i]!] = row[i];
    return out;
  };
  return {
    reader: true,
    all: (parameters) => (statement.all(parameters) as unknown[][]).map(toObject),
    run: (parameters) => statement.run(parameters),
    *iterate(parameters) {
      for (const row of statement.iterate(parameters) as IterableIterator<unknown[]>) yield toObject(row);
    },
  };
}

/**
 * The query with every parameter written `+?`, so that SQLite plans it without its
 * values. A statement whose plan read a bound value (the index statistics of
 * `sqlite_stat4`, an ORDER BY or LIMIT the value could change) is planned again on every
 * run, as each run binds its values anew: for the API's statements that planning costs
 * several times the reading (docs/performance.md, "SQLite planned every read again").
 * `+?` is the same value with the same affinity (none), and an index takes it as it takes
 * `?`; SQLite then plans once, by the statistics alone, as PostgreSQL's generic plans do.
 * Question marks in quoted text or names, and in comments, are left as they are.
 */
export function opaqueParameters(text: string): string {
  let out = '';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "'" || c === '"' || c === '`') {
      const end = text.indexOf(c, i + 1);
      // A doubled quote inside is two quoted runs one after the other: the loop goes on at the next.
      i = end === -1 ? text.length : end;
    } else if (c === '[') {
      const end = text.indexOf(']', i + 1);
      i = end === -1 ? text.length : end;
    } else if (c === '-' && text[i + 1] === '-') {
      const end = text.indexOf('\n', i + 2);
      i = end === -1 ? text.length : end;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end === -1 ? text.length : end + 1;
    } else if (c === '?') {
      out += `${text.slice(from, i)}+`;
      from = i;
    }
  }
  return out + text.slice(from);
}

export class SqliteReader implements Reader {
  readonly dialect = 'sqlite';
  private connection: SQLite.Database | null = null;
  private readonly statements = new Map<string, SqliteStatement>();

  readonly db: Kysely<Database>;
  private readonly file: string;
  private readonly timeoutMs: number;

  constructor(
    db: Kysely<Database>,
    file: string,
    timeoutMs: number,
  ) {
    this.db = db;
    this.file = file;
    this.timeoutMs = timeoutMs;
  }

  /** BEGIN, COMMIT and the data version's pragma on the read connection, made with it. */
  private turn: { begin: SQLite.Statement; commit: SQLite.Statement; dataVersion: SQLite.Statement } | null = null;
  private turnOpen = false;
  private turnsBegun = 0;

  /**
   * Which read transaction is open: a number no other has had, or 0 when none is. Results
   * read under the same number come from the same snapshot (src/access/lookup.ts keeps
   * the key rows of one by it).
   */
  get snapshot(): number {
    return this.turnOpen ? this.turnsBegun : 0;
  }

  /**
   * Runs a query in the read transaction of the current turn of the event loop, opening
   * one if there is none; it ends when the turn does (setImmediate). A statement run on
   * its own is a transaction of its own, whose locking (a shared lock on the WAL index and
   * the checks that the file has not changed: four system calls) costs several times an
   * indexed read; under load a turn handles many requests, so the key lookups and queries
   * of all of them share one. They also all read one snapshot: a page and its total can
   * never disagree. What committed before the turn began is seen, as with a transaction
   * per statement; what commits during the turn (at most a few milliseconds) is seen by
   * the next one.
   */
  run<R>(sql: string, parameters: readonly unknown[]): R[] {
    return this.inTurn(this.statement(sql), parameters) as R[];
  }

  /**
   * The data version and the snapshot it was read in (0: none yet). SQLite's number is the
   * connection's own: each new connection's numbers start above every one returned before.
   */
  private version = { snapshot: 0, value: 0, base: 0 };

  /**
   * SQLite's data version of the file, read in the current turn's snapshot (once per
   * snapshot): it differs from an earlier snapshot's as soon as any other connection, of
   * this process or another, has committed in between. Two snapshots with the same number
   * read the same data.
   */
  dataVersion(): number {
    this.connect();
    const version = this.version;
    if (version.snapshot === 0 || version.snapshot !== this.snapshot) {
      version.value = version.base + (this.inTurn(this.turn!.dataVersion, NO_PARAMETERS)[0] as number);
      version.snapshot = this.turnsBegun;
    }
    return version.value;
  }

  /** Runs `statement` in the turn's read transaction, beginning one if none is open. */
  private inTurn(statement: { all(parameters: readonly unknown[]): unknown[] }, parameters: readonly unknown[]): unknown[] {
    if (!this.turnOpen) {
      this.turn!.begin.run();
      this.turnOpen = true;
      this.turnsBegun += 1;
      setImmediate(this.endTurn);
    }
    try {
      return statement.all(parameters);
    } catch (error) {
      // Some errors (SQLITE_BUSY, IOERR, FULL) roll the transaction back: the next read
      // then begins another, with a snapshot of its own.
      if (!this.connection!.inTransaction) this.turnOpen = false;
      throw error;
    }
  }

  private readonly endTurn = (): void => {
    this.turnOpen = false;
    if (this.connection?.inTransaction) this.turn!.commit.run();
  };

  private statement(text: string): SqliteStatement {
    let statement = this.statements.get(text);
    if (statement === undefined) {
      const connection = this.connect();
      if (this.statements.size >= STATEMENT_CACHE_SIZE) this.statements.clear();
      statement = objectRows(connection.prepare(opaqueParameters(text)));
      this.statements.set(text, statement);
    }
    return statement;
  }

  /**
   * The read connection, opened on first use: by then the writing connection has created
   * the file and migrated it (a read-only connection can do neither).
   */
  private connect(): SQLite.Database {
    if (this.connection === null) {
      this.connection = new SQLite(this.file, { readonly: true, timeout: this.timeoutMs });
      this.connection.pragma(`cache_size = -${READER_CACHE_KIB}`);
      this.turn = {
        begin: this.connection.prepare('BEGIN'),
        commit: this.connection.prepare('COMMIT'),
        dataVersion: this.connection.prepare('PRAGMA data_version').pluck(),
      };
    }
    return this.connection;
  }

  close(): Promise<void> {
    this.statements.clear();
    this.connection?.close();
    this.connection = null;
    this.turn = null;
    this.turnOpen = false;
    this.version = { snapshot: 0, value: 0, base: this.version.value + 1 };
    return Promise.resolve();
  }
}

/** A read waiting for the end of the turn, with what its caller awaits. */
interface WaitingRead {
  parameters: readonly unknown[];
  resolve: (rows: unknown[]) => void;
  reject: (error: unknown) => void;
}

/**
 * Reads of one statement text merged into one batch at most; a turn's reads beyond it go out
 * at once in batches whose sizes differ by one at most, each on a connection of its own. One
 * batch is read by one PostgreSQL backend, a read after the other, while the server waits;
 * in smaller batches the backends read side by side, and the first answers are written while
 * the last are read (docs/performance.md, "A turn's reads in batches of ten").
 */
const MAX_BATCH = 10;

/** The column a batch adds to every row: which read of the batch the row answers (1-based). */
const BATCH_INDEX = '__school_data_read';

/**
 * PostgreSQL's type for an array of a parameter's values, by the JavaScript value; null when
 * the statement cannot be batched with it (an array, for one: the key lookup's `any($1)`).
 */
function arrayType(value: unknown): string | null {
  if (typeof value === 'string') return 'text[]';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int8[]' : 'float8[]';
  if (typeof value === 'boolean') return 'bool[]';
  return null;
}

/** Whether two reads' values would go in arrays of the same types (`arrayType`). */
function sameTypes(a: readonly unknown[], b: readonly unknown[]): boolean {
  for (let i = 0; i < a.length; i++) if (arrayType(a[i]) !== arrayType(b[i])) return false;
  return true;
}

/**
 * `text` with each parameter `$n` written as `to(n)`; quoted text and names are left as they
 * are (the API's statements, Kysely's, have no comments).
 */
export function withParameters(text: string, to: (n: number) => string): string {
  let out = '';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "'" || c === '"') {
      const end = text.indexOf(c, i + 1);
      i = end === -1 ? text.length : end;
    } else if (c === '$' && /[0-9]/.test(text[i + 1] ?? '')) {
      let j = i + 1;
      while (j < text.length && /[0-9]/.test(text[j]!)) j++;
      out += `${text.slice(from, i)}${to(Number(text.slice(i + 1, j)))}`;
      from = j;
      i = j - 1;
    }
  }
  return out + text.slice(from);
}

/**
 * The statement that answers many reads of `text` at once: one row of parameters per read,
 * each run through the statement as a lateral subquery, its rows tagged with the read's place.
 * Parameters `$n` become the columns `p<n>`.
 */
export function batchedText(text: string, types: readonly string[]): string {
  const inner = withParameters(text, (n) => `"batch"."p${n}"`);
  const arrays = types.map((type, i) => `$${i + 1}::${type}`).join(', ');
  const columns = types.map((_, i) => `"p${i + 1}"`).join(', ');
  return `select "batch"."${BATCH_INDEX}", "read".* from unnest(${arrays}) with ordinality as "batch"(${columns}, "${BATCH_INDEX}") cross join lateral (${inner}) as "read"`;
}

/**
 * On PostgreSQL the reads of one turn of the event loop that run the same statement go out
 * as one statement (`batchedText`), as the key lookups of a turn do: a round trip, and
 * PostgreSQL's work per statement, for all of them, where a statement per read cost
 * PostgreSQL twice the CPU of the reads themselves (docs/performance.md, "Reads of a turn in
 * one statement"). Each read gets its own rows back, in the statement's order. A turn with
 * one read of a statement sends it as it is.
 */
export class PgReader implements Reader {
  readonly dialect = 'postgres';
  /** Query text -> statement name. Names are per process, like the pool's connections. */
  private readonly names = new Map<string, string>();
  /** Query text -> the types of a batch's parameters -> its batched text. */
  private readonly batchedTexts = new Map<string, Map<string, string>>();
  private waiting = new Map<string, WaitingRead[]>();
  private scheduled = false;

  readonly db: Kysely<Database>;
  private readonly pool: pg.Pool;

  constructor(
    db: Kysely<Database>,
    pool: pg.Pool,
  ) {
    this.db = db;
    this.pool = pool;
  }

  run<R>(sql: string, parameters: readonly unknown[]): Promise<R[]> {
    if (parameters.length === 0 || !parameters.every((p) => arrayType(p) !== null)) return this.query(sql, parameters) as Promise<R[]>;
    return new Promise((resolve, reject) => {
      const read = { parameters, resolve: resolve as (rows: unknown[]) => void, reject };
      const same = this.waiting.get(sql);
      if (same === undefined) this.waiting.set(sql, [read]);
      else same.push(read);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    const all = this.waiting;
    this.waiting = new Map();
    for (const [sql, reads] of all) {
      if (reads.length === 1) {
        this.alone(sql, reads[0]!);
        continue;
      }
      // Reads whose values have other types (a number where another read has text) go in a batch of their own.
      const groups: WaitingRead[][] = [];
      for (const read of reads) {
        const group = groups.find((g) => sameTypes(g[0]!.parameters, read.parameters));
        if (group === undefined) groups.push([read]);
        else group.push(read);
      }
      for (const group of groups) {
        if (group.length === 1) {
          this.alone(sql, group[0]!);
          continue;
        }
        const text = this.batchedText(sql, group[0]!.parameters);
        const batches = Math.ceil(group.length / MAX_BATCH);
        for (let j = 0; j < batches; j++) {
          void this.batch(sql, text, group.slice(Math.floor((j * group.length) / batches), Math.floor(((j + 1) * group.length) / batches)));
        }
      }
    }
  };

  /** The batched form of `sql` for reads with the types of `parameters`, made once. */
  private batchedText(sql: string, parameters: readonly unknown[]): string {
    const types = parameters.map(arrayType) as string[];
    const key = types.join(',');
    let forSql = this.batchedTexts.get(sql);
    if (forSql === undefined) this.batchedTexts.set(sql, (forSql = new Map<string, string>()));
    let text = forSql.get(key);
    if (text === undefined) forSql.set(key, (text = batchedText(sql, types)));
    return text;
  }

  /** A read sent by itself, as written. */
  private alone(sql: string, read: WaitingRead): void {
    this.query(sql, read.parameters).then(read.resolve, read.reject);
  }

  /** Reads of one statement with values of the same types, in one statement: two at least. */
  private async batch(sql: string, batched: string, reads: WaitingRead[]): Promise<void> {
    const columns = reads[0]!.parameters.map((_, i) => reads.map((r) => r.parameters[i]));
    let rows: Record<string, unknown>[];
    try {
      rows = await this.query(batched, columns);
    } catch (error) {
      if (isStoreUnavailable(error)) for (const read of reads) read.reject(error);
      // A read that fails by itself (a value PostgreSQL refuses) fails only itself: each goes again alone.
      else for (const read of reads) this.alone(sql, read);
      return;
    }
    const answers: unknown[][] = reads.map(() => []);
    for (const row of rows) {
      const { [BATCH_INDEX]: index, ...fields } = row;
      answers[(index as number) - 1]!.push(fields);
    }
    reads.forEach((read, i) => read.resolve(answers[i]!));
  }

  private async query(sql: string, parameters: readonly unknown[]): Promise<Record<string, unknown>[]> {
    let name = this.names.get(sql);
    if (name === undefined) {
      name = `school_data_${this.names.size + 1}`;
      this.names.set(sql, name);
    }
    const result = await this.pool.query({ name, text: sql, values: parameters as unknown[] });
    // pg's result and its row array are made when the query is sent; under load they often
    // outlive two young-generation collections while PostgreSQL answers and are promoted.
    // A promoted array keeps the rows put into it alive, and promotes them too, until the
    // next full collection, so the rows are moved out of it (docs/performance.md,
    // "PostgreSQL's rows kept by pg's promoted results").
    return result.rows.splice(0) as Record<string, unknown>[];
  }

  /** The pool belongs to the store, which closes it. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
