// The students page's statement (the large school, limit=50&offset=100) as the reader runs it,
// captured through the service's own query, then timed on better-sqlite3 in a loop beside
// simpler statements over the same rows. Run from the repository's root after
// `npm run bench -- --build-only --scale 0.1`:
//   node --import ./scripts/ts-resolve.mjs bench/results/2026-12-07-later/page-statement.ts
import SQLite from 'better-sqlite3';
import { openStore, type Reader } from '../../../src/db/index.js';
import { opaqueParameters } from '../../../src/db/reader.js';
import { listStudents } from '../../../src/resources/students/repository.js';

const dir = 'data/bench/scale-0_1';
const store = openStore({ databaseUrl: undefined, dataDir: dir, dbTimeoutMs: 5000, dbPoolSize: 2 } as never);
const reads = store.reads as Reader & { run: Reader['run'] };
let captured: { text: string; parameters: unknown[] } | null = null;
const run = reads.run.bind(reads);
reads.run = ((text: string, parameters: readonly unknown[]) => {
  captured = { text, parameters: [...parameters] };
  return run(text, parameters);
});

const raw = new SQLite(`${dir}/school-data.db`, { readonly: true });
raw.pragma('cache_size = -4096');
const { school_id: school } = raw.prepare('select school_id, count(*) as n from students group by 1 order by 2 desc limit 1').get() as { school_id: string };
await listStudents(reads, school, { limit: 50, offset: 100 });
const { text, parameters } = captured!;
const pos = raw.prepare('select pos from students where school_id = ? order by pos limit 1 offset 100').pluck().get(school) as number;

function time(label: string, statement: SQLite.Statement, values: unknown[], n = 20_000): void {
  statement.raw(true);
  for (let i = 0; i < 2_000; i++) statement.all(values);
  raw.prepare('begin').run();
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) statement.all(values);
  const us = Number(process.hrtime.bigint() - start) / 1_000 / n;
  raw.prepare('commit').run();
  console.log(`${label.padEnd(48)} ${us.toFixed(2)} µs`);
}

const page = `select item from students where school_id = +? and pos >= +? order by pos limit 50`;
time('the page statement, as the reader prepares it', raw.prepare(opaqueParameters(text)), parameters);
time('the same, its parameters seen by the planner', raw.prepare(text), parameters);
time('the 50 items, one string each', raw.prepare(page), [school, pos]);
time('the 50 items joined, as text', raw.prepare(`select string_agg(item, ',') from (${page})`), [school, pos]);
time('the 50 items joined, as a blob', raw.prepare(`select cast(string_agg(item, ',') as blob) from (${page})`), [school, pos]);
time('the 50 positions only (the index)', raw.prepare(`select pos from students where school_id = +? and pos >= +? order by pos limit 50`), [school, pos]);
time('select 1', raw.prepare('select 1'), []);
await store.close();
