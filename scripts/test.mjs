#!/usr/bin/env node
/**
 * Runs the whole test suite on the embedded stores (SQLite + in-memory rate limiter),
 * and on PostgreSQL + Redis when DATABASE_URL and REDIS_URL are set, and says plainly
 * which suites ran. With --require-external (CI), a missing PostgreSQL/Redis run is a
 * failure. With --also-node PATH, the embedded suite runs once more on that Node.js.
 *
 *   node scripts/test.mjs [--require-external] [--jobs N] [--also-node PATH] [filter ...]
 *
 * A file whose head comment has a line `@store-free` (it opens no store and runs no CLI or
 * server) runs in the embedded suites only: on PostgreSQL + Redis it would run the same code
 * again. The embedded suites run it with SCHOOL_DATA_TEST_STORE_FREE=1, which the helpers
 * that open a store or start the program refuse, so a file that starts to use one cannot
 * keep the mark unseen.
 *
 * Every file of every suite is one task in one pool of N processes (default: twice the
 * cores, from 2 to 8): most files wait on timers, sockets and child processes, so the
 * suites overlap. The files that took longest last time start first (durations kept in
 * the temporary directory, as Jest does). A file marked `@waits` (it spends most of its
 * time asleep: a rate limit's minute, a store held down) also runs in a lane of its own
 * beside the pool, so that its sleep never holds a place the CPU-bound files need. Each file runs as its own process, not under
 * `node --test` (nodejs/node#62693 hung CI), is printed whole when it ends, and is
 * killed and counted as failed when it has not ended in FILE_TIMEOUT_MS. A file still
 * running EXIT_GRACE_MS after node:test printed its summary is hung in Node.js's own exit
 * (nodejs/node#54918): it is killed, judged by its summary, and named in the run's summary.
 *
 * Made once: Kysely and TypeBox bundled (ts-resolve.mjs loads them from there), kept in the
 * temporary directory until their versions change; and for the run, in a temporary directory
 * removed when it ends or is stopped, the self-signed certificate each test store's data
 * directory starts with (test/helpers/store.ts).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import module from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

// The tests run on Node.js's own type stripping, from 22.18 (package.json "engines").
const [nodeMajor, nodeMinor] = process.versions.node.split('.').map(Number);
if (nodeMajor < 22 || (nodeMajor === 22 && nodeMinor < 18)) {
  process.stderr.write(`the tests need Node.js 22.18 or later; this is ${process.versions.node}\n`);
  process.exit(1);
}

const FILE_TIMEOUT_MS = 6 * 60_000;
const EXIT_GRACE_MS = 20_000;
/** How many `@waits` files run beside the pool at once: each holds PostgreSQL connections too. */
const WAITS_LANE = 2;
/** The last line node:test prints, once every test and hook of the file has ended. */
const SUMMARY_END = /^ℹ duration_ms [\d.]+$/m;
const TIMES_FILE = path.join(os.tmpdir(), 'school-data-test-times.json');
/** How a test file runs: Node.js strips the types, the hook maps `./x.js` imports to `./x.ts`. */
const NODE_ARGS = ['--import', fileURLToPath(new URL('./ts-resolve.mjs', import.meta.url))];
/** The dependencies every test process loads from a bundle (see below). */
const BUNDLED_DEPENDENCIES = ['kysely', 'typebox'];
const ROOT = fileURLToPath(new URL('..', import.meta.url));

const { values: opts, positionals: filters } = parseArgs({
  allowPositionals: true,
  options: {
    'require-external': { type: 'boolean', default: false },
    jobs: { type: 'string' },
    'also-node': { type: 'string', multiple: true, default: [] },
  },
});
if (!process.features.typescript || typeof module.registerHooks !== 'function') {
  console.error(`npm test runs the TypeScript tests on Node.js's own type stripping: it needs Node.js 22.18 or later (this is ${process.version})`);
  process.exit(2);
}
const requireExternal = opts['require-external'] || process.env.SCHOOL_DATA_TEST_REQUIRE_EXTERNAL === '1';
// At most 8 by default: every file holds PostgreSQL connections, and the server's default
// max_connections (100) is shared by all of them.
const jobs = Number(opts.jobs ?? process.env.SCHOOL_DATA_TEST_JOBS ?? Math.min(8, Math.max(2, 2 * os.availableParallelism())));
if (!Number.isInteger(jobs) || jobs < 1) {
  console.error('--jobs must be a whole number of at least 1');
  process.exit(2);
}

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
/** The files marked `@store-free` in their head comment, the `/** ... *\/` the file begins with (see above). */
const STORE_FREE = /^ \* @store-free$/m;
const headComment = (text) => (text.startsWith('/**') ? text.slice(0, text.indexOf('*/') + 1) : '');
const storeFree = new Set(files.filter((f) => STORE_FREE.test(headComment(fs.readFileSync(f, 'utf8')))));
/** The files marked `@waits` (see above). */
const WAITS = /^ \* @waits$/m;
const waits = new Set(files.filter((f) => WAITS.test(headComment(fs.readFileSync(f, 'utf8')))));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}

/** A suite: the stores it runs on (its environment) and the Node.js it runs with. */
function suite(name, tag, env, node = process.execPath) {
  return { name, tag, env, node, files: tag === 'external' ? files.filter((f) => !storeFree.has(f)) : files };
}

// The mark's variable is the runner's to give, per file: never inherited from the shell.
delete process.env.SCHOOL_DATA_TEST_STORE_FREE;
// Every test file and every CLI process it starts load much the same modules: V8's compiled
// code is kept on disk (Node.js's module compile cache) and used by the next process.
if (!process.env.NODE_DISABLE_COMPILE_CACHE) process.env.NODE_COMPILE_CACHE ??= path.join(os.tmpdir(), 'school-data-compile-cache');
// Kysely and TypeBox are ESM made of hundreds of files each, which every test process would
// resolve, read and link at its start: bundled into a few files, as the program is
// (scripts/bundle.mjs), and given to every test process by scripts/ts-resolve.mjs.
process.env.SCHOOL_DATA_TEST_DEPS = await bundleDependencies();
// The self-signed certificate the program makes in a new data directory, made once for the
// run: each test store's directory starts with a copy (test/helpers/store.ts), so the test
// apps, `serve` and `demo` do not each load the certificate maker and make one. How one is
// made is tested on directories without one (test/cli/certificates.test.ts, and the demo's
// first run in test/cli/demo.test.ts through the built program).
const runDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-test-run-'));
process.on('exit', () => fs.rmSync(runDir, { recursive: true, force: true }));
/** The test files running now: a run that is stopped stops them, and removes its directory on the way out. */
const running = new Set();
for (const [signal, number] of [['SIGINT', 2], ['SIGTERM', 15], ['SIGHUP', 1]]) {
  process.once(signal, () => {
    for (const child of running) child.kill(signal);
    process.exit(128 + number);
  });
}
await makeCertificate(runDir);
process.env.SCHOOL_DATA_TEST_TLS = path.join(runDir, 'tls');
const embeddedEnv = { ...process.env };
delete embeddedEnv.DATABASE_URL;
delete embeddedEnv.REDIS_URL;
const external = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);

const suites = [suite('embedded: SQLite + in-memory rate limiter', 'embedded', embeddedEnv)];
if (external) suites.push(suite('external: PostgreSQL + Redis', 'external', { ...process.env }));
for (const node of opts['also-node']) {
  if (!fs.existsSync(node)) {
    console.error(`--also-node: no Node.js at ${node}`);
    process.exit(2);
  }
  const version = (await output(node, ['--version'])).trim();
  // The tests' own child processes (the CLI, `serve`) run on the test's Node.js (process.execPath).
  const env = { ...embeddedEnv, PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH ?? ''}` };
  suites.push(suite(`embedded on Node.js ${version}: SQLite + in-memory rate limiter`, `embedded ${version}`, env, node));
}

/**
 * Bundles every entry point (package.json "exports") of the BUNDLED packages, with the map
 * from each import specifier to its file that ts-resolve.mjs reads, into a directory of the
 * temporary directory named by their versions, esbuild's and the options (kept, as the
 * compile cache is, and made again only when one changes). Returns the directory.
 */
async function bundleDependencies() {
  const esbuild = await import('esbuild');
  const entryPoints = {};
  const versions = [`esbuild@${esbuild.version}`];
  for (const name of BUNDLED_DEPENDENCIES) {
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8'));
    versions.push(`${name}@${manifest.version}`);
    for (const sub of Object.keys(manifest.exports ?? { '.': null })) {
      if (sub === './package.json') continue;
      const specifier = sub === '.' ? name : `${name}/${sub.slice(2)}`;
      entryPoints[specifier.replaceAll('/', '~')] = specifier;
    }
  }
  const options = { absWorkingDir: ROOT, entryPoints, bundle: true, splitting: true, format: 'esm', platform: 'node', target: 'node22', logLevel: 'warning' };
  const dir = path.join(os.tmpdir(), `school-data-test-deps-${createHash('sha256').update(versions.join(' ') + JSON.stringify(options)).digest('hex').slice(0, 16)}`);
  if (fs.existsSync(path.join(dir, 'map.json'))) return dir;
  // Built beside it and renamed into place: a run beside this one sees the whole or nothing.
  const building = fs.mkdtempSync(`${dir}.building-`);
  try {
    await esbuild.build({ ...options, outdir: building });
    // The chunks are ES modules whatever a package.json above the temporary directory says.
    fs.writeFileSync(path.join(building, 'package.json'), '{"type": "module"}\n');
    const map = Object.fromEntries(Object.entries(entryPoints).map(([file, specifier]) => [specifier, pathToFileURL(path.join(dir, `${file}.js`)).href]));
    fs.writeFileSync(path.join(building, 'map.json'), JSON.stringify(map));
    fs.renameSync(building, dir);
  } catch (err) {
    fs.rmSync(building, { recursive: true, force: true });
    // Another run renamed its own into place first: the same files.
    if (!fs.existsSync(path.join(dir, 'map.json'))) throw err;
  }
  return dir;
}

/** Makes the program's self-signed pair in `dir`/tls, as a first start there would. */
async function makeCertificate(dir) {
  const tlsModule = pathToFileURL(path.join(ROOT, 'src', 'tls.ts')).href;
  const script = `const { loadTls } = await import(${JSON.stringify(tlsModule)}); await loadTls({ tlsCert: null, tlsKey: null, dataDir: ${JSON.stringify(dir)} });`;
  const child = spawn(process.execPath, [...NODE_ARGS, '--input-type=module', '--eval', script], { stdio: 'inherit' });
  const code = await new Promise((resolve, reject) => child.on('error', reject).on('close', resolve));
  if (code !== 0) {
    console.error('the test certificate could not be made (see above)');
    process.exit(1);
  }
}

function output(command, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    const chunks = [];
    child.stdout.on('data', (c) => chunks.push(c));
    child.on('error', reject);
    child.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

function readTimes() {
  try {
    return JSON.parse(fs.readFileSync(TIMES_FILE, 'utf8'));
  } catch {
    return {};
  }
}

/** Runs one file of one suite; resolves with its counts, after printing its output. */
function runFile(task) {
  const { file, suite: s } = task;
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(s.node, [...NODE_ARGS, '--test-reporter=spec', '--test-force-exit', file], {
      env: storeFree.has(file) ? { ...s.env, SCHOOL_DATA_TEST_STORE_FREE: '1' } : s.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(child);
    const chunks = [];
    let timedOut = false;
    let hungAtExit = false;
    let exitTimer;
    let tail = '';
    child.stdout.on('data', (chunk) => {
      chunks.push(chunk);
      tail = (tail + chunk.toString('utf8')).slice(-200);
      if (exitTimer === undefined && SUMMARY_END.test(tail)) {
        exitTimer = setTimeout(() => {
          hungAtExit = true;
          child.kill('SIGKILL');
        }, EXIT_GRACE_MS);
      }
    });
    child.stderr.on('data', (chunk) => chunks.push(chunk));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, FILE_TIMEOUT_MS);
    child.on('close', (code, signal) => {
      running.delete(child);
      clearTimeout(timer);
      clearTimeout(exitTimer);
      const text = Buffer.concat(chunks).toString('utf8');
      const count = (name) => {
        const m = new RegExp(`^ℹ ${name} (\\d+)$`, 'm').exec(text);
        return m ? Number(m[1]) : 0;
      };
      let fail = count('fail') + count('cancelled');
      const ok = (code === 0 || (hungAtExit && fail === 0)) && !timedOut;
      // A file that dies before its summary (a crash, a kill) is one failure at least.
      if (!ok && fail === 0) fail = 1;
      // node:test's own count leaves out skipped suites; the spec reporter marks every
      // skipped suite and test with "﹣ name (time) # reason".
      const skipped = [...text.matchAll(/^\s*﹣ .* # (.*)$/gm)].map((m) => m[1]);
      const ms = Date.now() - started;
      const why = timedOut
        ? ` (killed: no end after ${FILE_TIMEOUT_MS / 60_000} min)`
        : hungAtExit
          ? ` (killed ${EXIT_GRACE_MS / 1000} s after its summary: hung in Node.js's exit)`
          : !ok
            ? ` (exit ${code ?? signal})`
            : '';
      process.stdout.write(`\n--- ${ok ? 'ok  ' : 'FAIL'} [${s.tag}] ${file} (${(ms / 1000).toFixed(1)} s)${why}\n${text}`);
      resolve({ ...task, ok, hungAtExit, ms, pass: count('pass'), fail, skipped, why: ok ? [] : failureLines(text) });
    });
  });
}

/**
 * What a failed file says about its failure, for the summary (a CI log is often read from
 * its end): the spec reporter's "failing tests" section, else the output's last lines.
 */
function failureLines(text) {
  const at = text.lastIndexOf('✖ failing tests:');
  const lines = (at >= 0 ? text.slice(at) : text).trimEnd().split('\n');
  return (at >= 0 ? lines.slice(1, 31) : lines.slice(-15)).filter((l) => l.trim() !== '');
}

const counted = suites.map((s) => (s.files.length === files.length ? s.name : `${s.name} (${s.files.length} files: the ${files.length - s.files.length} @store-free run embedded only)`));
console.log(`\n=== ${suites.length === 1 ? 'suite' : 'suites'}: ${counted.join('; ')} (${files.length} files, ${jobs} at a time${jobs > 1 && waits.size > 0 ? `, and up to ${WAITS_LANE} of the ${waits.size} @waits files beside them` : ''}) ===`);
const times = readTimes();
const timeKey = (t) => `${t.suite.tag.split(' ')[0]} ${t.file}`;
const queue = suites.flatMap((s) => s.files.map((file) => ({ file, suite: s })));
// Longest first; a file never timed counts as long, so a new file does not end the run alone.
queue.sort((a, b) => (times[timeKey(b)] ?? 60_000) - (times[timeKey(a)] ?? 60_000));

// The pool takes the CPU-bound files first, then whatever sleeping ones the lane has not
// begun; the lane takes sleeping files only, so the CPU is never shared by more than the pool.
const sleeping = queue.filter((t) => waits.has(t.file));
const busy = queue.filter((t) => !waits.has(t.file));
// `--jobs 1` runs one file at a time, the sleeping ones included.
const lane = jobs === 1 ? 0 : Math.min(WAITS_LANE, sleeping.length);
const started = Date.now();
const results = [];
const work = async (next) => {
  for (let task = next(); task !== undefined; task = next()) results.push(await runFile(task));
};
await Promise.all([
  ...Array.from({ length: Math.min(jobs, queue.length) }, () => work(() => busy.shift() ?? sleeping.shift())),
  ...Array.from({ length: lane }, () => work(() => sleeping.shift())),
]);
const seconds = Math.round((Date.now() - started) / 1000);

// Only whole passing files teach the order: a killed or failed one says little of its length.
const learned = readTimes();
for (const r of results) if (r.ok && !r.hungAtExit) learned[timeKey(r)] = r.ms;
try {
  fs.writeFileSync(TIMES_FILE, JSON.stringify(learned));
} catch {
  // The order is an optimisation; a read-only temporary directory only loses it.
}

console.log('\n=== summary ===');
for (const s of suites) {
  const mine = results.filter((r) => r.suite === s);
  const sum = (k) => mine.reduce((n, r) => n + r[k], 0);
  const reasons = new Map();
  for (const reason of mine.flatMap((r) => r.skipped)) reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
  const skipped = [...reasons.values()].reduce((n, k) => n + k, 0);
  const busy = Math.round(sum('ms') / 1000);
  console.log(`${mine.every((r) => r.ok) ? 'ok  ' : 'FAIL'} ${s.name}: ${sum('pass')} passed, ${sum('fail')} failed, ${skipped} skipped (${busy} s in its files)`);
  for (const [reason, n] of reasons) console.log(`     skipped: ${n} x "${reason}"`);
  if (s.files.length < files.length) console.log(`     not run here: ${files.length - s.files.length} @store-free files (they ran in the embedded suites)`);
  for (const r of mine.filter((x) => !x.ok)) {
    console.log(`     failed: ${r.file}`);
    for (const line of r.why) console.log(`       | ${line}`);
  }
  for (const r of mine.filter((x) => x.hungAtExit)) {
    console.log(`     hung in Node.js's exit after its summary, killed and judged by it (nodejs/node#54918): ${r.file}`);
  }
}
if (!external) {
  console.log(`${requireExternal ? 'FAIL' : 'skip'} external: PostgreSQL + Redis (set DATABASE_URL and REDIS_URL to run it)`);
}
const pass = results.reduce((n, r) => n + r.pass, 0);
const fail = results.reduce((n, r) => n + r.fail, 0);
const ok = results.every((r) => r.ok) && (external || !requireExternal);
console.log(`${pass} passed, ${fail} failed, in ${seconds} s`);
process.exit(ok ? 0 : 1);
