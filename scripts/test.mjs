#!/usr/bin/env node
/**
 * Runs the whole test suite on the embedded stores (SQLite + in-memory rate limiter),
 * then again on PostgreSQL + Redis when DATABASE_URL and REDIS_URL are set, and says
 * plainly which suites ran. With --require-external (CI), a missing PostgreSQL/Redis
 * run is a failure.
 *
 *   node scripts/test.mjs [--require-external] [file-or-dir-filter ...]
 *
 * Skipped suites and tests are counted with their reasons (the other store's suites).
 * Each test file runs as its own process, two at a time, and its output is printed whole
 * when it ends. The files are not run under `node --test`: its parent process reads the
 * children's stdout as a binary event stream and can spin forever on bytes it mistakes
 * for a frame (nodejs/node#62693), which is what hung CI for 90 minutes. Run alone, a
 * file reports through its own reporter, and a file that does not end in FILE_TIMEOUT_MS
 * is killed and counted as failed.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const CONCURRENCY = 2;
const FILE_TIMEOUT_MS = 6 * 60_000;

const args = process.argv.slice(2);
const requireExternal = args.includes('--require-external') || process.env.SCHOOL_DATA_TEST_REQUIRE_EXTERNAL === '1';
const filters = args.filter((a) => !a.startsWith('--'));

function findTests(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...findTests(full));
    else if (entry.name.endsWith('.test.ts')) out.push(full);
  }
  return out.sort();
}

const files = findTests('test').filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}

/** Runs one file; resolves with its counts, after printing its output. */
function runFile(file, env) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(process.execPath, ['--import', 'tsx', '--test-reporter=spec', '--test-force-exit', file], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const chunks = [];
    child.stdout.on('data', (chunk) => chunks.push(chunk));
    child.stderr.on('data', (chunk) => chunks.push(chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, FILE_TIMEOUT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const output = Buffer.concat(chunks).toString('utf8');
      const count = (name) => {
        const m = new RegExp(`^ℹ ${name} (\\d+)$`, 'm').exec(output);
        return m ? Number(m[1]) : 0;
      };
      let fail = count('fail') + count('cancelled');
      const ok = code === 0 && !timedOut;
      // A file that dies before its summary (a crash, a kill) is one failure at least.
      if (!ok && fail === 0) fail = 1;
      // node:test's own count leaves out skipped suites; the spec reporter marks every
      // skipped suite and test with "﹣ name (time) # reason".
      const skipped = [...output.matchAll(/^\s*﹣ .* # (.*)$/gm)].map((m) => m[1]);
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      const why = timedOut ? ` (killed: no end after ${FILE_TIMEOUT_MS / 60_000} min)` : !ok ? ` (exit ${code ?? signal})` : '';
      process.stdout.write(`\n--- ${ok ? 'ok  ' : 'FAIL'} ${file} (${seconds} s)${why}\n${output}`);
      resolve({ file, ok, pass: count('pass'), fail, skipped });
    });
  });
}

async function run(name, env) {
  console.log(`\n=== suite: ${name} (${files.length} files) ===`);
  const started = Date.now();
  const queue = [...files];
  const results = [];
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let file = queue.shift(); file !== undefined; file = queue.shift()) results.push(await runFile(file, env));
    }),
  );
  const sum = (k) => results.reduce((n, r) => n + r[k], 0);
  const skipped = new Map();
  for (const reason of results.flatMap((r) => r.skipped)) skipped.set(reason, (skipped.get(reason) ?? 0) + 1);
  return {
    name,
    ok: results.every((r) => r.ok),
    failedFiles: results.filter((r) => !r.ok).map((r) => r.file),
    pass: sum('pass'),
    fail: sum('fail'),
    skipped,
    seconds: Math.round((Date.now() - started) / 1000),
  };
}

const embeddedEnv = { ...process.env };
delete embeddedEnv.DATABASE_URL;
delete embeddedEnv.REDIS_URL;

const suiteStarted = Date.now();
const results = [await run('embedded: SQLite + in-memory rate limiter', embeddedEnv)];
const external = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);
if (external) {
  results.push(await run('external: PostgreSQL + Redis', { ...process.env }));
}

console.log('\n=== summary ===');
for (const r of results) {
  const skipped = [...r.skipped.values()].reduce((n, k) => n + k, 0);
  console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.name}: ${r.pass} passed, ${r.fail} failed, ${skipped} skipped (${r.seconds} s)`);
  for (const [reason, n] of r.skipped) console.log(`     skipped: ${n} x "${reason}"`);
  for (const file of r.failedFiles) console.log(`     failed: ${file}`);
}
if (!external) {
  console.log(`${requireExternal ? 'FAIL' : 'skip'} external: PostgreSQL + Redis (set DATABASE_URL and REDIS_URL to run it)`);
}
const pass = results.reduce((n, r) => n + r.pass, 0);
const fail = results.reduce((n, r) => n + r.fail, 0);
const ok = results.every((r) => r.ok) && (external || !requireExternal);
console.log(`${pass} passed, ${fail} failed, in ${Math.round((Date.now() - suiteStarted) / 1000)} s`);
process.exit(ok ? 0 : 1);
