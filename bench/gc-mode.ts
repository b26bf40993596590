/**
 * How often a freshly started server falls into constant full collections (the "high"
 * state of docs/performance.md): a state a process may enter at start and keep for its
 * lifetime, so one comparison run cannot tell how often it happens. Starts each build's
 * server again and again (in turns), loads one scenario under --trace-gc and counts the
 * full collections; a start with at least one every two seconds is counted as in the state.
 *
 *   npm run bench:gc-mode -- [--before DIR] [--starts N] [--scenario NAME]
 *        [--seconds N] [--response-cache-mb N]
 *
 * Both builds need `npm run build` and their data set (`npm run bench -- --build-only
 * --scale 0.1`); the store is SQLite unless DATABASE_URL is set (both builds then read
 * its data set), the Redis limiter when REDIS_URL is.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { locateDataset } from './dataset/load.js';
import { datasetShape } from './dataset/shape.js';
import { SCENARIOS } from './scenarios.js';
import { cpuSeconds, freePort, numberOption, ROOT, serverEnv, SERVER_NODE_OPTIONS, startApiServer } from './servers.js';
import { checkWrk, requestLines, runWrk } from './wrk.js';

const SCALE = 0.1;
/** Full collections a second from which a start counts as in the state (normal runs do 0.1-0.3). */
const STATE_PER_SECOND = 0.5;

const { values } = parseArgs({
  options: {
    before: { type: 'string' },
    starts: { type: 'string' },
    scenario: { type: 'string', default: 'students-page' },
    seconds: { type: 'string' },
    'response-cache-mb': { type: 'string' },
  },
});
const starts = numberOption(values.starts, 10, '--starts', 1, 1000);
const seconds = numberOption(values.seconds, 14, '--seconds', 1, 600);
const cacheMb = numberOption(values['response-cache-mb'], 0, '--response-cache-mb', 0, 4096);
const scenario = SCENARIOS.find((s) => s.name === values.scenario);
if (!scenario) throw new Error(`unknown scenario ${values.scenario}; one of ${SCENARIOS.map((s) => s.name).join(', ')}`);
const roots = values.before ? [path.resolve(values.before), ROOT] : [ROOT];
await checkWrk();

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'gc-mode-'));
const requests = path.join(work, 'requests.txt');
fs.writeFileSync(requests, requestLines(scenario.requests(datasetShape(SCALE, 1))));
const fullCollections = (file: string) => fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.includes('Mark-Compact')).length;
const inState = new Map<string, number>(roots.map((r) => [r, 0]));

for (let i = 1; i <= starts; i++) {
  for (const root of i % 2 === 1 ? roots : [...roots].reverse()) {
    const [port, cabinetPort] = [await freePort(), await freePort()];
    const logFile = path.join(work, 'server.log');
    const env = serverEnv(locateDataset(SCALE, root, process.env.DATABASE_URL), port, cabinetPort, { logLevel: 'warn', responseCacheMb: cacheMb, nodeOptions: SERVER_NODE_OPTIONS }, process.env.REDIS_URL);
    const server = await startApiServer({ env, workers: 1, logFile, metricsUrl: `https://127.0.0.1:${cabinetPort}/metrics`, nodeArgs: ['--trace-gc'], root });
    try {
      const load = { origin: server.origin, requestsFile: requests, connections: 50, threads: 2 };
      await runWrk({ ...load, seconds: 3 });
      const before = fullCollections(logFile);
      const pid = server.servingPids()[0]!;
      const cpu = cpuSeconds([pid]);
      const r = await runWrk({ ...load, seconds });
      const usedUs = (cpuSeconds([pid]) - cpu) * 1e6;
      const full = fullCollections(logFile) - before;
      const state = full / seconds >= STATE_PER_SECOND;
      if (state) inState.set(root, inState.get(root)! + 1);
      process.stdout.write(`${root} start ${i}: ${full} full collections in ${seconds} s${state ? ' (the state)' : ''}, ${Math.round(r.requests / (r.duration_us / 1e6))} req/s, ${(usedUs / r.requests).toFixed(1)} CPU µs/req\n`);
    } finally {
      await server.stop();
    }
  }
}
for (const [root, n] of inState) process.stdout.write(`${root}: ${n} of ${starts} starts in constant full collections (${scenario.name}, stored answers ${cacheMb} MiB)\n`);
fs.rmSync(work, { recursive: true, force: true });
