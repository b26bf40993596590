/**
 * Where the benchmark's data set lives and how it is built: the same migrations as the
 * server, then multi-row INSERTs through the raw driver in large transactions. A marker
 * table records the version, scale and seed of a finished build, so a later run with
 * the same size reuses the data set; an interrupted build has no marker and is redone.
 *
 * SQLite: a file under data/bench/ (git-ignored). PostgreSQL: a schema of its own in the
 * DATABASE_URL database, named after the scale, reached through search_path like the
 * test stores; it is kept for the next run unless --drop is given.
 */
import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import pg from 'pg';
import { openStore, refreshStatistics, sqlitePath } from '../../src/db/index.js';
import { rebuildDayTotals } from '../../src/importer/day-totals.js';
import { isListTable, laidOut } from '../../src/importer/read-model.js';
import { READ_MODEL_VERSIONS } from '../../src/importer/rebuild.js';
import { BLOCK_ROWS, BLOCK_SPAN, itemJson, LIST_MODELS, LIST_TABLES, type ListRow, type ListTable } from '../../src/resources/items.js';
import { Progress } from '../progress.js';
import { COLUMNS, headRows, schoolRows, type Row, type Table } from './generate.js';
import { DATASET_VERSION, totalRows, type DatasetShape, type SchoolShape } from './shape.js';

export interface DatasetLocation {
  dialect: 'sqlite' | 'postgres';
  /** SCHOOL_DATA_DIR for the server: the SQLite file and the generated certificate. */
  dataDir: string;
  /** DATABASE_URL for the server (PostgreSQL, with search_path set to the schema), else null. */
  databaseUrl: string | null;
  /** The PostgreSQL schema, else null. */
  schema: string | null;
  /** Where, for people (no credentials). */
  describe: string;
}

const MARKER = 'bench_dataset';

export function scaleTag(scale: number): string {
  return String(scale).replace('.', '_');
}

export function locateDataset(scale: number, root: string, baseUrl: string | undefined): DatasetLocation {
  const dataDir = path.join(root, 'data', 'bench', `scale-${scaleTag(scale)}`);
  if (!baseUrl) return { dialect: 'sqlite', dataDir, databaseUrl: null, schema: null, describe: sqlitePath({ dataDir }) };
  const schema = `school_data_bench_${scaleTag(scale)}`;
  const url = new URL(baseUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return { dialect: 'postgres', dataDir, databaseUrl: url.toString(), schema, describe: `postgres://${url.host}${url.pathname} schema ${schema}` };
}

/** What the marker says about the stored data set, or null when there is none (or it is unfinished). */
async function storedMarker(loc: DatasetLocation): Promise<{ version: number; scale: number; seed: number } | null> {
  if (loc.dialect === 'sqlite') {
    const file = sqlitePath(loc);
    if (!fs.existsSync(file)) return null;
    const db = new SQLite(file, { readonly: true });
    try {
      const exists = db.prepare(`select 1 from sqlite_master where type = 'table' and name = ?`).get(MARKER);
      return exists ? (db.prepare(`select version, scale, seed from ${MARKER}`).get() as { version: number; scale: number; seed: number } | undefined) ?? null : null;
    } finally {
      db.close();
    }
  }
  const client = await pgClient(loc);
  try {
    const { rows } = await client.query<{ ok: boolean }>(`select to_regclass($1) is not null as ok`, [`${loc.schema}.${MARKER}`]);
    if (!rows[0]?.ok) return null;
    const marker = await client.query<{ version: number; scale: number; seed: number }>(`select version, scale, seed from ${MARKER}`);
    return marker.rows[0] ?? null;
  } finally {
    await client.end();
  }
}

async function pgClient(loc: DatasetLocation): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: loc.databaseUrl! });
  await client.connect();
  return client;
}

/** Removes the data set (the SQLite file or the PostgreSQL schema); the certificate stays. */
export async function dropDataset(loc: DatasetLocation): Promise<void> {
  if (loc.dialect === 'sqlite') {
    for (const suffix of ['', '-wal', '-shm']) fs.rmSync(sqlitePath(loc) + suffix, { force: true });
    return;
  }
  const client = await pgClient(loc);
  try {
    await client.query(`drop schema if exists ${loc.schema} cascade`);
  } finally {
    await client.end();
  }
}

export interface EnsureResult {
  built: boolean;
  seconds: number;
}

/** Builds the data set unless the same version, scale and seed is already stored. */
export async function ensureDataset(loc: DatasetLocation, shape: DatasetShape, rebuild: boolean): Promise<EnsureResult> {
  const marker = await storedMarker(loc);
  if (!rebuild && marker && marker.version === DATASET_VERSION && marker.scale === shape.scale && marker.seed === shape.seed) {
    return { built: false, seconds: 0 };
  }
  const started = Date.now();
  await dropDataset(loc);
  if (loc.dialect === 'postgres') {
    const client = await pgClient(loc);
    await client.query(`create schema ${loc.schema}`).finally(() => client.end());
  }
  fs.mkdirSync(loc.dataDir, { recursive: true });

  const store = openStore({ databaseUrl: loc.databaseUrl, dataDir: loc.dataDir, dbTimeoutMs: 60_000, dbPoolSize: 2 });
  try {
    await store.migrate();
  } finally {
    await store.close();
  }

  const sink = loc.dialect === 'sqlite' ? new SqliteSink(sqlitePath(loc)) : new PgSink(await pgClient(loc));
  try {
    const indexes = await sink.dropIndexes();
    await writeRows(sink, shape);
    process.stderr.write(`creating ${indexes.length} indexes...\n`);
    for (const statement of indexes) await sink.exec(statement);
  } finally {
    await sink.close();
  }

  process.stderr.write('day totals of the finance summary, planner statistics...\n');
  const stats = openStore({ databaseUrl: loc.databaseUrl, dataDir: loc.dataDir, dbTimeoutMs: 600_000, dbPoolSize: 1 });
  try {
    // The rows were written past the importer, which keeps these in its transaction: the
    // day totals are made here, and the read model is recorded as today's (items and
    // positions were written with the rows), so the server's start rebuilds nothing.
    await stats.db.transaction().execute((trx) => rebuildDayTotals(trx));
    // Every list was laid out whole: its blocks start at each BLOCK_SPAN-th position.
    for (const table of LIST_TABLES) {
      const block = sql`(pos / ${sql.lit(BLOCK_SPAN)})`;
      await sql`insert into list_blocks (school_id, list, first_pos, first_rank, n)
                select school_id, ${table}, ${block} * ${sql.lit(BLOCK_SPAN)}, ${block} * ${sql.lit(BLOCK_ROWS)}, count(*) from ${sql.table(table)} group by school_id, ${block}`.execute(stats.db);
    }
    for (const table of LIST_TABLES) {
      await sql`insert into list_changes (school_id, resource, change_seq, id) select school_id, ${table}, change_seq, id from ${sql.table(table)}`.execute(stats.db);
    }
    await sql`insert into change_batches (school_id, seq, committed_at) select id, 1, ${`${new Date().toISOString().slice(0, 19)}Z`} from schools`.execute(stats.db);
    for (const [part, version] of Object.entries(READ_MODEL_VERSIONS)) {
      await stats.db.updateTable('read_model_versions').set({ version }).where('part', '=', part).execute();
    }
    await refreshStatistics(stats.db);
    // ANALYZE does not set PostgreSQL's visibility map; without a VACUUM, index-only scans
    // would visit the heap for every row until autovacuum gets round to the new tables.
    if (loc.dialect === 'postgres') await sql`vacuum`.execute(stats.db);
    const seconds = (Date.now() - started) / 1000;
    await sql`create table ${sql.table(MARKER)} (version integer not null, scale real not null, seed integer not null, build_seconds real not null, built_at text not null)`.execute(stats.db);
    await sql`insert into ${sql.table(MARKER)} values (${DATASET_VERSION}, ${shape.scale}, ${shape.seed}, ${seconds}, ${new Date().toISOString()})`.execute(stats.db);
  } finally {
    await stats.close();
  }
  return { built: true, seconds: (Date.now() - started) / 1000 };
}

/**
 * The columns written per table: a list's table also gets its read model
 * (src/resources/items.ts) and the change seq of the school's first batch (its change
 * marks are written after the rows).
 */
const WRITTEN: Record<Table, readonly string[]> = Object.fromEntries(
  (Object.keys(COLUMNS) as Table[]).map((table) => [table, isListTable(table) ? [...COLUMNS[table], 'item', 'pos', 'change_seq'] : COLUMNS[table]]),
) as unknown as Record<Table, readonly string[]>;

/** Where each table's id is in its generated rows. */
const ID_AT = new Map((Object.keys(COLUMNS) as Table[]).map((table) => [table, (COLUMNS[table] as readonly string[]).indexOf('id')]));
const idOf = (table: Table, row: unknown[]): unknown => row[ID_AT.get(table)!];

/**
 * Each list row's rank in its list (src/resources/items.ts), by table and id: a first
 * pass over the school's generator, which is deterministic, so the second pass that writes
 * the rows gives each its place without an UPDATE of millions of rows afterwards.
 */
function positions(shape: DatasetShape, school: SchoolShape): Map<Table, Map<unknown, number>> {
  const keys = new Map<Table, [string, string][]>();
  for (const [table, row] of schoolRows(shape, school)) {
    if (!isListTable(table)) continue;
    let list = keys.get(table);
    if (!list) keys.set(table, (list = []));
    const columns = COLUMNS[table] as readonly string[];
    list.push([row[columns.indexOf(LIST_MODELS[table].order)] as string, idOf(table, row) as string]);
  }
  const out = new Map<Table, Map<unknown, number>>();
  for (const [table, list] of keys) {
    // The list's order: the order column, then id, compared as the database compares text.
    list.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    out.set(table, new Map(list.map(([, id], n) => [id, n])));
  }
  return out;
}

/** A generated row with its item and position (its rank laid out in blocks), when its table is a list's. */
function withReadModel(table: Table, row: unknown[], at: Map<Table, Map<unknown, number>>): unknown[] {
  if (!isListTable(table)) return row;
  const columns = COLUMNS[table] as readonly string[];
  const record = Object.fromEntries(columns.map((c, i) => [c, row[i]])) as unknown as ListRow<ListTable>;
  return [...row, itemJson(table, record), laidOut(at.get(table)!.get(idOf(table, row))!), 1];
}

/** Streams every generated row into the sink, table by table in batches, committing every so often. */
async function writeRows(sink: BulkSink, shape: DatasetShape): Promise<void> {
  const progress = new Progress(`building ${shape.scale === 1 ? 'the full' : `a ${shape.scale}x`} data set`, totalRows(shape));
  const buffers = new Map<Table, unknown[][]>();
  let sinceCommit = 0;
  const flush = async (table: Table) => {
    const rows = buffers.get(table);
    if (!rows || rows.length === 0) return;
    buffers.set(table, []);
    await sink.insert(table, WRITTEN[table], rows);
    progress.add(rows.length);
    sinceCommit += rows.length;
  };
  const put = async ([table, row]: Row) => {
    let rows = buffers.get(table);
    if (!rows) buffers.set(table, (rows = []));
    rows.push(row);
    if (rows.length >= sink.batchRows(WRITTEN[table].length)) await flush(table);
  };
  const flushAll = async () => {
    for (const table of buffers.keys()) await flush(table);
  };

  await sink.begin();
  for (const row of headRows(shape)) await put(row);
  // Schools first: every other row references one.
  await flushAll();
  for (const school of shape.schools) {
    const at = positions(shape, school);
    // A list's rows are written in the list's order, as an import writes a school's new
    // rows (src/importer/merge.ts): the rows of a page then lie together in the table.
    const lists = new Map<Table, unknown[][]>();
    for (const [table, row] of schoolRows(shape, school)) {
      if (!isListTable(table)) {
        await put([table, row]);
        continue;
      }
      let rows = lists.get(table);
      if (!rows) lists.set(table, (rows = []));
      rows[at.get(table)!.get(idOf(table, row))!] = row;
    }
    for (const [table, rows] of lists) for (const row of rows) await put([table, withReadModel(table, row, at)]);
    if (sinceCommit >= 200_000) {
      await flushAll();
      await sink.commit();
      await sink.begin();
      sinceCommit = 0;
    }
  }
  await flushAll();
  await sink.commit();
  progress.finish();
}

interface BulkSink {
  /**
   * Drops the secondary indexes and returns the statements that recreate them: building
   * an index once over sorted rows is far cheaper than keeping it up to date row by row.
   */
  dropIndexes(): Promise<string[]>;
  exec(statement: string): Promise<void>;
  /** Rows per INSERT for a table of `columns` columns, within the driver's parameter limit. */
  batchRows(columns: number): number;
  insert(table: string, columns: readonly string[], rows: unknown[][]): Promise<void>;
  begin(): Promise<void>;
  commit(): Promise<void>;
  close(): Promise<void>;
}

function insertSql(table: string, columns: readonly string[], rows: number, placeholder: (i: number) => string): string {
  const tuples: string[] = [];
  let p = 0;
  for (let r = 0; r < rows; r++) tuples.push(`(${columns.map(() => placeholder(++p)).join(',')})`);
  return `insert into ${table} (${columns.join(',')}) values ${tuples.join(',')}`;
}

class SqliteSink implements BulkSink {
  private readonly db: SQLite.Database;
  private readonly statements = new Map<string, SQLite.Statement>();

  constructor(file: string) {
    this.db = new SQLite(file);
    // A bulk load that is redone from scratch when interrupted needs no per-commit durability.
    this.db.pragma('synchronous = OFF');
    this.db.pragma('cache_size = -262144');
  }

  dropIndexes(): Promise<string[]> {
    const indexes = this.db.prepare(`select name, sql from sqlite_master where type = 'index' and sql is not null`).all() as { name: string; sql: string }[];
    for (const { name } of indexes) this.db.exec(`drop index ${name}`);
    return Promise.resolve(indexes.map((i) => i.sql));
  }

  exec(statement: string): Promise<void> {
    this.db.exec(statement);
    return Promise.resolve();
  }

  batchRows(columns: number): number {
    return Math.min(500, Math.floor(32_766 / columns));
  }

  insert(table: string, columns: readonly string[], rows: unknown[][]): Promise<void> {
    const key = `${table}:${rows.length}`;
    let statement = this.statements.get(key);
    if (!statement) {
      statement = this.db.prepare(insertSql(table, columns, rows.length, () => '?'));
      this.statements.set(key, statement);
    }
    statement.run(rows.flat());
    return Promise.resolve();
  }

  begin(): Promise<void> {
    this.db.exec('begin');
    return Promise.resolve();
  }

  commit(): Promise<void> {
    this.db.exec('commit');
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.db.close();
    return Promise.resolve();
  }
}

/**
 * PostgreSQL: one INSERT ... SELECT FROM unnest(<one array per column>) per batch. The
 * statement has as many parameters as the table has columns, so PostgreSQL parses and
 * plans a few bytes instead of a VALUES list with tens of thousands of parameters.
 */
class PgSink implements BulkSink {
  private readonly statements = new Map<string, string>();

  private readonly client: pg.Client;

  constructor(client: pg.Client) {
    this.client = client;
  }

  async dropIndexes(): Promise<string[]> {
    // Primary keys and unique constraints stay: they are constraints, not just indexes.
    const { rows } = await this.client.query<{ name: string; definition: string }>(
      `select i.indexname as name, i.indexdef as definition from pg_indexes i
        where i.schemaname = current_schema()
          and not exists (select 1 from pg_constraint c where c.conname = i.indexname and c.connamespace = to_regnamespace(current_schema()))`,
    );
    for (const { name } of rows) await this.client.query(`drop index ${name}`);
    return rows.map((r) => r.definition);
  }

  async exec(statement: string): Promise<void> {
    await this.client.query(statement);
  }

  batchRows(): number {
    return 5000;
  }

  async insert(table: string, columns: readonly string[], rows: unknown[][]): Promise<void> {
    const text = this.statements.get(table) ?? (await this.unnestInsert(table, columns));
    const arrays = columns.map((_, c) => rows.map((row) => row[c]));
    await this.client.query(text, arrays);
  }

  private async unnestInsert(table: string, columns: readonly string[]): Promise<string> {
    const { rows } = await this.client.query<{ name: string; type: string }>(
      `select column_name as name, data_type as type from information_schema.columns where table_schema = current_schema() and table_name = $1`,
      [table],
    );
    const types = new Map(rows.map((r) => [r.name, r.type]));
    const arrays = columns.map((c, i) => `$${i + 1}::${types.get(c) ?? 'text'}[]`);
    const text = `insert into ${table} (${columns.join(',')}) select * from unnest(${arrays.join(',')})`;
    this.statements.set(table, text);
    return text;
  }

  async begin(): Promise<void> {
    await this.client.query('set synchronous_commit = off');
    // Skips the per-row foreign-key triggers (the generator only references rows it made).
    // Needs a superuser; without one the load is slower but the same.
    await this.client.query('set session_replication_role = replica').catch(() => undefined);
    await this.client.query('begin');
  }

  async commit(): Promise<void> {
    await this.client.query('commit');
  }

  async close(): Promise<void> {
    await this.client.end();
  }
}
