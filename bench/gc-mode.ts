/**
 * npm run bench:gc-mode -- [--before DIR] [options]: what a freshly started server costs,
 * over many starts, where one comparison run measures one start of each side. Starts each
 * side's server again and again (in turns), loads one scenario, and reports per start the
 * full collections of the measured seconds (the "high" state of docs/performance.md, which
 * a process enters at start and keeps) and the CPU a request over a bare server's measured
 * right after it (the machine's speed moves between starts); at the end, each side's median.
 * The two sides may be one checkout with and without Redis (`--before . --before-redis-url ''`).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { selfSignedPaths } from '../src/tls.js';
import { locateDataset } from './dataset/load.js';
import { datasetShape } from './dataset/shape.js';
import { probe, serverCounts } from './probe.js';
import { SCENARIOS } from './scenarios.js';
import { cpuSeconds, freePort, median, numberOption, onInterrupt, ROOT, runMain, serverEnv, SERVER_NODE_OPTIONS, startApiServer, startBareServer, type ApiServer, type BareServer } from './servers.js';
import { checkWrk, requestLines, runWrk } from './wrk.js';

const USAGE = `usage: npm run bench:gc-mode -- [--before DIR] [options]

  --before DIR       another checkout (built, with its own data set: npm run bench -- --build-only --scale 0.1);
                     with DATABASE_URL set, both builds read that database's data set; . for this one
  --before-redis-url URL  its servers' REDIS_URL (default: this run's; '' for the in-memory limiter)
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
      'before-redis-url': { type: 'string' },
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
  const after: Side = { name: 'after', root: ROOT, redisUrl: process.env.REDIS_URL || undefined };
  const beforeRedis = values['before-redis-url'] ?? process.env.REDIS_URL;
  return {
    sides: before === null ? [after] : [{ name: 'before', root: before, redisUrl: beforeRedis || undefined } satisfies Side, after],
    scenario,
    starts: numberOption(values.starts, 10, 'starts', 1, 1000),
    seconds: numberOption(values.seconds, 14, 'seconds', 10, 600),
    responseCacheMb: numberOption(values['response-cache-mb'], 0, 'response-cache-mb', 0, 65_536),
  };
}

/** A side: a checkout and its servers' Redis (none: the in-memory limiter). */
interface Side {
  name: 'before' | 'after';
  root: string;
  redisUrl: string | undefined;
}

type Options = NonNullable<ReturnType<typeof parse>>;

/** Seconds the bare server is measured after each start. */
const BARE_SECONDS = 4;

/**
 * One start of a side's server: its full collections, answers a second and CPU a request over
 * the measured seconds, and the bare server's CPU a request just after (its body the size of
 * the scenario's answers, set at the first start).
 */
async function oneStart(o: Options, side: Side, requests: string, logFile: string, running: { server: ApiServer | null }, bare: BareServer, bareSized: { done: boolean }) {
  const loc = locateDataset(SCALE, side.root, process.env.DATABASE_URL);
  const [port, cabinetPort] = [await freePort(), await freePort()];
  const env = serverEnv(loc, port, cabinetPort, { logLevel: 'info', responseCacheMb: o.responseCacheMb, nodeOptions: SERVER_NODE_OPTIONS }, side.redisUrl);
  if (side.redisUrl === undefined) delete env.REDIS_URL;
  const metricsUrl = `https://127.0.0.1:${cabinetPort}/metrics`;
  const server = (running.server = await startApiServer({ env, workers: 1, logFile, metricsUrl, root: side.root }));
  try {
    const ca = fs.readFileSync(selfSignedPaths(loc.dataDir).cert, 'utf8');
    const load = { origin: server.origin, requestsFile: requests, connections: 50, threads: 2 };
    await runWrk({ ...load, seconds: WARMUP_SECONDS });
    if (!bareSized.done) {
      await bare.setBodySize((await probe(server.origin, ca, o.scenario.requests(datasetShape(SCALE, 1)))).medianBytes);
      bareSized.done = true;
    }
    const pid = server.servingPids()[0]!;
    const [gc, cpu] = [(await serverCounts(metricsUrl, ca)).gc.major.count, cpuSeconds([pid])];
    const r = await runWrk({ ...load, seconds: o.seconds });
    const [gcAfter, cpuAfter] = [(await serverCounts(metricsUrl, ca)).gc.major.count, cpuSeconds([pid])];
    const { connect, read, write, status, timeout } = r.errors;
    const failed = connect + read + write + status + timeout;
    if (failed > 0) throw new Error(`${side.root}: ${failed} of ${r.requests} requests failed or were answered 400 or more (${JSON.stringify(r.errors)})`);
    const bareCpu = cpuSeconds([bare.pid]);
    const b = await runWrk({ ...load, origin: `https://127.0.0.1:${bare.port}`, seconds: BARE_SECONDS });
    const bareCpuUs = ((cpuSeconds([bare.pid]) - bareCpu) * 1e6) / b.requests;
    return { full: gcAfter - gc, rps: r.requests / (r.duration_us / 1e6), cpuUs: ((cpuAfter - cpu) * 1e6) / r.requests, bareCpuUs };
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
  const cert = selfSignedPaths(locateDataset(SCALE, ROOT, process.env.DATABASE_URL).dataDir);
  const bare = await startBareServer(cert.cert, cert.key);
  const forget = onInterrupt(() => Promise.all([running.server?.stop(), bare.stop()]));
  try {
    const requests = path.join(work, 'requests.txt');
    fs.writeFileSync(requests, requestLines(o.scenario.requests(datasetShape(SCALE, 1))));
    const bareSized = { done: false };
    const label = (side: Side) => `${side.name} (${side.root}, ${side.redisUrl === undefined ? 'in-memory limiter' : 'Redis'})`;
    const bySide = new Map<Side, { inState: number; overBare: number[] }>(o.sides.map((s) => [s, { inState: 0, overBare: [] }]));
    for (let i = 1; i <= o.starts; i++) {
      for (const side of i % 2 === 1 ? o.sides : [...o.sides].reverse()) {
        const s = await oneStart(o, side, requests, path.join(work, 'server.log'), running, bare, bareSized);
        const state = s.full >= STATE_PER_SECOND * o.seconds;
        const mine = bySide.get(side)!;
        if (state) mine.inState += 1;
        mine.overBare.push(s.cpuUs / s.bareCpuUs);
        process.stdout.write(
          `${label(side)} start ${i}: ${s.full} full collections in ${o.seconds} s${state ? ' (the state)' : ''}, ${Math.round(s.rps)} req/s, ` +
            `${s.cpuUs.toFixed(1)} CPU µs/req, the bare server's ${s.bareCpuUs.toFixed(1)} (x ${(s.cpuUs / s.bareCpuUs).toFixed(2)})\n`,
        );
      }
    }
    for (const [side, { inState, overBare }] of bySide) {
      process.stdout.write(
        `${label(side)}: ${inState} of ${o.starts} starts in constant full collections; CPU a request over the bare server's, median ${median(overBare).toFixed(2)} ` +
          `(${Math.min(...overBare).toFixed(2)}-${Math.max(...overBare).toFixed(2)}) (${o.scenario.name}, stored answers ${o.responseCacheMb} MiB)\n`,
      );
    }
    return 0;
  } finally {
    forget();
    await bare.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

runMain('bench:gc-mode', main);
