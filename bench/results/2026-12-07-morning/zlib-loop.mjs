// A throwaway measurement (docs/performance.md, "The students pages on a faster hour"): the
// memory a process holds after 200,000 unzips of a 33 KB body, against allocating buffers of
// the same size, and against fflate's inflater. Run in a scratch directory with fflate
// installed (`npm i fflate@0.8`): `node --max-semi-space-size=8 zlib-loop.mjs alloc|unzip|fflate`.
import { gzipSync, gunzipSync, constants } from 'node:zlib';
const { gunzipSync: ffGunzip } = process.argv[2] === 'fflate' ? await import('fflate') : {};
const mode = process.argv[2];
const rss = () => Math.round(process.memoryUsage().rss / 2 ** 20);
const text = Buffer.from(JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ id: `st-${i}`, full_name: 'Иванов Иван Иванович ' + i, phone: '+7 900 000 00 ' + i, status: 'learning_practice', created_at: '2025-04-24T07:20:00Z' }))));
const zipped = gzipSync(text, { level: constants.Z_BEST_SPEED });
const keep = [];
const t0 = performance.now();
const N = 200000;
for (let i = 0; i < N; i++) {
  let b;
  if (mode === 'unzip') b = gunzipSync(zipped, { chunkSize: text.length + 64 });
  else if (mode === 'fflate') {
    b = Buffer.allocUnsafe(text.length);
    ffGunzip(zipped, { out: b });
  } else b = Buffer.allocUnsafe(text.length);
  if (i === 0 && mode !== 'alloc' && !b.equals(text)) throw new Error('differs');
  keep.push(b);
  if (keep.length > 50) keep.shift();
}
console.log(mode, 'rss', rss(), 'µs/op', ((performance.now() - t0) * 1000 / N).toFixed(1), 'size', text.length, 'zipped', zipped.length);
