/**
 * npm run bench:gc-mode -- [--before DIR] [options]: how often a freshly started server
 * falls into constant full collections (the "high" state of docs/performance.md), a state
 * a process enters at start and keeps, so that one comparison run cannot say how often it
 * happens. Starts each build's server again and again (in turns), loads one scenario and
 * counts the full collections of the measured seconds from the server's metrics.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { selfSignedPaths } from '../src/tls.js';
import { locateDataset } from './dataset/load.js';
import { datasetShape } from './dataset/shape.js';
import { serverCounts } from './probe.js';
import { SCENARIOS } from './scenarios.js';
import { cpuSeconds, freePort, numberOption, onInterrupt, ROOT, runMain, serverEnv, SERVER_NODE_OPTIONS, startApiServer, type ApiServer } from './servers.js';
import { checkWrk, requestLines, runWrk } from './wrk.js';

const USAGE = `usage: npm run bench:gc-mode -- [--before DIR] [options]

  --before DIR       another checkout (built, with its own data set: npm run bench -- --build-only --scale 0.1);
                     with DATABASE_URL set, both builds read that database's data set
  --starts N         starts of each build (default 10)
  --scenario NAME    a scenario answered 200 at 50 connections, made from the data set alone (default students-page)
  --seconds N        measured seconds per start, after 3 s of warm-up (default 14, at least 10)
  --response-cache-mb N  the servers' stored answers (default 0: every answer queried)

The store is SQLite unless DATABASE_URL is set; REDIS_URL, when set, gives the servers the Redis limiter.`;

const SCALE = 0.1;
const WARMUP_SECONDS = 3;
/** Full collections a second from which a start counts as in the state: a normal start does a few in its run, one in the state about one a second. */
const STATE_PER_SECOND = 0.6;

function parse() {
  const { values } = parseArgs({
    options: {
      before: { type: 'string' },
      starts: { type: 'string' },
      scenario: { type: 'string', default: 'students-page' },
      seconds: { type: 'string' },
      'response-cache-mb': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) return null;
  const usable = SCENARIOS.filter((s) => s.expect === 200 && s.prepare === undefined && s.connections === undefined);
  const scenario = usable.find((s) => s.name === values.scenario);
  if (!scenario) throw new Error(`--scenario: one of ${usable.map((s) => s.name).join(', ')}`);
  const before = values.before === undefined ? null : path.resolve(values.before);
  if (before !== null && !fs.existsSync(path.join(before, 'dist'))) throw new Error(`${before} has no dist/: run npm ci && npm run build there`);
  return {
    roots: before === null ? [ROOT] : [before, ROOT],
    scenario,
    starts: numberOption(values.starts, 10, 'starts', 1, 1000),
    seconds: numberOption(values.seconds, 14, 'seconds', 10, 600),
    responseCacheMb: numberOption(values['response-cache-mb'], 0, 'response-cache-mb', 0, 65_536),
  };
}

type Options = NonNullable<ReturnType<typeof parse>>;

/** One start of a build's server: its full collections, answers a second and CPU a request over the measured seconds. */
async function oneStart(o: Options, root: string, requests: string, logFile: string, running: { server: ApiServer | null }) {
  const loc = locateDataset(SCALE, root, process.env.DATABASE_URL);
  const [port, cabinetPort] = [await freePort(), await freePort()];
  const env = serverEnv(loc, port, cabinetPort, { logLevel: 'info', responseCacheMb: o.responseCacheMb, nodeOptions: SERVER_NODE_OPTIONS }, process.env.REDIS_URL);
  const metricsUrl = `https://127.0.0.1:${cabinetPort}/metrics`;
  const server = (running.server = await startApiServer({ env, workers: 1, logFile, metricsUrl, root }));
  try {
    const ca = fs.readFileSync(selfSignedPaths(loc.dataDir).cert, 'utf8');
    const load = { origin: server.origin, requestsFile: requests, connections: 50, threads: 2 };
    await runWrk({ ...load, seconds: WARMUP_SECONDS });
    const pid = server.servingPids()[0]!;
    const [gc, cpu] = [(await serverCounts(metricsUrl, ca)).gc.major.count, cpuSeconds([pid])];
    const r = await runWrk({ ...load, seconds: o.seconds });
    const [gcAfter, cpuAfter] = [(await serverCounts(metricsUrl, ca)).gc.major.count, cpuSeconds([pid])];
    const { connect, read, write, status, timeout } = r.errors;
    const failed = connect + read + write + status + timeout;
    if (failed > 0) throw new Error(`${root}: ${failed} of ${r.requests} requests failed or were answered 400 or more (${JSON.stringify(r.errors)})`);
    return { full: gcAfter - gc, rps: r.requests / (r.duration_us / 1e6), cpuUs: ((cpuAfter - cpu) * 1e6) / r.requests };
  } finally {
    running.server = null;
    await server.stop();
  }
}

async function main(): Promise<number> {
  const o = parse();
  if (o === null) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  await checkWrk();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'gc-mode-'));
  const running: { server: ApiServer | null } = { server: null };
  const forget = onInterrupt(() => running.server?.stop() ?? Promise.resolve());
  try {
    const requests = path.join(work, 'requests.txt');
    fs.writeFileSync(requests, requestLines(o.scenario.requests(datasetShape(SCALE, 1))));
    const inState = new Map<string, number>(o.roots.map((r) => [r, 0]));
    for (let i = 1; i <= o.starts; i++) {
      for (const root of i % 2 === 1 ? o.roots : [...o.roots].reverse()) {
        const s = await oneStart(o, root, requests, path.join(work, 'server.log'), running);
        const state = s.full >= STATE_PER_SECOND * o.seconds;
        if (state) inState.set(root, inState.get(root)! + 1);
        process.stdout.write(`${root} start ${i}: ${s.full} full collections in ${o.seconds} s${state ? ' (the state)' : ''}, ${Math.round(s.rps)} req/s, ${s.cpuUs.toFixed(1)} CPU µs/req\n`);
      }
    }
    for (const [root, n] of inState) process.stdout.write(`${root}: ${n} of ${o.starts} starts in constant full collections (${o.scenario.name}, stored answers ${o.responseCacheMb} MiB)\n`);
    return 0;
  } finally {
    forget();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

runMain('bench:gc-mode', main);
