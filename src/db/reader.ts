/**
 * The API's read path. Kysely builds and compiles every query (see `prepared`), but the
 * compiled statement runs straight on the driver: Kysely's executor (connection
 * provider, plugin chain, a promise per step) costs more than the small indexed reads
 * the API makes, and a request makes one to three of them (docs/performance.md).
 *
 * - SQLite: a connection of its own, opened read-only on first use, so that nothing the
 *   public API runs can write, and no read ever runs inside a transaction of the
 *   process's writing connection (usage counts, the cabinet's key changes). Each query
 *   text is prepared once and the statement reused.
 * - PostgreSQL: the store's pool, with each query text as a named prepared statement, so
 *   the server parses it once per connection.
 */
import SQLite from 'better-sqlite3';
import type { CompiledQuery, Kysely, SqliteStatement } from 'kysely';
import type pg from 'pg';
import type { Database } from './schema.js';

export interface Reader {
  /** Builds and compiles the queries; they never run through it. */
  readonly db: Kysely<Database>;
  run<R>(query: CompiledQuery<R>): Promise<R[]>;
  close(): Promise<void>;
}

/** Distinct query texts kept prepared; the service has a few dozen, so this is only a backstop. */
const STATEMENT_CACHE_SIZE = 500;

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

export class SqliteReader implements Reader {
  private connection: SQLite.Database | null = null;
  private readonly statements = new Map<string, SqliteStatement>();

  constructor(
    readonly db: Kysely<Database>,
    private readonly file: string,
    private readonly timeoutMs: number,
  ) {}

  run<R>(query: CompiledQuery<R>): Promise<R[]> {
    try {
      return Promise.resolve(this.statement(query.sql).all(query.parameters) as R[]);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  private statement(text: string): SqliteStatement {
    let statement = this.statements.get(text);
    if (statement === undefined) {
      // Opened on first use: by then the writing connection has created the file and
      // migrated it (a read-only connection can do neither).
      this.connection ??= new SQLite(this.file, { readonly: true, timeout: this.timeoutMs });
      if (this.statements.size >= STATEMENT_CACHE_SIZE) this.statements.clear();
      statement = objectRows(this.connection.prepare(text));
      this.statements.set(text, statement);
    }
    return statement;
  }

  close(): Promise<void> {
    this.statements.clear();
    this.connection?.close();
    this.connection = null;
    return Promise.resolve();
  }
}

export class PgReader implements Reader {
  /** Query text -> statement name. Names are per process, like the pool's connections. */
  private readonly names = new Map<string, string>();

  constructor(
    readonly db: Kysely<Database>,
    private readonly pool: pg.Pool,
  ) {}

  async run<R>(query: CompiledQuery<R>): Promise<R[]> {
    let name = this.names.get(query.sql);
    if (name === undefined) {
      name = `school_data_${this.names.size + 1}`;
      this.names.set(query.sql, name);
    }
    const result = await this.pool.query({ name, text: query.sql, values: query.parameters as unknown[] });
    return result.rows as R[];
  }

  /** The pool belongs to the store, which closes it. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
