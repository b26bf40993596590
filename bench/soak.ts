/**
 * npm run bench:soak [-- --minutes N --scale S]: the embedded default (SQLite, in-memory
 * limiter, the production V8 settings) under the benchmark's mixed workload for some minutes while imports land (a
 * delta with upserts and deletions every few seconds, through the real CLI), then a
 * graceful stop. It passes when the server never died (no abort), answered only 200s,
 * every import succeeded, and SIGTERM ended it with exit code 0. Prints the figures that
 * docs/performance.md quotes (the stored answers' share among them), for the Node.js line it runs on.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ensureDataset, locateDataset } from './dataset/load.js';
import { datasetShape } from './dataset/shape.js';
import { loadTls } from '../src/tls.js';
import { serverCounts } from './probe.js';
import { MIXED_SCENARIO } from './scenarios.js';
import { freePort, PeakRss, ROOT, SERVER_NODE_OPTIONS, startApiServer } from './servers.js';
import { checkWrk, runWrk } from './wrk.js';

const { values } = parseArgs({ options: { minutes: { type: 'string' }, scale: { type: 'string' }, 'import-every': { type: 'string' } } });
const minutes = Number(values.minutes ?? 3);
const scale = Number(values.scale ?? 0.1);
const importEverySeconds = Number(values['import-every'] ?? 5);
if (!(minutes > 0) || !(scale > 0) || !(importEverySeconds > 0)) throw new Error('--minutes, --scale and --import-every take positive numbers');

const say = (text: string) => process.stderr.write(`${text}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs `school-data import` of one delta: leads added, some of the earlier ones changed or deleted. */
function importDelta(env: NodeJS.ProcessEnv, schoolId: string, round: number, work: string): Promise<number> {
  const lead = (n: number, status: string) => ({
    id: `soak-${n}`, full_name: `Soak ${n}`, phone: '+79990001122', email: null, category: 'B', source: 'website', status, student_id: null, created_at: '2026-03-01T10:00:00Z',
  });
  const file = path.join(work, `delta-${round}.json`);
  const body = {
    leads: [lead(round, 'new'), ...(round > 1 ? [lead(round - 1, 'in_progress')] : [])],
    deleted: round > 2 ? { leads: [`soak-${round - 2}`] } : {},
  };
  fs.writeFileSync(file, JSON.stringify(body));
  return new Promise((resolve) => {
    // The server's V8 caps are not the import's.
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/school-data.js'), 'import', '--school', schoolId, file, '--json'], { env: { ...env, NODE_OPTIONS: '' }, stdio: ['ignore', 'ignore', 'inherit'] });
    child.on('close', (code) => resolve(code ?? 1));
  });
}

async function main(): Promise<number> {
  await checkWrk();
  const shape = datasetShape(scale, 1);
  const loc = locateDataset(scale, ROOT, undefined);
  say(`node ${process.version}; data set ${loc.describe}`);
  await ensureDataset(loc, shape, false);

  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-soak-'));
  const requestsFile = path.join(work, 'mixed.txt');
  fs.writeFileSync(requestsFile, MIXED_SCENARIO.requests(shape).map((r) => `${r.key}\t${r.path}\n`).join(''));
  const [port, cabinetPort] = [await freePort(), await freePort()];
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: SERVER_NODE_OPTIONS, SCHOOL_DATA_DIR: loc.dataDir, HOST: '127.0.0.1', PORT: String(port), SCHOOL_DATA_CABINET_PORT: String(cabinetPort), SCHOOL_DATA_RATE_LIMIT_VIP: '10000000', SCHOOL_DATA_LOG_LEVEL: 'warn',
    // The data set's keys were made long before a run: a long period keeps them from being revoked as unused.
    SCHOOL_DATA_KEY_UNUSED_DAYS: '36500' };
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  const logFile = path.join(work, 'serve.log');
  const server = await startApiServer({ env, workers: 1, logFile, metricsUrl: `https://127.0.0.1:${cabinetPort}/metrics` });
  const pid = server.servingPids()[0]!;
  const rss = new PeakRss(() => [pid]);
  rss.reset();

  const school = shape.large.id;
  let imports = 0;
  let failedImports = 0;
  let loading = true;
  const importing = (async () => {
    while (loading) {
      await sleep(importEverySeconds * 1000);
      if (!loading) break;
      imports += 1;
      if ((await importDelta(env, school, imports, work)) !== 0) failedImports += 1;
    }
  })();
  say(`mixed workload for ${minutes} min at 50 connections, a delta import every ${importEverySeconds} s into ${school}`);
  const ca = (await loadTls({ tlsCert: null, tlsKey: null, dataDir: loc.dataDir })).cert;
  const countsBefore = await serverCounts(server.metricsUrl, ca);
  const result = await runWrk({ origin: server.origin, requestsFile, seconds: minutes * 60, connections: 50, threads: 2 });
  const countsAfter = await serverCounts(server.metricsUrl, ca);
  loading = false;
  await importing;
  const hits = countsAfter.stored.hits - countsBefore.stored.hits;
  const lookups = hits + countsAfter.stored.misses - countsBefore.stored.misses;
  const alive = (() => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  })();
  const peak = rss.read();
  const exitCode = await server.stop();
  const log = fs.readFileSync(logFile, 'utf8');
  const aborted = /Assertion failed|Aborted|Segmentation fault|FATAL ERROR/.test(log);
  const figures = {
    node: process.version,
    minutes,
    requests: result.requests,
    rps: Math.round(result.requests / (result.duration_us / 1e6)),
    errors: result.errors,
    imports,
    failedImports,
    peakRssMiB: peak === null ? null : Math.round(peak / 2 ** 20),
    // The share of the requests past the access check answered from stored answers.
    storedShare: lookups === 0 ? null : Number((hits / lookups).toFixed(3)),
    aliveAtEnd: alive,
    aborted,
    exitCode,
  };
  process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
  fs.rmSync(work, { recursive: true, force: true });
  const ok = alive && !aborted && exitCode === 0 && failedImports === 0 && result.errors.status === 0 && result.errors.connect === 0;
  say(ok ? 'soak passed' : 'soak FAILED');
  return ok ? 0 : 1;
}

process.exitCode = await main();
