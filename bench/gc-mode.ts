/**
 * npm run bench:gc-mode -- [--before DIR] [options]: what a freshly started server costs,
 * over many starts, where one comparison run measures one start of each side. Starts each
 * side's server again and again (in turns), loads one scenario, and reports per start the
 * full collections of the measured seconds (the "high" state of docs/performance.md, which
 * a process enters at start and keeps) and the CPU a request over a bare server's measured
 * right after it (the machine's speed moves between starts); at the end, each side's medians.
 * The two sides may be one checkout with and without Redis (`--before . --before-redis-url ''`);
 * with --floor, each start is followed by the floor of a stored answer in the same setting.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadTls, selfSignedPaths } from '../src/tls.js';
import { locateDataset } from './dataset/load.js';
import { datasetShape } from './dataset/shape.js';
import type { GcSummary } from './gc.js';
import { probe, serverCounts } from './probe.js';
import { SCENARIOS } from './scenarios.js';
import { cpuSeconds, freePort, median, numberOption, onInterrupt, ROOT, runMain, serverEnv, SERVER_NODE_OPTIONS, startApiServer, startBareServer, systemCpuSeconds, type ApiServer, type BareServer } from './servers.js';
import { checkWrk, requestLines, runWrk } from './wrk.js';

const USAGE = `usage: npm run bench:gc-mode -- [--before DIR] [options]

  --before DIR       another checkout (built, with its own data set: npm run bench -- --build-only --scale 0.1);
                     with DATABASE_URL set, both builds read that database's data set; . for this one
  --before-redis-url URL  its servers' REDIS_URL (default: this run's; '' for the in-memory limiter)
  --starts N         starts of each build (default 10)
  --scenario NAME    a scenario answered 200 at 50 connections, made from the data set alone (default students-page)
  --seconds N        measured seconds per start, after 3 s of warm-up (default 14, at least 10)
  --response-cache-mb N  the servers' stored answers (default 0: every answer queried)
  --floor            after each start, the floor of a stored answer (bench/bare-server.ts) started and
                     measured as the server was, counting in the side's Redis when it has one
  --pin              the servers on the first processor, alone: start this script (and so wrk) on
                     others, taskset -c 1 (or 1-N), and move a local Redis there too (taskset -acp 1 PID)

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
      floor: { type: 'boolean' },
      pin: { type: 'boolean' },
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
    floor: values.floor ?? false,
    pin: values.pin ?? false,
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

/** What a server cost over `seconds` of `load`: its CPU a request, the kernel's part of it, its answers a second. */
async function measured(pid: number, load: Parameters<typeof runWrk>[0], what: string) {
  const [cpu, sys0] = [cpuSeconds([pid]), systemCpuSeconds(pid)];
  const r = await runWrk(load);
  const [cpuAfter, sys1] = [cpuSeconds([pid]), systemCpuSeconds(pid)];
  const { connect, read, write, status, timeout } = r.errors;
  const failed = connect + read + write + status + timeout;
  if (failed > 0) throw new Error(`${what}: ${failed} of ${r.requests} requests failed or were answered 400 or more (${JSON.stringify(r.errors)})`);
  return { requests: r.requests, rps: r.requests / (r.duration_us / 1e6), cpuUs: ((cpuAfter - cpu) * 1e6) / r.requests, sysUs: ((sys1 - sys0) * 1e6) / r.requests };
}

/** What every start of a run shares: the request file, the work directory, the server running, the bare server, the certificate and the answers' size. */
interface Run {
  requests: string;
  work: string;
  running: { server: ApiServer | BareServer | null };
  bare: BareServer;
  cert: { cert: string; key: string };
  body: { bytes: number | null };
}

/** The collections' pauses so far, all kinds (the main thread's wall time, not CPU: V8's helper threads work beside it). */
const gcMs = (g: GcSummary) => g.major.totalMs + g.minor.totalMs + g.incremental.totalMs;

/**
 * One start of a side's server: its full collections (and their pauses), answers a second and
 * CPU a request over the measured seconds (and the kernel's part of it); the bare server's CPU
 * a request just after (its body the size of the scenario's answers, set at the first start);
 * then with --floor, a floor started and measured as the server was.
 */
async function oneStart(o: Options, side: Side, run: Run) {
  const { requests, work, running, bare, cert, body } = run;
  /** The scenario's load on a server at `origin`, as every measured server gets it. */
  const loadAt = (origin: string) => ({ origin, requestsFile: requests, connections: 50, threads: 2 });
  const loc = locateDataset(SCALE, side.root, process.env.DATABASE_URL);
  const [port, cabinetPort] = [await freePort(), await freePort()];
  const env = serverEnv(loc, port, cabinetPort, { logLevel: 'info', responseCacheMb: o.responseCacheMb, nodeOptions: SERVER_NODE_OPTIONS }, side.redisUrl);
  if (side.redisUrl === undefined) delete env.REDIS_URL;
  const metricsUrl = `https://127.0.0.1:${cabinetPort}/metrics`;
  const server = await startApiServer({ env, workers: 1, logFile: path.join(work, 'server.log'), metricsUrl, root: side.root });
  running.server = server;
  let service;
  try {
    const pid = server.servingPids()[0]!;
    if (o.pin) pinToFirst(pid);
    const ca = fs.readFileSync(selfSignedPaths(loc.dataDir).cert, 'utf8');
    const load = loadAt(server.origin);
    await runWrk({ ...load, seconds: WARMUP_SECONDS });
    if (body.bytes === null) {
      body.bytes = (await probe(server.origin, ca, o.scenario.requests(datasetShape(SCALE, 1)))).medianBytes;
      await bare.setBodySize(body.bytes);
    }
    const gc = (await serverCounts(metricsUrl, ca)).gc;
    const m = await measured(pid, { ...load, seconds: o.seconds }, side.root);
    const gcAfter = (await serverCounts(metricsUrl, ca)).gc;
    service = { ...m, full: gcAfter.major.count - gc.major.count, gcUs: ((gcMs(gcAfter) - gcMs(gc)) * 1000) / m.requests };
  } finally {
    running.server = null;
    await server.stop();
  }
  const b = await measured(bare.pid, { ...loadAt(`https://127.0.0.1:${bare.port}`), seconds: BARE_SECONDS }, 'the bare server');
  let floor = null;
  if (o.floor) {
    const f = await startBareServer(cert.cert, cert.key, { logFile: path.join(work, 'floor.log'), redisUrl: side.redisUrl });
    running.server = f;
    try {
      if (o.pin) pinToFirst(f.pid);
      await f.setBodySize(body.bytes);
      const load = loadAt(`https://127.0.0.1:${f.port}`);
      await runWrk({ ...load, seconds: WARMUP_SECONDS });
      floor = await measured(f.pid, { ...load, seconds: o.seconds }, 'the floor');
    } finally {
      running.server = null;
      await f.stop();
    }
  }
  return { service, floor, bareCpuUs: b.cpuUs };
}

/** Moves every thread of a process to the first processor. */
function pinToFirst(pid: number): void {
  execFileSync('taskset', ['-acp', '0', String(pid)], { stdio: 'ignore' });
}

/** Fails unless this script (and so wrk, which it starts) may not run on the first processor, where --pin puts the servers. */
function offTheFirst(): void {
  const mask = /mask:\s*([0-9a-f,]+)/i.exec(execFileSync('taskset', ['-p', String(process.pid)], { encoding: 'utf8' }))?.[1];
  if (mask === undefined || (parseInt(mask.replaceAll(',', '').slice(-1), 16) & 1) === 1) {
    throw new Error('--pin: start this script off the first processor, as in taskset -c 1 npm run bench:gc-mode -- --pin ...');
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
  const running: Run['running'] = { server: null };
  const dataDir = locateDataset(SCALE, ROOT, process.env.DATABASE_URL).dataDir;
  // The bare server and the floor use this checkout's certificate, made here on a first run.
  await loadTls({ tlsCert: null, tlsKey: null, dataDir });
  const cert = selfSignedPaths(dataDir);
  const bare = await startBareServer(cert.cert, cert.key);
  const forget = onInterrupt(() => Promise.all([running.server?.stop(), bare.stop()]));
  try {
    if (o.pin) {
      offTheFirst();
      pinToFirst(bare.pid);
    }
    const requests = path.join(work, 'requests.txt');
    fs.writeFileSync(requests, requestLines(o.scenario.requests(datasetShape(SCALE, 1))));
    const run: Run = { requests, work, running, bare, cert, body: { bytes: null } };
    const label = (side: Side) => `${side.name} (${side.root}, ${side.redisUrl === undefined ? 'in-memory limiter' : 'Redis'})`;
    const bySide = new Map(o.sides.map((s) => [s, { inState: 0, cpuUs: [] as number[], overBare: [] as number[], floorOverBare: [] as number[] }]));
    for (let i = 1; i <= o.starts; i++) {
      for (const side of i % 2 === 1 ? o.sides : [...o.sides].reverse()) {
        const { service: s, floor, bareCpuUs } = await oneStart(o, side, run);
        const state = s.full >= STATE_PER_SECOND * o.seconds;
        const mine = bySide.get(side)!;
        if (state) mine.inState += 1;
        mine.cpuUs.push(s.cpuUs);
        mine.overBare.push(s.cpuUs / bareCpuUs);
        if (floor !== null) mine.floorOverBare.push(floor.cpuUs / bareCpuUs);
        const floorText = floor === null ? '' : `; the floor ${Math.round(floor.rps)} req/s, ${floor.cpuUs.toFixed(1)} CPU µs/req (${floor.sysUs.toFixed(1)} in the kernel, x ${(floor.cpuUs / bareCpuUs).toFixed(2)})`;
        process.stdout.write(
          `${label(side)} start ${i}: ${s.full} full collections in ${o.seconds} s${state ? ' (the state)' : ''} (pauses ${s.gcUs.toFixed(1)} µs a request), ${Math.round(s.rps)} req/s, ` +
            `${s.cpuUs.toFixed(1)} CPU µs/req (${s.sysUs.toFixed(1)} in the kernel; x ${(s.cpuUs / bareCpuUs).toFixed(2)})${floorText}; the bare server's ${bareCpuUs.toFixed(1)}\n`,
        );
      }
    }
    const spread = (xs: number[], digits = 2) => `median ${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)})`;
    for (const [side, { inState, cpuUs, overBare, floorOverBare }] of bySide) {
      process.stdout.write(
        `${label(side)}: ${inState} of ${o.starts} starts in constant full collections; CPU µs a request ${spread(cpuUs, 1)}, over the bare server's ${spread(overBare)}` +
          `${o.floor ? `, the floor's ${spread(floorOverBare)}` : ''} (${o.scenario.name}, stored answers ${o.responseCacheMb} MiB)\n`,
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
