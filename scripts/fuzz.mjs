#!/usr/bin/env node
/**
 * The long fuzz run, on demand: the fuzz properties of test/fuzz/ with many more cases
 * than CI runs, on the embedded stores, or on PostgreSQL + Redis when DATABASE_URL and
 * REDIS_URL are set. Prints the cases tried and the failures of every property.
 *
 *   npm run fuzz                                   # 20x the CI cases
 *   SCHOOL_DATA_FUZZ_SCALE=100 npm run fuzz        # more
 *   SCHOOL_DATA_FUZZ_SEED=1234 npm run fuzz        # replay a reported failure
 *   npm run fuzz -- raw                            # only test/fuzz files matching "raw"
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const filters = process.argv.slice(2);
const files = fs
  .readdirSync('test/fuzz')
  .filter((f) => f.endsWith('.test.ts') && (filters.length === 0 || filters.some((x) => f.includes(x))))
  .map((f) => path.join('test/fuzz', f));
if (files.length === 0) {
  console.error('no fuzz test files matched');
  process.exit(1);
}
const env = { ...process.env, SCHOOL_DATA_FUZZ_SCALE: process.env.SCHOOL_DATA_FUZZ_SCALE ?? '20' };
console.log(`fuzzing ${files.length} files at scale ${env.SCHOOL_DATA_FUZZ_SCALE} on ${env.DATABASE_URL ? 'PostgreSQL' : 'SQLite'} + ${env.REDIS_URL ? 'Redis' : 'memory'}`);

// One file at a time (each property already keeps the machine busy), each run directly
// rather than under `node --test`, whose parent can spin forever on its children's
// output (nodejs/node#62693; see scripts/test.mjs).
let out = '';
let failed = false;
for (const file of files) {
  const code = await new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', fileURLToPath(new URL('./ts-resolve.mjs', import.meta.url)), '--test-reporter=spec', '--test-force-exit', file], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk);
      out += chunk.toString();
    });
    child.on('close', (c) => resolve(c ?? 1));
  });
  if (code !== 0) failed = true;
}

let cases = 0;
let failures = 0;
console.log('\n=== fuzz summary ===');
for (const m of out.matchAll(/fuzz (.+?): (\d+) cases, (\d+) failures, seed (-?\d+)/g)) {
  console.log(`${m[1]}: ${m[2]} cases, ${m[3]} failures (seed ${m[4]})`);
  cases += Number(m[2]);
  failures += Number(m[3]);
}
console.log(`total: ${cases} cases tried, ${failures} failures`);
process.exit(!failed && failures === 0 ? 0 : 1);
