/**
 * Staging: the file's valid records are written, as they are read, into temporary tables
 * of the import's own connection (`stage_<array>`, the rows as they will be stored, plus
 * their index in the file), and the ids an import deletes into `gone_<array>`. Nothing
 * the API reads is touched until the merge (merge.ts) copies them over in one
 * transaction. PostgreSQL fills them with COPY, SQLite with prepared multi-row INSERTs.
 */
import { sql } from 'kysely';
import type { BulkConnection, RowLoader } from '../db/bulk.js';
import { isListTable } from './read-model.js';
import { ROW_COLUMNS } from './rows.js';
import { ARRAY_NAMES, type ArrayName } from './schema.js';

export const stageTable = (array: ArrayName): string => `stage_${array}`;
export const goneTable = (array: ArrayName): string => `gone_${array}`;

/** The staged columns of an array: its index in the file, the row, and a list's item. */
export function stagedColumns(array: ArrayName): string[] {
  return ['idx', ...ROW_COLUMNS[array], ...(isListTable(array) ? ['item'] : [])];
}

export class Stage {
  private open: { array: ArrayName; loader: RowLoader } | null = null;
  /** Rows staged per array. */
  readonly staged = Object.fromEntries(ARRAY_NAMES.map((a) => [a, 0])) as Record<ArrayName, number>;

  constructor(private readonly conn: BulkConnection) {}

  async create(): Promise<void> {
    for (const array of ARRAY_NAMES) {
      const columns = stagedColumns(array).slice(1).map((c) => sql.ref(c));
      await this.conn.run(
        sql`create temp table ${sql.table(stageTable(array))} as select cast(0 as integer) as idx, ${sql.join(columns)} from ${sql.table(array)} where 1 = 0`.compile(this.conn.db),
      );
      await this.conn.run(sql`create temp table ${sql.table(goneTable(array))} (id text primary key, idx integer)`.compile(this.conn.db));
    }
  }

  async write(array: ArrayName, rows: unknown[][]): Promise<void> {
    if (this.open?.array !== array) {
      await this.endArray();
      this.open = { array, loader: this.conn.load(stageTable(array), stagedColumns(array)) };
    }
    const { loader } = this.open;
    for (const row of rows) {
      const wait = loader.write(row);
      if (wait) await wait;
    }
    this.staged[array] += rows.length;
  }

  async endArray(): Promise<void> {
    const open = this.open;
    this.open = null;
    if (open) await open.loader.end();
  }

  /** Ends the last load and indexes what was staged, for the merge's joins. */
  async finish(): Promise<void> {
    await this.endArray();
    for (const array of ARRAY_NAMES) {
      if (this.staged[array] === 0) continue;
      await this.conn.run(sql`create unique index ${sql.id(`${stageTable(array)}_id`)} on ${sql.table(stageTable(array))} (id)`.compile(this.conn.db));
      // PostgreSQL never analyzes temporary tables by itself: without statistics, it would plan the merge's joins blind.
      if (this.conn.dialect === 'postgres') await this.conn.run(sql`analyze ${sql.table(stageTable(array))}`.compile(this.conn.db));
    }
  }

  abort(): void {
    this.open?.loader.abort();
    this.open = null;
  }
}
