/**
 * npm run bench [-- options]: builds (or reuses) the synthetic data set, starts the real
 * server as an operator would, and loads it with wrk scenario by scenario, each next to
 * a bare node:https baseline measured in the same run. See docs/performance.md.
 */
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { settings as serviceSettings } from '../src/config/index.js';
import { selfSignedPaths, loadTls } from '../src/tls.js';
import { ensureDataset, dropDataset, locateDataset, scaleTag, type DatasetLocation } from './dataset/load.js';
import { datasetShape, type DatasetShape } from './dataset/shape.js';
import { addGcDelta, emptyGc, formatGc } from './gc.js';
import { fetchOnce, probe, serverCounts } from './probe.js';
import { formatProfile, summariseProfile } from './profile.js';
import { machine, markdownReport, summarise, writeReport, type Report, type ScenarioRun, type Settings } from './report.js';
import { deepOffset, MIXED_SCENARIO, SCENARIOS, type BenchRequest, type Scenario } from './scenarios.js';
import { cpuSeconds, freePort, numberOption as number, PeakRss, RATE_LIMIT_PROFI, RATE_LIMIT_VIP, ROOT, runMain, SERVER_NODE_OPTIONS, serverEnv, startApiServer, startBareServer, type ApiServer, type BareServer } from './servers.js';
import { Accumulator, checkWrk, runWrk, requestLines } from './wrk.js';


const USAGE = `usage: npm run bench -- [options]

  --scale N          data set size relative to the default (1 = 1,000 schools, 500,000 students, 2M lessons)
  --quick            --scale 0.01 --runs 1 --warmup 2 --seconds 2 --slices 1: a check that everything works, in
                     under two minutes; its numbers are not comparable with a full run's
  --seconds N        measured seconds per scenario and run, for each of the service and the baseline (default 10)
  --slices N         the measured seconds are split into N alternating slices of baseline and service (default 3)
  --warmup N         warm-up seconds before each scenario (default 3)
  --server-warmup N  seconds of the mixed workload after the server starts, before any scenario (default 10)
  --runs N           runs of the whole scenario list, reported with their difference (default 2)
  --connections N    keep-alive connections (default 50)
  --threads N        wrk threads (default 2)
  --workers N        serve --workers N (more than 1 needs REDIS_URL)
  --log-level L      the server's SCHOOL_DATA_LOG_LEVEL (default info)
  --response-cache-mb N  the server's SCHOOL_DATA_RESPONSE_CACHE_MB (default the service's, ${serviceSettings.responseCacheMb.default}; 0: every
                     answer is queried, which shows the cost of the database path)
  --node-options=S   the server's V8 settings (default the production ones of docs/deployment.md:
                     "${SERVER_NODE_OPTIONS}"), to try others side by side
  --scenarios A,B    only these scenarios (${SCENARIOS.map((s) => s.name).join(', ')})
  --profile          run the server under --cpu-prof, restarted per scenario, and summarise each profile
  --rebuild          build the data set even when one of the same size exists
  --build-only       build (or check) the data set and stop
  --drop             drop the data set after the run (the PostgreSQL schema or the SQLite file)
  --out DIR          where reports go (default bench/results)

The store is SQLite unless DATABASE_URL is set (then a schema of that PostgreSQL database);
REDIS_URL, when set, is passed to the server (the Redis rate limiter).`;

interface Options extends Omit<Settings, 'store' | 'limiter' | 'rateLimitVip' | 'rateLimitProfi'> {
  scenarios: Scenario[];
  profile: boolean;
  rebuild: boolean;
  buildOnly: boolean;
  drop: boolean;
  out: string;
}

function parseOptions(argv: string[]): Options | null {
  const { values } = parseArgs({
    args: argv,
    options: {
      scale: { type: 'string' },
      quick: { type: 'boolean' },
      seconds: { type: 'string' },
      slices: { type: 'string' },
      warmup: { type: 'string' },
      'server-warmup': { type: 'string' },
      runs: { type: 'string' },
      connections: { type: 'string' },
      threads: { type: 'string' },
      workers: { type: 'string' },
      'log-level': { type: 'string' },
      'response-cache-mb': { type: 'string' },
      'node-options': { type: 'string' },
      scenarios: { type: 'string' },
      seed: { type: 'string' },
      profile: { type: 'boolean' },
      rebuild: { type: 'boolean' },
      'build-only': { type: 'boolean' },
      drop: { type: 'boolean' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) return null;
  const quick = values.quick ?? false;
  const names = values.scenarios?.split(',').map((s) => s.trim());
  const unknown = names?.filter((n) => !SCENARIOS.some((s) => s.name === n)) ?? [];
  if (unknown.length > 0) throw new Error(`unknown scenario ${unknown.join(', ')}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  const profile = values.profile ?? false;
  return {
    scale: number(values.scale, quick ? 0.01 : 1, 'scale', 0.001, 4),
    seed: number(values.seed, 1, 'seed', 0, 2 ** 31),
    seconds: number(values.seconds, quick ? 2 : 10, 'seconds', 1, 600),
    slices: number(values.slices, quick ? 1 : 3, 'slices', 1, 100),
    warmupSeconds: number(values.warmup, quick ? 2 : 3, 'warmup', 0, 600),
    serverWarmupSeconds: number(values['server-warmup'], quick ? 3 : 10, 'server-warmup', 0, 600),
    runs: number(values.runs, profile || quick ? 1 : 2, 'runs', 1, 10),
    connections: number(values.connections, 50, 'connections', 1, 10_000),
    threads: number(values.threads, 2, 'threads', 1, 64),
    workers: number(values.workers, 1, 'workers', 1, 64),
    logLevel: values['log-level'] ?? 'info',
    responseCacheMb: number(values['response-cache-mb'], serviceSettings.responseCacheMb.default, 'response-cache-mb', 0, 65_536),
    nodeOptions: values['node-options'] ?? SERVER_NODE_OPTIONS,
    scenarios: names ? SCENARIOS.filter((s) => names.includes(s.name)) : SCENARIOS,
    profile,
    rebuild: values.rebuild ?? false,
    buildOnly: values['build-only'] ?? false,
    drop: values.drop ?? false,
    out: values.out ?? path.join(ROOT, 'bench/results'),
  };
}

const say = (text: string) => process.stderr.write(`${text}\n`);


interface Context {
  options: Options;
  shape: DatasetShape;
  loc: DatasetLocation;
  ca: string;
  bare: BareServer;
  requestFiles: Map<string, { file: string; requests: BenchRequest[]; prepared: boolean }>;
  logFile: string;
}

async function startServer(ctx: Context, cpuProfileDir?: string): Promise<ApiServer> {
  const [port, cabinetPort] = [await freePort(), await freePort()];
  return startApiServer({ env: serverEnv(ctx.loc, port, cabinetPort, ctx.options), metricsUrl: `https://127.0.0.1:${cabinetPort}/metrics`, workers: ctx.options.workers, logFile: ctx.logFile, cpuProfileDir });
}

/**
 * One scenario once: warm-up, probe, then the baseline (at the probe's answer size) and
 * the service in alternating slices, so that whatever else the machine is doing meanwhile
 * weighs on both sides alike.
 */
async function runScenario(ctx: Context, server: ApiServer, scenario: Scenario, run: number): Promise<ScenarioRun> {
  const { options: o } = ctx;
  const entry = ctx.requestFiles.get(scenario.name)!;
  if (scenario.prepare && !entry.prepared) {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      entry.requests = await scenario.prepare(entry.requests, (r) => fetchOnce(server.origin, ctx.ca, agent, r));
    } finally {
      agent.destroy();
    }
    fs.writeFileSync(entry.file, requestLines(entry.requests));
    entry.prepared = true;
  }
  const { file, requests } = entry;
  const connections = scenario.connections ?? o.connections;
  const load = { requestsFile: file, connections, threads: Math.min(o.threads, connections) };
  const rss = new PeakRss(() => server.servingPids());
  rss.reset();
  if (o.warmupSeconds > 0) await runWrk({ ...load, origin: server.origin, seconds: o.warmupSeconds });
  const probed = await probe(server.origin, ctx.ca, requests);
  if (!probed.statuses[scenario.expect]) throw new Error(`${scenario.name}: expected ${scenario.expect}, the probe got ${JSON.stringify(probed.statuses)}`);

  await ctx.bare.setBodySize(probed.medianBytes);
  const bare = new Accumulator();
  const api = new Accumulator();
  const slices = Math.max(1, Math.min(o.slices, Math.floor(o.seconds)));
  const sliceSeconds = Math.max(1, Math.round(o.seconds / slices));
  let logBytes = 0;
  const stored = { hits: 0, misses: 0 };
  const gc = emptyGc();
  for (let i = 0; i < slices; i++) {
    const bareCpu = cpuSeconds([ctx.bare.pid]);
    bare.add(await runWrk({ ...load, origin: `https://127.0.0.1:${ctx.bare.port}`, seconds: sliceSeconds }), cpuSeconds([ctx.bare.pid]) - bareCpu);
    server.truncateLog();
    const before = await serverCounts(server.metricsUrl, ctx.ca);
    const apiCpu = cpuSeconds(server.servingPids());
    api.add(await runWrk({ ...load, origin: server.origin, seconds: sliceSeconds }), cpuSeconds(server.servingPids()) - apiCpu);
    const after = await serverCounts(server.metricsUrl, ctx.ca);
    stored.hits += after.stored.hits - before.stored.hits;
    stored.misses += after.stored.misses - before.stored.misses;
    addGcDelta(gc, before.gc, after.gc);
    logBytes += fs.statSync(ctx.logFile).size;
  }
  const result: ScenarioRun = {
    scenario: scenario.name,
    run,
    bodyBytes: probed.medianBytes,
    probeStatuses: probed.statuses,
    bare: bare.result(),
    api: api.result(),
    peakRssBytes: rss.read(),
    recordsPerRequest: requests.every((r) => r.records !== undefined) ? requests.reduce((n, r) => n + r.records!, 0) / requests.length : null,
    logBytesPerRequest: null,
    storedShare: stored.hits + stored.misses > 0 ? stored.hits / (stored.hits + stored.misses) : null,
    gc,
  };
  result.logBytesPerRequest = result.api.requests > 0 ? logBytes / result.api.requests : null;
  const { api: a, bare: b } = result;
  say(
    `  ${scenario.name.padEnd(20)} ${a.rps.toFixed(0).padStart(6)} req/s  bare ${b.rps.toFixed(0).padStart(6)}  ratio ${(a.rps / b.rps).toFixed(2)}  ` +
      `per CPU-s ${(a.requests / a.cpuSeconds / (b.requests / b.cpuSeconds)).toFixed(2)}  p50 ${a.latencyMs.p50.toFixed(1)} ms  p99 ${a.latencyMs.p99.toFixed(1)} ms  ` +
      `RSS ${result.peakRssBytes === null ? 'n/a' : (result.peakRssBytes / 2 ** 20).toFixed(0)} MiB  ${probed.medianBytes} B` +
      (result.storedShare === null ? '' : `  stored ${(100 * result.storedShare).toFixed(0)} %`) +
      (result.recordsPerRequest === null ? '' : `  ${(a.rps * result.recordsPerRequest).toFixed(0)} records/s`) +
      `\n  ${' '.repeat(20)} ${formatGc(gc, a.seconds)}`,
  );
  return result;
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  if (!options) {
    console.log(USAGE);
    return 0;
  }
  const started = Date.now();
  await checkWrk();
  const shape = datasetShape(options.scale, options.seed);
  const loc = locateDataset(options.scale, ROOT, process.env.DATABASE_URL);
  say(`data set: ${loc.describe}`);
  const dataset = await ensureDataset(loc, shape, options.rebuild);
  say(dataset.built ? `built in ${dataset.seconds.toFixed(0)} s` : 'reusing the stored data set (same version, scale and seed)');
  if (options.buildOnly) return 0;

  // The server generates its certificate into the data directory on first start; made
  // here first so the baseline uses the very same one.
  const tls = await loadTls({ tlsCert: null, tlsKey: null, dataDir: loc.dataDir });
  const paths = selfSignedPaths(loc.dataDir);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-bench-'));
  const requestFiles: Context['requestFiles'] = new Map();
  for (const s of options.scenarios) {
    const requests = s.requests(shape);
    const file = path.join(work, `${s.name}.txt`);
    fs.writeFileSync(file, requestLines(requests));
    requestFiles.set(s.name, { file, requests, prepared: false });
  }
  const warmupFile = path.join(work, 'server-warmup.txt');
  fs.writeFileSync(warmupFile, requestLines(MIXED_SCENARIO.requests(shape)));

  const store = loc.dialect;
  const settings: Settings = {
    store,
    limiter: process.env.REDIS_URL ? 'redis' : 'memory',
    scale: options.scale,
    seed: options.seed,
    workers: options.workers,
    logLevel: options.logLevel,
    responseCacheMb: options.responseCacheMb,
    nodeOptions: options.nodeOptions,
    connections: options.connections,
    threads: options.threads,
    warmupSeconds: options.warmupSeconds,
    serverWarmupSeconds: options.serverWarmupSeconds,
    seconds: options.seconds,
    slices: options.slices,
    runs: options.runs,
    rateLimitVip: RATE_LIMIT_VIP,
    rateLimitProfi: RATE_LIMIT_PROFI,
  };
  const runs: ScenarioRun[] = [];
  const bare = await startBareServer(paths.cert, paths.key);
  const ctx: Context = { options, shape, loc, ca: tls.cert, bare, requestFiles, logFile: path.join(loc.dataDir, 'bench-serve.log') };
  const profileDir = path.join(options.out, 'profiles');
  try {
    // The baseline's JIT warms up once, so its first scenario is not measured cold.
    await bare.setBodySize(4096);
    await runWrk({ origin: `https://127.0.0.1:${bare.port}`, requestsFile: requestFiles.values().next().value!.file, seconds: Math.max(1, options.warmupSeconds), connections: options.connections, threads: options.threads });

    if (options.profile) {
      fs.mkdirSync(profileDir, { recursive: true });
      for (const scenario of options.scenarios) {
        const dir = fs.mkdtempSync(path.join(work, 'prof-'));
        const server = await startServer(ctx, dir);
        try {
          runs.push(await runScenario(ctx, server, scenario, 1));
        } finally {
          await server.stop();
        }
        // With --workers, each worker writes a profile; the largest is a busy one.
        const file = fs.readdirSync(dir).map((f) => path.join(dir, f)).sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0];
        if (!file) throw new Error('the server wrote no CPU profile');
        const target = path.join(profileDir, `${store}-${scenario.name}.cpuprofile`);
        fs.copyFileSync(file, target);
        say(`profile of ${scenario.name} (${path.relative(ROOT, target)}):\n${formatProfile(summariseProfile(target, 15))}\n`);
      }
    } else {
      const server = await startServer(ctx);
      say(`server ${server.origin} (${options.workers} process${options.workers > 1 ? 'es' : ''}, log level ${options.logLevel}); baseline https://127.0.0.1:${bare.port}`);
      try {
        // A fresh server has cold JIT and cold caches: the mixed workload first, unmeasured,
        // so that the first scenario of the first run is not the one that pays for it.
        if (options.serverWarmupSeconds > 0) {
          say(`warming the server up for ${options.serverWarmupSeconds} s (mixed workload, not measured)`);
          await runWrk({ origin: server.origin, requestsFile: warmupFile, seconds: options.serverWarmupSeconds, connections: options.connections, threads: options.threads });
        }
        for (let run = 1; run <= options.runs; run++) {
          say(`run ${run} of ${options.runs}:`);
          for (const scenario of options.scenarios) runs.push(await runScenario(ctx, server, scenario, run));
        }
      } finally {
        await server.stop();
      }
    }
  } finally {
    await bare.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }

  const date = new Date().toISOString().slice(0, 10);
  const report: Report = {
    date,
    machine: machine(),
    node: process.version,
    settings,
    dataset: { location: loc.describe, totals: shape.totals, built: dataset.built, buildSeconds: dataset.seconds, deepOffset: deepOffset(shape) },
    runs,
    summary: summarise(options.scenarios, runs, settings),
    wallSeconds: (Date.now() - started) / 1000,
  };
  const suffix = [
    options.scale !== 1 ? `-scale${scaleTag(options.scale)}` : '',
    options.workers !== 1 ? `-workers${options.workers}` : '',
    options.logLevel !== 'info' ? `-${options.logLevel}` : '',
    options.responseCacheMb !== serviceSettings.responseCacheMb.default ? `-stored${options.responseCacheMb}mb` : '',
    options.nodeOptions !== SERVER_NODE_OPTIONS ? `-v8${options.nodeOptions.replace(/--|max-|-size|[^a-z0-9]/gi, '')}` : '',
    options.profile ? '-profiled' : '',
  ].join('');
  const written = writeReport(report, options.scenarios, options.out, `${date}-${store}${suffix}`);
  console.log(markdownReport(report, options.scenarios));
  say(`written: ${path.relative(ROOT, written.md)}, ${path.relative(ROOT, written.json)}`);
  if (options.drop) {
    await dropDataset(loc);
    say(`dropped the data set (${loc.describe})`);
  }
  return report.summary.every((s) => s.unexpected === 0) ? 0 : 1;
}

runMain('bench', main);
