#!/usr/bin/env node
/**
 * Runs the whole test suite on the embedded stores (SQLite + in-memory rate limiter),
 * then again on PostgreSQL + Redis when DATABASE_URL and REDIS_URL are set, and says
 * plainly which suites ran. With --require-external (CI), a missing PostgreSQL/Redis
 * run is a failure.
 *
 *   node scripts/test.mjs [--require-external] [file-or-dir-filter ...]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

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

function run(name, env) {
  return new Promise((resolve) => {
    console.log(`\n=== suite: ${name} (${files.length} files) ===`);
    const child = spawn(process.execPath, [
      '--import',
      'tsx',
      '--test',
      '--test-reporter=spec',
      '--test-concurrency=2',
      // A test that hangs fails after 3 minutes, and a file whose tests are done never
      // keeps the run waiting on a handle a failed test left open.
      '--test-timeout=180000',
      '--test-force-exit',
      ...files,
    ], {
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let pass = 0;
    let fail = 0;
    let skipped = 0;
    let buffer = '';
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk);
      buffer += chunk.toString();
    });
    child.on('close', (code) => {
      for (const line of buffer.split('\n')) {
        const m = /^ℹ (pass|fail|skipped) (\d+)$/.exec(line.trim());
        if (m?.[1] === 'pass') pass += Number(m[2]);
        if (m?.[1] === 'fail') fail += Number(m[2]);
        if (m?.[1] === 'skipped') skipped += Number(m[2]);
      }
      resolve({ name, code: code ?? 1, pass, fail, skipped });
    });
  });
}

const embeddedEnv = { ...process.env };
delete embeddedEnv.DATABASE_URL;
delete embeddedEnv.REDIS_URL;

const results = [await run('embedded: SQLite + in-memory rate limiter', embeddedEnv)];
const external = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);
if (external) {
  results.push(await run('external: PostgreSQL + Redis', { ...process.env }));
}

console.log('\n=== summary ===');
for (const r of results) console.log(`${r.code === 0 ? 'ok  ' : 'FAIL'} ${r.name}: ${r.pass} passed, ${r.fail} failed, ${r.skipped} skipped`);
if (!external) {
  console.log(`${requireExternal ? 'FAIL' : 'skip'} external: PostgreSQL + Redis (set DATABASE_URL and REDIS_URL to run it)`);
}
const pass = results.reduce((n, r) => n + r.pass, 0);
const fail = results.reduce((n, r) => n + r.fail, 0);
const ok = results.every((r) => r.code === 0) && (external || !requireExternal);
console.log(`${pass} passed, ${fail} failed`);
process.exit(ok ? 0 : 1);
