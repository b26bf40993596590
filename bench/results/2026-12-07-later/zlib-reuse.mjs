// Whether one zlib engine can unzip answer after answer (its state made once), through the
// internal `_processChunk` that `gunzipSync` itself uses and the public `reset()`.
// Run: node bench/results/2026-12-07-later/zlib-reuse.mjs
import zlib from 'node:zlib';

const items = Array.from({ length: 50 }, (_, i) => JSON.stringify({ id: `st-${i}`, full_name: `Иванов Иван ${i}`, phone: '+79990001122', email: `s${i}@example.com`, created_at: '2026-01-01T10:00:00Z' }));
const gz = zlib.gzipSync(Buffer.from(`{"items":[${items.join(',')}],"meta":{"total":10000,"limit":50,"offset":100}}`));
const N = 100_000;
const start = process.hrtime.bigint();
for (let i = 0; i < N; i++) zlib.gunzipSync(gz);
console.log(`gunzipSync: ${(Number(process.hrtime.bigint() - start) / 1_000 / N).toFixed(2)} µs a call`);
const engine = zlib.createGunzip();
engine._processChunk(gz, zlib.constants.Z_FINISH);
try {
  engine.reset();
  engine._processChunk(gz, zlib.constants.Z_FINISH);
  console.log('a second unzip on the same engine: done');
} catch (error) {
  console.log(`a second unzip on the same engine: ${error.code} (${error.message.split('\n')[0]})`);
}
