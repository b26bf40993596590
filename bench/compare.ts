/**
 * npm run bench:compare -- --before DIR [options]: this checkout's server and another
 * checkout's (built, with its own data set of the same scale), loaded in turns: every
 * round of a scenario measures both, in alternating order, next to a bare baseline
 * slice (and, with --floor, a slice of the floor of a stored answer, bench/bare-server.ts;
 * --floor without --before measures this checkout alone against the two). Reported per
 * side: the server process's CPU microseconds per answered request
 * (utime + stime from /proc over the measured slice), which other load on a shared
 * machine moves far less than requests a second; requests a second; the ratio to the
 * bare baseline; as medians with their spread, and after/before per round.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { settings as serviceSettings } from '../src/config/index.js';
import { selfSignedPaths, loadTls } from '../src/tls.js';
import { ensureDataset, locateDataset, scaleTag, type DatasetLocation } from './dataset/load.js';
import { datasetShape } from './dataset/shape.js';
import { fetchOnce, probe } from './probe.js';
import { summariseProfile, type ProfileSummary } from './profile.js';
import { machine, unexpectedResponses } from './report.js';
import { MIXED_SCENARIO, SCENARIOS, type Scenario } from './scenarios.js';
import { cpuSeconds, cpuSecondsByThread, freePort, median, OS_EVENTS, osEvents, numberOption, onInterrupt, RATE_LIMIT_PROFI, ROOT, runMain, SERVER_NODE_OPTIONS, serverEnv, startApiServer, startBareServer, THREAD_KINDS, type ApiServer, type OsEvents, type ThreadKind } from './servers.js';
import { checkWrk, runWrk, requestLines } from './wrk.js';

const USAGE = `usage: npm run bench:compare -- --before DIR [options]
       npm run bench:compare -- --floor [options]

  --before DIR       the other checkout (built with npm run build, its data set made there with
                     npm run bench -- --build-only --scale S, with --before-database-url as its DATABASE_URL)
  --before-database-url URL   the other checkout's DATABASE_URL (default: this run's, which then
                     must hold both data sets; give each build its own database)
  --before-redis-url URL      its REDIS_URL (default: this run's)
  --scale N          data set size (default 0.1)
  --rounds N         rounds per scenario; each measures both builds, alternating which goes first (default 3)
  --seconds N        measured seconds per build and round (default 5)
  --warmup N         unmeasured seconds before each measured slice (default 2)
  --server-warmup N  seconds of the mixed workload for each server after it starts (default 10)
  --response-cache-mb N  both servers' SCHOOL_DATA_RESPONSE_CACHE_MB (default ${serviceSettings.responseCacheMb.default})
  --connections N    wrk's keep-alive connections (default 50, and a loader scenario's own 1); at 1, no two
                     requests share a turn of the event loop, so nothing is batched and a request's cost does
                     not depend on timing
  --scenarios A,B    (default students-page,student-card,unauthorized-flood,rate-limited-flood,mixed,not-modified);
                     not-modified runs on this checkout only (its entity tags are this build's)
  --profile          both servers under --cpu-prof: each side's self time per request by area and the top
                     functions (every request sent to a side counted, warm-ups included)
  --node-args="A B"  flags for both servers' command line, after their NODE_OPTIONS ("${SERVER_NODE_OPTIONS}"):
                     for those NODE_OPTIONS refuses, e.g. --node-args="--trace-gc --min-semi-space-size=8"
  --logs DIR         keep both servers' output there (after.log, before.log), e.g. with --node-args=--trace-gc
  --floor            each round of a scenario answered 200 also measures the floor of a stored answer: a server
                     doing only what the contract asks of an answer to a key (bench/bare-server.ts); without
                     --before, this checkout alone
  --label TEXT       added to the report's name
  --out DIR          where reports go (default bench/results/compare)

The store is SQLite unless DATABASE_URL is set; REDIS_URL, when set, gives both servers the Redis limiter.`;

const DEFAULT_SCENARIOS = ['students-page', 'student-card', 'unauthorized-flood', 'rate-limited-flood', 'mixed', 'not-modified'];
/** Scenarios made from this build's own answers: measured on this checkout only. */
const THIS_BUILD_ONLY = new Set(['not-modified']);
const DEFAULT_CONNECTIONS = 50;
const THREADS = 2;

/**
 * wrk's connections and threads (no more threads than connections): --connections when given,
 * else the scenario's own (the loaders': 1), else the default.
 */
function wrkLoad(o: { connections: number | null }, scenario?: Scenario) {
  const connections = o.connections ?? scenario?.connections ?? DEFAULT_CONNECTIONS;
  return { connections, threads: Math.min(THREADS, connections) };
}

type Side = 'before' | 'after';
/** The servers measured in a round: the two builds, the bare baseline and the floor. */
type Measured = Side | 'bare' | 'floor';

interface Slice {
  round: number;
  /** Requests of the unmeasured warm-up before the slice. */
  warmupRequests: number;
  side: Measured;
  requests: number;
  seconds: number;
  cpuSeconds: number;
  /** The same CPU by the thread that used it (bench/servers.ts, ThreadKind). */
  cpuByThread: Record<ThreadKind, number>;
  /** What the kernel counted over the slice (bench/servers.ts, OsEvents). */
  os: OsEvents;
  unexpected: number;
  loadAverage: number;
}

interface Figures {
  /** CPU microseconds per request, requests a second, ratio to the round's bare slice. */
  cpuMicros: number[];
  rps: number[];
  ratio: number[];
  cpuRatio: number[];
  /** CPU microseconds per request by the thread that used it. */
  byThread: Record<ThreadKind, number[]>;
  /** The kernel's counts per request. */
  os: Record<keyof OsEvents, number[]>;
}

interface ScenarioResult {
  scenario: string;
  bodyBytes: number;
  slices: Slice[];
  sides: Partial<Record<Side | 'floor', Figures>>;
  /** after / before, per round, of CPU per request and of requests a second. */
  paired: { cpuMicros: number[]; rps: number[] } | null;
}

const say = (text: string) => process.stderr.write(`${text}\n`);
const spread = (xs: number[]) => ({ min: Math.min(...xs), max: Math.max(...xs) });

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    options: {
      before: { type: 'string' },
      'before-database-url': { type: 'string' },
      'before-redis-url': { type: 'string' },
      scale: { type: 'string' },
      rounds: { type: 'string' },
      seconds: { type: 'string' },
      warmup: { type: 'string' },
      'server-warmup': { type: 'string' },
      'response-cache-mb': { type: 'string' },
      connections: { type: 'string' },
      scenarios: { type: 'string' },
      label: { type: 'string' },
      'node-args': { type: 'string' },
      logs: { type: 'string' },
      profile: { type: 'boolean' },
      floor: { type: 'boolean' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help || (!values.before && !values.floor)) return null;
  const names = (values.scenarios ?? DEFAULT_SCENARIOS.join(',')).split(',').map((s) => s.trim());
  const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length > 0) throw new Error(`unknown scenario ${unknown.join(', ')}`);
  const before = values.before === undefined ? null : path.resolve(values.before);
  if (before !== null && !fs.existsSync(path.join(before, 'dist'))) throw new Error(`${before} has no dist/: run npm ci && npm run build there`);
  return {
    before,
    beforeDatabaseUrl: values['before-database-url'] ?? process.env.DATABASE_URL,
    beforeRedisUrl: values['before-redis-url'] ?? process.env.REDIS_URL,
    scale: numberOption(values.scale, 0.1, 'scale', 0.001, 4),
    rounds: numberOption(values.rounds, 3, 'rounds', 1, 100),
    seconds: numberOption(values.seconds, 5, 'seconds', 1, 600),
    warmup: numberOption(values.warmup, 2, 'warmup', 0, 600),
    serverWarmup: numberOption(values['server-warmup'], 10, 'server-warmup', 0, 600),
    responseCacheMb: numberOption(values['response-cache-mb'], serviceSettings.responseCacheMb.default, 'response-cache-mb', 0, 65_536),
    connections: values.connections === undefined ? null : numberOption(values.connections, DEFAULT_CONNECTIONS, 'connections', 1, 1000),
    scenarios: names.map((n) => SCENARIOS.find((s) => s.name === n)!),
    label: values.label ?? '',
    nodeArgs: (values['node-args'] ?? '').split(/\s+/).filter(Boolean),
    logs: values.logs === undefined ? null : path.resolve(values.logs),
    profile: values.profile ?? false,
    floor: values.floor ?? false,
    out: values.out ?? path.join(ROOT, 'bench/results/compare'),
  };
}

type Options = NonNullable<ReturnType<typeof parse>>;


interface Served {
  server: ApiServer;
  ca: string;
}

async function serve(o: Options, loc: DatasetLocation, root: string, redisUrl: string | undefined, logFile: string, cpuProfileDir: string | undefined): Promise<Served> {
  const [port, cabinetPort] = [await freePort(), await freePort()];
  const env = serverEnv(loc, port, cabinetPort, { logLevel: 'info', responseCacheMb: o.responseCacheMb, nodeOptions: SERVER_NODE_OPTIONS }, redisUrl);
  if (redisUrl === undefined) delete env.REDIS_URL;
  const server = await startApiServer({ env, metricsUrl: `https://127.0.0.1:${cabinetPort}/metrics`, workers: 1, logFile, root, cpuProfileDir, nodeArgs: o.nodeArgs });
  return { server, ca: fs.readFileSync(selfSignedPaths(loc.dataDir).cert, 'utf8') };
}

async function measure(origin: string, pid: number, file: string, o: Options, round: number, side: Slice['side'], scenario: Scenario): Promise<Slice> {
  const load = { origin, requestsFile: file, ...wrkLoad(o, scenario) };
  const warmupRequests = o.warmup > 0 && side !== 'bare' ? (await runWrk({ ...load, seconds: o.warmup })).requests : 0;
  const cpu = cpuSeconds([pid]);
  const threads = cpuSecondsByThread(pid);
  const events = osEvents(pid);
  const r = await runWrk({ ...load, seconds: o.seconds });
  const eventsAfter = osEvents(pid);
  const cpuUsed = cpuSeconds([pid]) - cpu;
  const threadsAfter = cpuSecondsByThread(pid);
  const cpuByThread = Object.fromEntries(THREAD_KINDS.map((k) => [k, threadsAfter[k] - threads[k]])) as Record<ThreadKind, number>;
  const kernel = Object.fromEntries(OS_EVENTS.map((k) => [k, eventsAfter[k] - events[k]])) as unknown as OsEvents;
  const seconds = r.duration_us / 1e6;
  const asMeasured = { requests: r.requests, seconds, rps: 0, bytes: r.bytes, errors: r.errors, latencyMs: { mean: 0, p50: 0, p90: 0, p99: 0, p999: 0, max: 0 }, cpuSeconds: cpuUsed };
  // The bare server answers every request alike, whatever the scenario expects; the floor is
  // measured in scenarios answered 200 only, and answers 503 when its counts in Redis fail.
  const unexpected = side === 'bare' ? 0 : unexpectedResponses(scenario, asMeasured, RATE_LIMIT_PROFI);
  return { round, warmupRequests, side, requests: r.requests, seconds, cpuSeconds: cpuUsed, cpuByThread, os: kernel, unexpected, loadAverage: os.loadavg()[0]! };
}

function figures(slices: Slice[], side: Measured): Figures {
  const mine = slices.filter((s) => s.side === side);
  const bareOf = (round: number) => slices.find((s) => s.side === 'bare' && s.round === round)!;
  return {
    cpuMicros: mine.map((s) => (1e6 * s.cpuSeconds) / s.requests),
    rps: mine.map((s) => s.requests / s.seconds),
    ratio: mine.map((s) => s.requests / s.seconds / (bareOf(s.round).requests / bareOf(s.round).seconds)),
    cpuRatio: mine.map((s) => s.requests / s.cpuSeconds / (bareOf(s.round).requests / bareOf(s.round).cpuSeconds)),
    byThread: Object.fromEntries(THREAD_KINDS.map((k) => [k, mine.map((s) => (1e6 * s.cpuByThread[k]) / s.requests)])) as Record<ThreadKind, number[]>,
    os: Object.fromEntries(OS_EVENTS.map((k) => [k, mine.map((s) => s.os[k] / s.requests)])) as Record<keyof OsEvents, number[]>,
  };
}

const fmt = (xs: number[], digits: number) => {
  const { min, max } = spread(xs);
  return `${median(xs).toFixed(digits)} (${min.toFixed(digits)}-${max.toFixed(digits)})`;
};

/** A side's answers with another status than the scenario's (wrk's errors included), over its slices; '-' when not run. */
const unexpectedOf = (r: ScenarioResult, side: Side) => (r.sides[side] ? String(r.slices.filter((x) => x.side === side).reduce((n, x) => n + x.unexpected, 0)) : '-');

function markdown(o: Options, results: ScenarioResult[], head: Record<string, unknown>): string {
  const lines = [
    `# ${o.before === null ? 'this build against the floor' : 'before/after'}: ${String(head.store)} + ${String(head.limiter)}, stored answers ${o.responseCacheMb} MiB`,
    '',
    `${String(head.date)}; before ${String(head.beforeCommit)}, after ${String(head.afterCommit)}; scale ${o.scale}; ${o.rounds} rounds of ${o.seconds} s per build (${o.warmup} s warm-up each), alternating; ` +
      `${o.connections ?? `${DEFAULT_CONNECTIONS} (a loader: 1)`} connections; load average ${String(head.loadRange)}; ${String(head.cpu)}, Node ${process.version}` +
      `${o.nodeArgs.length > 0 ? `; both servers started with ${o.nodeArgs.join(' ')}` : ''}.`,
    '',
    'Medians, with the spread over the rounds in brackets. CPU µs/req: the server process\'s user + system CPU per answered request. ' +
      'after/before: per round, after\'s figure over before\'s measured next to it (CPU: below 1.05 is within 5 %; req/s: above 0.95).',
    '',
    '| scenario | CPU µs/req before | CPU µs/req after | after/before CPU | req/s before | req/s after | after/before req/s | ratio to bare before | after | per CPU-s ratio before | after | unexpected answers before, after |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    const b = r.sides.before;
    const a = r.sides.after;
    const cell = (f: Figures | undefined, pick: (f: Figures) => number[], d: number) => (f ? fmt(pick(f), d) : '-');
    lines.push(
      `| ${r.scenario} | ${cell(b, (f) => f.cpuMicros, 0)} | ${cell(a, (f) => f.cpuMicros, 0)} | ${r.paired ? fmt(r.paired.cpuMicros, 3) : '-'} | ` +
        `${cell(b, (f) => f.rps, 0)} | ${cell(a, (f) => f.rps, 0)} | ${r.paired ? fmt(r.paired.rps, 3) : '-'} | ` +
        `${cell(b, (f) => f.ratio, 2)} | ${cell(a, (f) => f.ratio, 2)} | ${cell(b, (f) => f.cpuRatio, 2)} | ${cell(a, (f) => f.cpuRatio, 2)} | ${unexpectedOf(r, 'before')}, ${unexpectedOf(r, 'after')} |`,
    );
  }
  lines.push(
    '',
    'CPU µs/req by thread (medians over the rounds): main is the JavaScript thread; V8, its helper threads (the garbage collector\'s concurrent and parallel work, compiling); libuv, its pool.',
    '',
    `| scenario | ${THREAD_KINDS.map((k) => `${k} before | ${k} after`).join(' | ')} |`,
    `|---|${THREAD_KINDS.map(() => '---:|---:').join('|')}|`,
  );
  for (const r of results) {
    const cell = (side: Side, k: ThreadKind) => (r.sides[side] ? median(r.sides[side].byThread[k]).toFixed(1) : '-');
    lines.push(`| ${r.scenario} | ${THREAD_KINDS.map((k) => `${cell('before', k)} | ${cell('after', k)}`).join(' | ')} |`);
  }
  const osColumns: [keyof OsEvents, string, number, number][] = [
    ['voluntarySwitches', 'waits', 1, 2],
    ['forcedSwitches', 'preempted', 1, 3],
    ['runQueueWaitNs', 'run-queue µs', 1e-3, 1],
    ['pageFaults', 'page faults', 1, 2],
  ];
  lines.push(
    '',
    'Per request (medians over the rounds), as the kernel counts them: the main thread\'s switches off the CPU to wait (waits) and forced ones (preempted), ' +
      'the time it waited for a CPU while it could run (run-queue µs), and the process\'s page faults.',
    '',
    `| scenario | ${osColumns.map(([, name]) => `${name} before | ${name} after`).join(' | ')} |`,
    `|---|${osColumns.map(() => '---:|---:').join('|')}|`,
  );
  for (const r of results) {
    const cell = (side: Side, k: keyof OsEvents, scale: number, digits: number) => (r.sides[side] ? (median(r.sides[side].os[k]) * scale).toFixed(digits) : '-');
    lines.push(`| ${r.scenario} | ${osColumns.map(([k, , scale, d]) => `${cell('before', k, scale, d)} | ${cell('after', k, scale, d)}`).join(' | ')} |`);
  }
  if (o.floor) lines.push(...floorMarkdown(results, head.limiter === 'redis'));
  return `${lines.join('\n')}\n`;
}

/**
 * The floor beside the bare server and this build: how much of the bare server's rate the
 * contract's own work leaves (the floor's ratio), and what this build adds to it (after / floor).
 */
function floorMarkdown(results: ScenarioResult[], inRedis: boolean): string[] {
  const lines = [
    '',
    'The floor (bench/bare-server.ts): a server doing only what the contract asks of every answered request, for a stored body' +
      (inRedis ? ', its schools\' counts in Redis (one script call a turn, the turn\'s answers held until it answers). ' : '. ') +
      'after/floor: per round, this build\'s CPU per request over the floor\'s.',
    '',
    '| scenario | CPU µs/req bare | floor | after | ratio to bare, floor | after | per CPU-s ratio, floor | after | after/floor CPU | unexpected answers of the floor |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    const { floor, after } = r.sides;
    if (!floor || !after) continue;
    lines.push(
      `| ${r.scenario} | ${fmt(figures(r.slices, 'bare').cpuMicros, 0)} | ${fmt(floor.cpuMicros, 0)} | ${fmt(after.cpuMicros, 0)} | ${fmt(floor.ratio, 2)} | ${fmt(after.ratio, 2)} | ` +
        `${fmt(floor.cpuRatio, 2)} | ${fmt(after.cpuRatio, 2)} | ${fmt(after.cpuMicros.map((x, i) => x / floor.cpuMicros[i]!), 2)} | ` +
        `${r.slices.filter((x) => x.side === 'floor').reduce((n, x) => n + x.unexpected, 0)} |`,
    );
  }
  return lines;
}

/** A side's CPU profile, summarised, with the requests it covers. */
function profileOf(dir: string, requests: number, keep: string): ProfileSummary & { requests: number } {
  const file = fs.readdirSync(dir).map((f) => path.join(dir, f)).sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0];
  if (!file) throw new Error('a server wrote no CPU profile');
  fs.copyFileSync(file, keep);
  return { ...summariseProfile(file, 25), requests };
}

/** Each side's self time per request (µs), by area and for the top functions, side by side. */
function profileMarkdown(profiled: Partial<Record<Side, ProfileSummary & { requests: number }>>): string {
  const { before, after } = profiled;
  if (!after) return '';
  type Profiled = ProfileSummary & { requests: number };
  const micros = (p: Profiled, share: number) => ((share * p.busyMs * 1000) / p.requests).toFixed(1);
  // A side not run (--floor alone) reads '-'.
  const cell = (p: Profiled | undefined, value: (p: Profiled) => string) => (p ? value(p) : '-');
  const rows = (pick: (p: ProfileSummary) => { name: string; share: number }[]) => {
    const names = [...new Set([...(before ? pick(before) : []), ...pick(after)].map((x) => x.name))];
    return names.map((name) => {
      const b = before && pick(before).find((x) => x.name === name);
      const a = pick(after).find((x) => x.name === name);
      return `| ${name} | ${b ? micros(before, b.share) : ''} | ${a ? micros(after, a.share) : ''} |`;
    });
  };
  return [
    '',
    `## Profile: self time per request (µs), over every request sent (before ${cell(before, (p) => String(p.requests))}, after ${after.requests}; the scenarios above, warm-ups included)`,
    '',
    `Busy: before ${cell(before, (p) => micros(p, 1))} µs/req, after ${micros(after, 1)} µs/req (the profiler's own cost included).`,
    '',
    '| area | before | after |',
    '|---|---:|---:|',
    ...rows((p) => p.areas.map((a) => ({ name: a.area, share: a.share }))),
    '',
    '| function | before | after |',
    '|---|---:|---:|',
    ...rows((p) => p.functions),
    '',
  ].join('\n');
}

function gitHead(dir: string): string {
  try {
    // A checkout or a worktree alike; a directory that is neither is 'unknown'.
    return execFileSync('git', ['-C', dir, 'rev-parse', '--short=7', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<number> {
  const o = parse(process.argv.slice(2));
  if (!o) {
    console.log(USAGE);
    return 0;
  }
  await checkWrk();
  const shape = datasetShape(o.scale, 1);
  const afterLoc = locateDataset(o.scale, ROOT, process.env.DATABASE_URL);
  const beforeLoc = o.before === null ? null : locateDataset(o.scale, o.before, o.beforeDatabaseUrl);
  if (beforeLoc !== null && afterLoc.databaseUrl !== null && afterLoc.databaseUrl === beforeLoc.databaseUrl) throw new Error('give the other checkout its own database (--before-database-url): the data sets differ');
  say(`after:  ${afterLoc.describe}`);
  if (beforeLoc !== null) say(`before: ${beforeLoc.describe} (made by that checkout's own npm run bench -- --build-only --scale ${o.scale})`);
  await ensureDataset(afterLoc, shape, false);
  await loadTls({ tlsCert: null, tlsKey: null, dataDir: afterLoc.dataDir });
  const paths = selfSignedPaths(afterLoc.dataDir);

  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-compare-'));
  const bare = await startBareServer(paths.cert, paths.key);
  // With Redis, the floor counts in Redis as the service does.
  const floor = o.floor ? await startBareServer(paths.cert, paths.key, { logFile: path.join(work, 'floor.log'), redisUrl: process.env.REDIS_URL || undefined }) : null;
  const profileDir = (side: Side) => (o.profile ? fs.mkdtempSync(path.join(work, `prof-${side}-`)) : undefined);
  const profiles = { after: profileDir('after'), before: profileDir('before') };
  const sides: Partial<Record<Side, Served>> = { after: await serve(o, afterLoc, ROOT, process.env.REDIS_URL, path.join(work, 'after.log'), profiles.after) };
  if (o.before !== null) sides.before = await serve(o, beforeLoc!, o.before, o.beforeRedisUrl, path.join(work, 'before.log'), profiles.before);
  const measuredSides = (['before', 'after'] as Side[]).filter((side) => sides[side] !== undefined);
  const after = sides.after!;
  // Every request sent to each side, warm-ups included: a profile covers them all.
  const sent: Record<Side, number> = { before: 0, after: 0 };
  const profiled: Partial<Record<Side, ProfileSummary & { requests: number }>> = {};
  const results: ScenarioResult[] = [];
  const stopAll = () => Promise.all([...measuredSides.map((side) => sides[side]!.server.stop()), bare.stop(), floor?.stop()]);
  const forget = onInterrupt(stopAll);
  try {
    const warm = path.join(work, 'warmup.txt');
    fs.writeFileSync(warm, requestLines(MIXED_SCENARIO.requests(shape)));
    for (const side of measuredSides) {
      if (o.serverWarmup > 0) sent[side] += (await runWrk({ origin: sides[side]!.server.origin, requestsFile: warm, seconds: o.serverWarmup, ...wrkLoad(o) })).requests;
    }
    for (const scenario of o.scenarios) {
      const built = THIS_BUILD_ONLY.has(scenario.name) ? (['after'] as Side[]) : measuredSides;
      let requests = scenario.requests(shape);
      const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        if (scenario.prepare) requests = await scenario.prepare(requests, (r) => fetchOnce(after.server.origin, after.ca, agent, r));
      } finally {
        agent.destroy();
      }
      const file = path.join(work, `${scenario.name}.txt`);
      fs.writeFileSync(file, requestLines(requests));
      let bodyBytes = 0;
      for (const side of built) {
        // Warmed up first, so that the probe sees what the load will (the 429 flood's limit used up).
        const { server, ca } = sides[side]!;
        if (o.warmup > 0) sent[side] += (await runWrk({ origin: server.origin, requestsFile: file, seconds: o.warmup, ...wrkLoad(o, scenario) })).requests;
        const probed = await probe(server.origin, ca, requests);
        if (!probed.statuses[scenario.expect]) throw new Error(`${scenario.name} (${side}): expected ${scenario.expect}, the probe got ${JSON.stringify(probed.statuses)}`);
        if (side === 'after') bodyBytes = probed.medianBytes;
      }
      await bare.setBodySize(bodyBytes);
      await floor?.setBodySize(bodyBytes);
      const slices: Slice[] = [];
      for (let round = 1; round <= o.rounds; round++) {
        const order = round % 2 === 1 ? built : [...built].reverse();
        for (const side of order) {
          const { server } = sides[side]!;
          const slice = await measure(server.origin, server.servingPids()[0]!, file, o, round, side, scenario);
          sent[side] += slice.warmupRequests + slice.requests;
          slices.push(slice);
        }
        slices.push(await measure(`https://127.0.0.1:${bare.port}`, bare.pid, file, o, round, 'bare', scenario));
        // The floor answers a request with a key: it has nothing to refuse with.
        if (floor !== null && scenario.expect === 200) slices.push(await measure(`https://127.0.0.1:${floor.port}`, floor.pid, file, o, round, 'floor', scenario));
      }
      const result: ScenarioResult = { scenario: scenario.name, bodyBytes, slices, sides: {}, paired: null };
      for (const side of built) result.sides[side] = figures(slices, side);
      if (slices.some((x) => x.side === 'floor')) result.sides.floor = figures(slices, 'floor');
      const { before: b, after: a } = result.sides;
      if (b && a) result.paired = { cpuMicros: a.cpuMicros.map((x, i) => x / b.cpuMicros[i]!), rps: a.rps.map((x, i) => x / b.rps[i]!) };
      results.push(result);
      const unexpected = [...built, 'floor' as const].map((side) => `${side} ${slices.filter((x) => x.side === side).reduce((n, x) => n + x.unexpected, 0)}`).join(', ');
      if (slices.some((x) => x.unexpected > 0)) say(`${scenario.name}: answers with an unexpected status (or none): ${unexpected}`);
      say(
        `${scenario.name.padEnd(20)} CPU µs/req ${b ? fmt(b.cpuMicros, 0) : '-'} -> ${a ? fmt(a.cpuMicros, 0) : '-'}` +
          (result.paired ? `  after/before ${fmt(result.paired.cpuMicros, 3)}  req/s ${fmt(result.paired.rps, 3)}` : '') +
          (b && a ? `  main ${median(b.byThread.main).toFixed(0)} -> ${median(a.byThread.main).toFixed(0)}, V8 ${median(b.byThread.v8).toFixed(0)} -> ${median(a.byThread.v8).toFixed(0)}` : '') +
          `  load ${os.loadavg()[0]!.toFixed(1)}`,
      );
    }
  } finally {
    await stopAll();
    forget();
    if (o.profile) {
      // Kept beside the data set (git-ignored), for a flame graph: data/bench/compare-<side>.cpuprofile.
      const keep = (side: Side) => path.join(afterLoc.dataDir, '..', `compare-${side}.cpuprofile`);
      for (const side of measuredSides) profiled[side] = profileOf(profiles[side]!, sent[side], keep(side));
    }
    if (o.logs !== null) {
      fs.mkdirSync(o.logs, { recursive: true });
      for (const side of measuredSides) fs.copyFileSync(path.join(work, `${side}.log`), path.join(o.logs, `${side}.log`));
    }
    fs.rmSync(work, { recursive: true, force: true });
  }

  const loads = results.flatMap((r) => r.slices.map((s) => s.loadAverage));
  const date = new Date().toISOString().slice(0, 10);
  const head = {
    date,
    store: afterLoc.dialect,
    limiter: process.env.REDIS_URL ? 'redis' : 'memory',
    beforeCommit: o.before === null ? 'none' : gitHead(o.before),
    afterCommit: gitHead(ROOT),
    cpu: machine().cpu,
    loadRange: `${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`,
  };
  const md = markdown(o, results, head) + profileMarkdown(profiled);
  const name = [date, head.store, head.limiter, `scale${scaleTag(o.scale)}`, o.responseCacheMb !== serviceSettings.responseCacheMb.default ? `stored${o.responseCacheMb}mb` : '', o.label].filter(Boolean).join('-');
  fs.mkdirSync(o.out, { recursive: true });
  fs.writeFileSync(path.join(o.out, `${name}.md`), md);
  fs.writeFileSync(path.join(o.out, `${name}.json`), `${JSON.stringify({ ...head, profiled, options: { ...o, before: o.before === null ? null : path.basename(o.before), beforeDatabaseUrl: undefined, beforeRedisUrl: undefined, out: undefined, logs: undefined, scenarios: o.scenarios.map((s) => s.name) }, results }, null, 1)}\n`);
  console.log(md);
  say(`written: ${path.relative(ROOT, path.join(o.out, `${name}.md`))}`);
  return 0;
}

runMain('bench:compare', main);
