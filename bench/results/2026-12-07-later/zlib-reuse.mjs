// Whether one zlib engine can unzip answer after answer (its state made once), through the
// internal `_processChunk` that `gunzipSync` itself uses, with and without the public `reset()`.
// The body is a real students page: the large school's 50 items at offset 100 of the bench's
// SQLite data set (`npm run bench -- --build-only --scale 0.1`). Run from the repository's root:
//   node bench/results/2026-12-07-later/zlib-reuse.mjs
import zlib from 'node:zlib';
import SQLite from 'better-sqlite3';

const db = new SQLite('data/bench/scale-0_1/school-data.db', { readonly: true });
const { school_id: school } = db.prepare('select school_id, count(*) as n from students group by 1 order by 2 desc limit 1').get();
const items = db.prepare('select string_agg(item, \',\') from (select item from students where school_id = ? order by pos limit 50 offset 100)').pluck().get(school);
db.close();
const body = Buffer.from(`{"items":[${items}],"meta":{"total":10000,"limit":50,"offset":100}}`);
const gz = zlib.gzipSync(body, { level: zlib.constants.Z_BEST_SPEED });
console.log(`body ${body.length} bytes, gzipped ${gz.length}`);

const N = 100_000;
const start = process.hrtime.bigint();
for (let i = 0; i < N; i++) zlib.gunzipSync(gz, { chunkSize: body.length + 64 });
console.log(`gunzipSync: ${(Number(process.hrtime.bigint() - start) / 1_000 / N).toFixed(2)} µs a call`);

const firstLine = (error) => `${error.code ?? error.name}: ${error.message.split('\n')[0]}`;
for (const [label, again] of [
  ['reset(), then a second unzip', (engine) => { engine.reset(); return engine._processChunk(gz, zlib.constants.Z_FINISH); }],
  ['a second unzip, no reset()', (engine) => engine._processChunk(gz, zlib.constants.Z_FINISH)],
]) {
  const engine = zlib.createGunzip();
  engine._processChunk(gz, zlib.constants.Z_FINISH);
  try {
    again(engine);
    console.log(`${label}: done`);
  } catch (error) {
    console.log(`${label}: ${firstLine(error)}`);
  }
}
