/**
 * Staging: the file's valid records are written, as they are read, into temporary tables
 * of the import's own connection (`stage_<array>`, the rows as they will be stored, plus
 * their index in the file), and the ids an import deletes into `gone_<array>`. Nothing
 * the API reads is touched until the merge (merge.ts) copies them over in one
 * transaction. PostgreSQL fills them with COPY, SQLite with prepared multi-row INSERTs.
 */
import { CompiledQuery, sql } from 'kysely';
import type { BulkConnection, RowLoader } from '../db/bulk.js';
import { MAX_ERRORS, type ErrorList, type ImportError } from './errors.js';
import { isListTable } from './read-model.js';
import { ROW_COLUMNS } from './rows.js';
import { ARRAY_NAMES, type ArrayName } from './schema.js';

export const stageTable = (array: ArrayName): string => `stage_${array}`;
export const goneTable = (array: ArrayName): string => `gone_${array}`;

/**
 * Columns of a staged row that come from more than the file's record: a contract's
 * balance, staged as the file's payments read before it make it, and put right by the
 * merge before the row is written (Merge.prepareContracts).
 */
export const MERGED_COLUMNS: Partial<Record<ArrayName, readonly string[]>> = { contracts: ['paid_minor'] };

/** The staged columns of an array: its index in the file, the row, its merged columns, and a list's item. */
export function stagedColumns(array: ArrayName): string[] {
  return ['idx', ...ROW_COLUMNS[array], ...(MERGED_COLUMNS[array] ?? []), ...(isListTable(array) ? ['item'] : [])];
}

/**
 * Rows are added synchronously, in the file's order, one array after another; `settle()`
 * waits for the loads to keep pace (the source calls it after every chunk it reads).
 * `onStaged`, when given, runs as soon as an array's rows are all staged and indexed, on
 * the connection, while the reading goes on (the merge of that array, on PostgreSQL).
 */
export class Stage {
  private open: { array: ArrayName; loader: RowLoader } | null = null;
  /** What the reading waits for: the loads taking their rows. */
  private waits: Promise<void>[] = [];
  /** What it does not wait for: loads ending, arrays indexed and merged. The first failure is kept. */
  private background: Promise<void>[] = [];
  private failure: { error: unknown } | null = null;
  /** Set by abort(): the jobs not yet begun do nothing. */
  private aborted = false;
  private readonly indexed = new Set<ArrayName>();
  /**
   * The ids staged twice, per array, found when it was indexed: told when the staging
   * finishes, in the arrays' order, so that both stores list them alike (PostgreSQL indexes
   * an array while the file is still read, SQLite after).
   */
  private readonly repeats = new Map<ArrayName, ImportError[]>();
  /** Rows staged per array. */
  readonly staged = Object.fromEntries(ARRAY_NAMES.map((a) => [a, 0])) as Record<ArrayName, number>;

  private readonly conn: BulkConnection;
  private readonly errors: ErrorList;
  private readonly onStaged?: (array: ArrayName) => Promise<void>;

  constructor(
    conn: BulkConnection,
    errors: ErrorList,
    onStaged?: (array: ArrayName) => Promise<void>,
  ) {
    this.conn = conn;
    this.errors = errors;
    this.onStaged = onStaged;
  }

  async create(): Promise<void> {
    const statements = ARRAY_NAMES.flatMap((array) => {
      const columns = stagedColumns(array).slice(1).map((c) => sql.ref(c));
      return [
        sql`create temp table ${sql.table(stageTable(array))} as select cast(0 as integer) as idx, ${sql.join(columns)} from ${sql.table(array)} where 1 = 0`.compile(this.conn.db),
        sql`create temp table ${sql.table(goneTable(array))} (id text primary key, idx integer)`.compile(this.conn.db),
      ];
    });
    // PostgreSQL takes them in one round trip (a statement without parameters may hold several).
    if (this.conn.dialect === 'postgres') await this.conn.run(CompiledQuery.raw(statements.map((s) => s.sql).join(';\n')));
    else for (const statement of statements) await this.conn.run(statement);
  }

  add(array: ArrayName, row: unknown[]): void {
    if (this.open?.array !== array) {
      this.endArray();
      this.open = { array, loader: this.conn.load(stageTable(array), stagedColumns(array)) };
    }
    const wait = this.open.loader.write(row);
    if (wait) {
      // Settled by settle(), or let go after an abort: never a rejection left unhandled.
      wait.catch(() => undefined);
      this.waits.push(wait);
    }
    this.staged[array] += 1;
  }

  /** The current array has ended: its load finishes, then onStaged runs, in the background. */
  endArray(): void {
    const open = this.open;
    this.open = null;
    if (!open) return;
    this.later(open.loader.end());
    const onStaged = this.onStaged;
    if (onStaged) {
      this.later(
        this.conn.exclusive(async () => {
          if (this.aborted) return;
          await this.index(open.array);
          if (!this.aborted) await onStaged(open.array);
        }),
      );
    }
  }

  /** Whether every row of `array` is staged and indexed (its onStaged has begun). */
  isIndexed(array: ArrayName): boolean {
    return this.indexed.has(array);
  }

  private later(work: Promise<void>): void {
    this.background.push(work);
    work.catch((error: unknown) => {
      this.failure ??= { error };
    });
  }

  async settle(): Promise<void> {
    const waits = this.waits;
    this.waits = [];
    // Every wait is awaited, so none is left to fail unhandled.
    const results = await Promise.allSettled(waits);
    for (const result of results) if (result.status === 'rejected') throw result.reason;
    if (this.failure) throw this.failure.error;
  }

  /** Ends the last load, waits for everything begun, and indexes what is not yet. */
  async finish(): Promise<void> {
    this.endArray();
    try {
      await this.settle();
    } finally {
      await Promise.allSettled(this.background);
    }
    if (this.failure) throw this.failure.error;
    for (const array of ARRAY_NAMES) if (this.staged[array] > 0 && !this.indexed.has(array)) await this.index(array);
    for (const array of ARRAY_NAMES) for (const error of this.repeats.get(array) ?? []) this.errors.add(error);
  }

  /** Whether an array indexed so far staged an id twice: the file is refused (told at `finish`). */
  get repeatsIds(): boolean {
    return this.repeats.size > 0;
  }

  /**
   * Indexes what was staged of `array`, for the merge's joins; reports the ids staged
   * twice (of the arrays whose ids the intake does not keep).
   */
  private async index(array: ArrayName): Promise<void> {
    this.indexed.add(array);
    const table = sql.table(stageTable(array));
    await this.conn.run(sql`create index ${sql.id(`${stageTable(array)}_id`)} on ${table} (id)`.compile(this.conn.db));
    const { rows } = await this.conn.run(
      sql`select s.idx, s.id, f.first from ${table} s join (select id, min(idx) as first from ${table} group by id having count(*) > 1) f on f.id = s.id
           where s.idx > f.first order by s.idx limit ${MAX_ERRORS}`.compile(this.conn.db),
    );
    if (rows.length > 0) this.repeats.set(array, rows.map((row) => ({ array, index: Number(row.idx), field: 'id', reason: `repeats the id "${row.id as string}" of ${array}[${Number(row.first)}]` })));
    // Neither store analyzes temporary tables by itself: without statistics, the merge's
    // joins would be planned blind (SQLite walked a whole list to meet a few staged rows).
    // The joins are on the id: on PostgreSQL only its column is sampled; the rows' text
    // is not worth its cost (docs/performance.md, "Imports").
    const columns = this.conn.dialect === 'postgres' ? sql` (id)` : sql``;
    await this.conn.run(sql`analyze ${table}${columns}`.compile(this.conn.db));
  }

  /**
   * Gives up: the open load is dropped, no job not yet begun runs, and it resolves once
   * every one begun has ended, so nothing more reaches the connection (its rollback, say).
   */
  async abort(): Promise<void> {
    this.aborted = true;
    this.open?.loader.abort();
    this.open = null;
    await Promise.allSettled(this.background);
  }
}
