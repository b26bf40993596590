/**
 * npm run bench:import [-- options]: the import scenarios, through the built CLI as an
 * operator runs it (docs/performance.md, "Imports"):
 * - bulk: a file of --records records into an empty school, then the same records each
 *   changed into the now full school: seconds, records/s, the process's CPU time and peak
 *   RSS; also, right after each import, the store's own speed for the same rows (a bare
 *   COPY on PostgreSQL, a bare INSERT on SQLite) into copies of the same tables with the
 *   same indexes, and the import's ratio to it; --rounds N does it N times from a fresh
 *   store and ends with the median ratios (a shared machine moves the baseline too);
 * - delta: 100 changed records (upserts, inserts and deletes spread over the lists' order)
 *   into the data set's large school (bench/dataset), then the inverse delta, which puts
 *   the data set back as it was; two rounds, each after its baseline (the same rows
 *   written bare, and back).
 * The store is SQLite unless DATABASE_URL is set.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { pipeline } from 'node:stream/promises';
import { setUpBulkSqlite } from '../src/db/bulk.js';
import { openStore, sqlitePath } from '../src/db/index.js';
import { importFile } from '../src/importer/index.js';
import { rebuildStale } from '../src/importer/rebuild.js';
import { isListTable } from '../src/importer/read-model.js';
import { ARRAY_NAMES } from '../src/importer/schema.js';
import { ensureDataset, locateDataset } from './dataset/load.js';
import { importShape, writeImportFile } from './dataset/import-file.js';
import { datasetShape } from './dataset/shape.js';
import { median, ROOT, statCpuSeconds } from './servers.js';

const say = (text: string) => process.stderr.write(`${text}\n`);
const BIN = path.join(ROOT, 'bin/school-data.js');

interface Run {
  seconds: number;
  peakRssBytes: number | null;
  /** The process's user + system CPU time, as last sampled (Linux), else null. */
  cpuSeconds: number | null;
  stdout: string;
}

/**
 * Runs the CLI, reading its peak RSS (the kernel's high-water mark) and its CPU time until
 * it exits: on a shared machine, records per CPU-second say more than records per second.
 */
function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let peak: number | null = null;
    let cpu: number | null = null;
    const sample = () => {
      try {
        const kb = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1];
        if (kb) peak = Number(kb) * 1024;
        cpu = statCpuSeconds(`/proc/${child.pid}/stat`);
      } catch {
        // Gone, or not Linux.
      }
    };
    const timer = setInterval(sample, 50);
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      clearInterval(timer);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (code !== 0) reject(new Error(`school-data ${args.join(' ')} failed (${code}): ${stderr.trim()}`));
      else resolve({ seconds, peakRssBytes: peak, cpuSeconds: cpu, stdout });
    });
    // The child writes its status only while it runs: sample at once too.
    sample();
  });
}

const mib = (bytes: number | null) => (bytes === null ? 'n/a' : `${(bytes / 2 ** 20).toFixed(0)} MiB`);

interface Target {
  env: NodeJS.ProcessEnv;
  url: string | null;
  schema: string | null;
}

async function freshTarget(dir: string): Promise<Target> {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const base: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SCHOOL_DATA_') && k !== 'DATABASE_URL') base[k] = v;
  base.SCHOOL_DATA_DIR = dir;
  base.SCHOOL_DATA_LOG_LEVEL = 'warn';
  const url = process.env.DATABASE_URL;
  if (!url) return { env: base, url: null, schema: null };
  const schema = 'school_data_bench_import';
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`drop schema if exists ${schema} cascade`);
  await client.query(`create schema ${schema}`);
  await client.end();
  const scoped = new URL(url);
  scoped.searchParams.set('options', `-c search_path=${schema}`);
  return { env: { ...base, DATABASE_URL: scoped.toString() }, url: scoped.toString(), schema };
}

/** The tables a school's records are stored in: the arrays' and the lists' change marks. */
const STORED = [...ARRAY_NAMES, 'list_changes'] as const;

/**
 * A bare COPY of the school's rows, table by table, into copies of the tables with the
 * same indexes and storage parameters: the store's own speed for the same rows. The
 * records' change marks (`list_changes`, what an index on the rows' seq held before
 * migration 0016) are copied too. Returns the records' rows (not the marks) and seconds.
 */
async function bareCopy(url: string, school: string, dir: string): Promise<{ rows: number; seconds: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let rows = 0;
  let seconds = 0;
  try {
    for (const table of STORED) {
      const file = path.join(dir, `${table}.copy`);
      await pipeline(client.query(copyTo(`COPY (select * from ${table} where school_id = '${school}') TO STDOUT`)), fs.createWriteStream(file));
      await client.query(`drop table if exists copy_${table}`);
      await client.query(`create table copy_${table} (like ${table} including all)`);
      // The same table: its storage parameters too (a list's fillfactor), which LIKE leaves out.
      const { rows: options } = await client.query<{ reloptions: string[] | null }>(`select reloptions from pg_class where oid = '${table}'::regclass`);
      if (options[0]?.reloptions) await client.query(`alter table copy_${table} set (${options[0].reloptions.join(', ')})`);
      const started = process.hrtime.bigint();
      const stream = client.query(copyFrom(`COPY copy_${table} FROM STDIN`));
      await pipeline(fs.createReadStream(file), stream);
      seconds += Number(process.hrtime.bigint() - started) / 1e9;
      if (table !== 'list_changes') rows += stream.rowCount;
      fs.rmSync(file);
    }
  } finally {
    await client.end();
  }
  return { rows, seconds };
}

/**
 * SQLite's counterpart of bareCopy: the school's rows, table by table, inserted one
 * prepared statement a row through the same driver, in one transaction, into copies of
 * the tables with the same indexes, on a connection set up as the import's. The rows go
 * in in the order the import writes them (a list's, else the key's), SQLite's fastest:
 * in the order of the file, the same inserts took nearly twice as long. The change marks
 * go too, in their key's order. The rows are read into memory first; only the inserts and
 * the commit are timed.
 */
function bareInsert(dataDir: string, school: string): { rows: number; seconds: number } {
  const database = new SQLite(sqlitePath({ dataDir }));
  let rows = 0;
  let seconds = 0;
  try {
    setUpBulkSqlite(database);
    const quoted = (name: string) => `"${name}"`;
    for (const table of STORED) {
      const copy = `copy_${table}`;
      const schema = database.prepare('select type, sql from sqlite_master where tbl_name = ? and sql is not null order by type desc').all(table) as { type: string; sql: string }[];
      database.exec(`drop table if exists ${quoted(copy)}`);
      for (const { sql } of schema) {
        database.exec(sql.replaceAll(quoted(table), quoted(copy)).replaceAll(`"${table}_`, `"${copy}_`));
      }
      const order = table === 'list_changes' ? 'resource, change_seq, id' : isListTable(table) ? 'pos' : 'id';
      const data = database.prepare(`select * from ${quoted(table)} where school_id = ? order by ${order}`).raw().all(school) as unknown[][];
      if (data.length === 0) continue;
      const insert = database.prepare(`insert into ${quoted(copy)} values (${data[0]!.map(() => '?').join(', ')})`);
      const started = process.hrtime.bigint();
      database.exec('begin');
      for (const row of data) insert.run(row);
      database.exec('commit');
      seconds += Number(process.hrtime.bigint() - started) / 1e9;
      if (table !== 'list_changes') rows += data.length;
      database.exec(`drop table ${quoted(copy)}`);
    }
  } finally {
    database.close();
  }
  return { rows, seconds };
}

async function bulk(records: number, rounds: number): Promise<void> {
  const dir = path.join(ROOT, 'data', 'bench', 'import');
  fs.mkdirSync(dir, { recursive: true });
  const shape = datasetShape(0.01, 1);
  const school = importShape(records);
  const files = { first: path.join(dir, `records-${records}.json`), changed: path.join(dir, `records-${records}-changed.json`) };
  if (!fs.existsSync(files.first) || !fs.existsSync(files.changed)) {
    say(`writing ${files.first} and its changed copy...`);
    await writeImportFile(files.first, shape, school);
    await writeImportFile(files.changed, shape, school, true);
  }
  const imports = [['into an empty school', files.first], ['every record changed, into the full school', files.changed]] as const;
  const ratios = new Map<string, number[]>(imports.map(([label]) => [label, []]));
  const how = process.env.DATABASE_URL ? 'COPY' : 'INSERT';
  for (let round = 1; round <= rounds; round++) {
    if (rounds > 1) say(`round ${round} of ${rounds}:`);
    const target = await freshTarget(path.join(dir, 'store'));
    await runCli(['school', 'create', '--name', 'Import bench', '--plan', 'VIP', '--id', school.id], target.env);
    for (const [label, file] of imports) {
      const run = await runCli(['import', '--school', school.id, '--json', file], target.env);
      const changes = (JSON.parse(run.stdout) as { changes: number }).changes;
      const cpu = run.cpuSeconds === null ? '' : `, ${run.cpuSeconds.toFixed(1)} CPU-s (${Math.round(records / run.cpuSeconds).toLocaleString('en-US')} records per CPU-second)`;
      say(`${label}: ${run.seconds.toFixed(1)} s, ${Math.round(records / run.seconds).toLocaleString('en-US')} records/s${cpu}, peak RSS ${mib(run.peakRssBytes)}, ${changes.toLocaleString('en-US')} rows changed (load average ${loadAverage()})`);
      // The baseline right after each import, so that both see about the same machine.
      const bare = target.url ? await bareCopy(target.url, school.id, dir) : bareInsert(target.env.SCHOOL_DATA_DIR!, school.id);
      const ratio = records / run.seconds / (bare.rows / bare.seconds);
      ratios.get(label)!.push(ratio);
      say(`  bare ${how === 'COPY' ? how : 'INSERT (one prepared statement a row, one transaction)'} of the same ${bare.rows.toLocaleString('en-US')} rows and their change marks into the same tables and indexes: ${bare.seconds.toFixed(1)} s, ${Math.round(bare.rows / bare.seconds).toLocaleString('en-US')} rows/s`);
      say(`  import ${label}: ${ratio.toFixed(2)} of the bare ${how}'s speed`);
    }
  }
  if (rounds > 1) {
    // The machine's noise moves the baseline as much as the import: the median of the rounds says more than any one.
    for (const [label, values] of ratios) {
      const sorted = [...values].sort((a, b) => a - b);
      say(`import ${label}, ${rounds} rounds: median ${median(sorted).toFixed(2)} of the bare ${how}'s speed (${sorted[0]!.toFixed(2)}-${sorted.at(-1)!.toFixed(2)})`);
    }
  }
}

const loadAverage = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

async function delta(scale: number): Promise<void> {
  const shape = datasetShape(scale, 1);
  const loc = locateDataset(scale, ROOT, process.env.DATABASE_URL);
  say(`data set: ${loc.describe}`);
  const built = await ensureDataset(loc, shape, false);
  if (built.built) say(`built in ${built.seconds.toFixed(0)} s`);
  const store = openStore({ databaseUrl: loc.databaseUrl, dataDir: loc.dataDir, dbTimeoutMs: 600_000, dbPoolSize: 2 });
  const school = shape.large.id;
  try {
    // A data set built by older code is brought up to date as the server's start would.
    const upgraded = Date.now();
    const migrated = await store.migrate();
    const rebuilt = await rebuildStale(store.db);
    if (migrated.length + rebuilt.length > 0) say(`upgraded: migrations ${migrated.join(', ') || 'none'}, read model ${rebuilt.join(', ') || 'none'} (${((Date.now() - upgraded) / 1000).toFixed(0)} s)`);
    // Spread over the lists' order: every n-th student and payment by rank.
    const spread = async <T>(table: 'students' | 'payments', count: number, pick: (rows: Record<string, unknown>[]) => T[]) => {
      const total = Number((await store.db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).where('school_id', '=', school).executeTakeFirstOrThrow()).n);
      const rows: Record<string, unknown>[] = [];
      for (let i = 0; i < count; i++) {
        const rank = Math.floor(((i + 0.5) * total) / count);
        rows.push(await store.db.selectFrom(table).selectAll().where('school_id', '=', school).orderBy('pos').limit(1).offset(rank).executeTakeFirstOrThrow());
      }
      return pick(rows);
    };
    const students = await spread('students', 40, (rows) => rows);
    const payments = await spread('payments', 60, (rows) => rows);
    const record = (row: Record<string, unknown>, omit: string[]) => Object.fromEntries(Object.entries(row).filter(([k]) => !['school_id', 'item', 'pos', 'change_seq', ...omit].includes(k)));
    const student = (row: Record<string, unknown>, status: string) => ({ ...record(row, []), status });
    const payment = (row: Record<string, unknown>, id: string) => ({ ...record(row, ['amount_minor']), id, amount: (Number(row.amount_minor) / 100).toFixed(2) });
    const [gone, copied] = [payments.slice(0, 30), payments.slice(30)];
    const forward = {
      students: students.map((s) => student(s, s.status === 'graduated' ? 'expelled' : 'graduated')),
      payments: copied.map((p, i) => payment(p, `bench-delta-${i}`)),
      deleted: { payments: gone.map((p) => p.id as string) },
    };
    const back = {
      students: students.map((s) => student(s, s.status as string)),
      payments: gone.map((p) => payment(p, p.id as string)),
      deleted: { payments: copied.map((_, i) => `bench-delta-${i}`) },
    };
    // The baseline: the same rows written bare (no read model, no change log), in one
    // transaction each way; the pair leaves the data set as it was.
    const db = store.db as unknown as Kysely<any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- rows as read
    const bare = async (changed: Record<string, unknown>[], added: Record<string, unknown>[], removed: string[]) => {
      const started = process.hrtime.bigint();
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('students').values(changed).onConflict((oc) => oc.columns(['school_id', 'id']).doUpdateSet((eb) => ({ status: eb.ref('excluded.status') }))).execute();
        await trx.insertInto('payments').values(added).execute();
        await trx.deleteFrom('payments').where('school_id', '=', school).where('id', 'in', removed).execute();
      });
      return Number(process.hrtime.bigint() - started) / 1e9;
    };
    const flipped = students.map((s) => ({ ...s, status: s.status === 'graduated' ? 'expelled' : 'graduated' }));
    const copies = copied.map((p, i) => ({ ...p, id: `bench-delta-${i}` }));
    const dir = fs.mkdtempSync(path.join(ROOT, 'data', 'bench', 'delta-'));
    try {
      for (const round of [1, 2]) {
        // The deleted payments as they are now: an earlier round's imports gave them another
        // change seq, and the pair must put back the one their change marks name.
        const current = await db.selectFrom('payments').selectAll().where('school_id', '=', school).where('id', 'in', gone.map((p) => p.id as string)).execute();
        const baseline = [await bare(flipped, copies, gone.map((p) => p.id as string)), await bare(students, current, copies.map((p) => p.id))];
        say(`round ${round}: baseline, the same rows written bare: ${baseline[0]!.toFixed(2)} s, inverse ${baseline[1]!.toFixed(2)} s (load average ${loadAverage()})`);
        for (const [label, file] of [['delta', forward], ['inverse delta', back]] as const) {
          const text = path.join(dir, `${label.replace(' ', '-')}.json`);
          fs.writeFileSync(text, JSON.stringify(file));
          const cpu = process.cpuUsage();
          const started = process.hrtime.bigint();
          const result = await importFile(store.db, school, text, {});
          const seconds = Number(process.hrtime.bigint() - started) / 1e9;
          const used = process.cpuUsage(cpu);
          if (!result.ok) throw new Error(`${label} refused: ${JSON.stringify(result.errors.slice(0, 3))}`);
          say(
            `round ${round}: ${label} of 100 records into ${school} (${shape.large.students.toLocaleString('en-US')} students): ${seconds.toFixed(2)} s to commit` +
              ` (this process ${((used.user + used.system) / 1e6).toFixed(2)} CPU-s), ${result.changes} rows changed (load average ${loadAverage()})`,
          );
        }
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    await store.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { records: { type: 'string' }, rounds: { type: 'string' }, scale: { type: 'string' }, only: { type: 'string' } },
    strict: true,
  });
  const records = Number(values.records ?? 1_000_000);
  const rounds = Number(values.rounds ?? 1);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error('--rounds must be a whole number of at least 1');
  const scale = Number(values.scale ?? 1);
  const only = values.only;
  say(`store: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'SQLite'}`);
  if (only !== 'delta') await bulk(records, rounds);
  if (only !== 'bulk') await delta(scale);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:import: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
