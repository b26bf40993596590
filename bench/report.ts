/**
 * The benchmark's report: per scenario and run the raw wrk numbers, and a summary
 * (mean of the runs, their difference, the worst p99 and peak memory, the targets),
 * printed as a table and written as Markdown and JSON under bench/results/.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MAX_RSS_BYTES, ratioTarget, type Scenario } from './scenarios.js';
import { formatGc, type GcSummary } from './gc.js';
import type { Measurement } from './wrk.js';

export interface ScenarioRun {
  scenario: string;
  run: number;
  /** The median size of the scenario's answers (uncompressed), and the bare baseline's body. */
  bodyBytes: number;
  /** Statuses of the probe requests sent after the warm-up. */
  probeStatuses: Record<string, number>;
  bare: Measurement;
  api: Measurement;
  peakRssBytes: number | null;
  /** The mean records an answer holds, for scenarios that count records; else null. */
  recordsPerRequest: number | null;
  /** Bytes the server logged per request during the measured interval. */
  logBytesPerRequest: number | null;
  /**
   * The share of the measured requests that passed the access check which were answered
   * from stored answers (src/resources/cache.ts), from the server's metrics; null when it
   * stores none or nothing passed (the floods).
   */
  storedShare: number | null;
  /** The server's garbage collections while measured (its metrics); absent in reports older than this field. */
  gc?: GcSummary;
}

export interface Machine {
  cpu: string;
  cores: number;
  memoryBytes: number;
  kernel: string;
  loadAverageAtStart: number[];
}

export interface Settings {
  store: 'sqlite' | 'postgres';
  limiter: 'memory' | 'redis';
  scale: number;
  seed: number;
  workers: number;
  logLevel: string;
  /** SCHOOL_DATA_RESPONSE_CACHE_MB of the server (0: no stored answers). */
  responseCacheMb: number;
  /** NODE_OPTIONS the server runs with (its heap cap). */
  nodeOptions: string;
  connections: number;
  threads: number;
  warmupSeconds: number;
  serverWarmupSeconds: number;
  seconds: number;
  slices: number;
  runs: number;
  rateLimitVip: number;
  rateLimitProfi: number;
}

export interface Summary {
  scenario: string;
  title: string;
  rps: number;
  bareRps: number;
  ratio: number;
  /** Requests per CPU-second of the service over the same for the baseline: the ratio with the machine's other load taken out. */
  cpuRatio: number;
  /** (last run - first run) / mean, of the ratio; 0 with one run. */
  ratioDelta: number;
  rpsDelta: number;
  p50Ms: number;
  /** The worse p99 of the runs. */
  p99Ms: number;
  peakRssMb: number | null;
  bodyBytes: number;
  /** Mean of the runs' storedShare. */
  storedShare: number | null;
  /** Records a second of the service and of the baseline (same answers a second, same bytes), for scenarios that count records. */
  records: { perSecond: number; barePerSecond: number } | null;
  unexpected: number;
  failures: string[];
}

export interface Report {
  date: string;
  machine: Machine;
  node: string;
  settings: Settings;
  dataset: { location: string; totals: Record<string, number>; built: boolean; buildSeconds: number; deepOffset: number };
  runs: ScenarioRun[];
  summary: Summary[];
  wallSeconds: number;
}

export function machine(): Machine {
  return { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, memoryBytes: os.totalmem(), kernel: `${os.type()} ${os.release()}`, loadAverageAtStart: os.loadavg() };
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const delta = (xs: number[]) => (xs.length < 2 ? 0 : (xs[xs.length - 1]! - xs[0]!) / mean(xs));

/** Responses whose status was not the one the scenario expects (wrk counts statuses of 400 and up). */
export function unexpectedResponses(s: Scenario, r: Measurement, limitPerMinute: number): number {
  const transport = r.errors.connect + r.errors.read + r.errors.write + r.errors.timeout;
  if (s.expect === 200 || s.expect === 304) return r.errors.status + transport;
  // A rate-limit window lets its first requests pass: at most the limit per started minute.
  const allowedOk = s.expect === 429 ? limitPerMinute * Math.ceil(r.seconds / 60 + 1) : 0;
  return Math.max(0, r.requests - r.errors.status - allowedOk) + transport;
}

export function summarise(scenarios: Scenario[], runs: ScenarioRun[], settings: Settings): Summary[] {
  const store = settings.store;
  return scenarios
    .filter((s) => runs.some((r) => r.scenario === s.name))
    .map((s) => {
      const mine = runs.filter((r) => r.scenario === s.name);
      const rps = mine.map((r) => r.api.rps);
      const bare = mine.map((r) => r.bare.rps);
      const ratios = mine.map((r, i) => rps[i]! / bare[i]!);
      const cpuRatios = mine.map((r) => r.api.requests / r.api.cpuSeconds / (r.bare.requests / r.bare.cpuSeconds));
      const p99Ms = Math.max(...mine.map((r) => r.api.latencyMs.p99));
      const rss = mine.map((r) => r.peakRssBytes).filter((x): x is number => x !== null);
      const peakRss = rss.length > 0 ? Math.max(...rss) : null;
      const unexpected = mine.reduce((n, r) => n + unexpectedResponses(s, r.api, settings.rateLimitProfi), 0);
      const ratio = mean(ratios);
      const failures: string[] = [];
      const minRatio = ratioTarget(s.targets, store, settings.responseCacheMb);
      if (minRatio !== undefined && ratio < minRatio) failures.push(`ratio ${ratio.toFixed(2)} < ${minRatio}`);
      if (p99Ms > s.targets.p99Ms) failures.push(`p99 ${p99Ms.toFixed(1)} ms > ${s.targets.p99Ms} ms`);
      if (peakRss !== null && peakRss > MAX_RSS_BYTES) failures.push(`RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB > ${MAX_RSS_BYTES / 2 ** 20} MiB`);
      if (unexpected > 0) failures.push(`${unexpected} answers not ${s.expect}`);
      return {
        scenario: s.name,
        title: s.title,
        rps: mean(rps),
        bareRps: mean(bare),
        ratio,
        cpuRatio: mean(cpuRatios),
        ratioDelta: delta(ratios),
        rpsDelta: delta(rps),
        p50Ms: mean(mine.map((r) => r.api.latencyMs.p50)),
        p99Ms,
        peakRssMb: peakRss === null ? null : peakRss / 2 ** 20,
        bodyBytes: Math.round(mean(mine.map((r) => r.bodyBytes))),
        storedShare: mine.some((r) => r.storedShare === null) ? null : mean(mine.map((r) => r.storedShare!)),
        records: mine.some((r) => r.recordsPerRequest === null)
          ? null
          : { perSecond: mean(mine.map((r) => r.api.rps * r.recordsPerRequest!)), barePerSecond: mean(mine.map((r) => r.bare.rps * r.recordsPerRequest!)) },
        unexpected,
        failures,
      };
    });
}

const pct = (x: number) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)} %`;

function targetText(s: Scenario | undefined, settings: Settings): { ratio: string; p99: string } {
  const ratio = s && ratioTarget(s.targets, settings.store, settings.responseCacheMb);
  return { ratio: ratio === undefined ? '' : ` (>= ${ratio})`, p99: s ? ` (<= ${s.targets.p99Ms})` : '' };
}

export function markdownTable(report: Report, scenarios: Scenario[]): string {
  const byName = new Map(scenarios.map((s) => [s.name, s]));
  const lines = [
    '| scenario | req/s | bare req/s | ratio (target) | Δ runs | per CPU-s ratio | p50 ms | p99 ms (target) | peak RSS MiB | body bytes | stored answers | result |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const s of report.summary) {
    const t = targetText(byName.get(s.scenario), report.settings);
    lines.push(
      `| ${s.title} | ${s.rps.toFixed(0)} | ${s.bareRps.toFixed(0)} | ${s.ratio.toFixed(2)}${t.ratio} | ${pct(s.ratioDelta)} | ${s.cpuRatio.toFixed(2)} | ${s.p50Ms.toFixed(1)} | ${s.p99Ms.toFixed(1)}${t.p99} | ${s.peakRssMb === null ? 'n/a' : s.peakRssMb.toFixed(0)} | ${s.bodyBytes} | ${s.storedShare === null ? '' : `${(100 * s.storedShare).toFixed(0)} %`} | ${s.failures.length === 0 ? 'meets targets' : `**misses: ${s.failures.join('; ')}**`} |`,
    );
  }
  return lines.join('\n');
}

export function markdownReport(report: Report, scenarios: Scenario[]): string {
  const { settings: st, machine: m, dataset: d } = report;
  const totals = Object.entries(d.totals)
    .map(([k, v]) => `${v.toLocaleString('en-US')} ${k}`)
    .join(', ');
  const maxDelta = Math.max(0, ...report.summary.map((s) => Math.abs(s.ratioDelta)));
  return `# Benchmark ${report.date}: ${st.store}

- Machine: ${m.cpu}, ${m.cores} cores, ${(m.memoryBytes / 2 ** 30).toFixed(1)} GiB memory, ${m.kernel}; load average at start ${m.loadAverageAtStart.map((x) => x.toFixed(2)).join(' ')}
- Node ${report.node}; store ${st.store} (${d.location}); rate limiter ${st.limiter}; ${st.workers} server process${st.workers > 1 ? 'es' : ''}; log level ${st.logLevel}; stored answers ${st.responseCacheMb} MiB; NODE_OPTIONS=${st.nodeOptions}
- Data set (scale ${st.scale}, seed ${st.seed}): ${totals}; ${d.built ? `built in ${d.buildSeconds.toFixed(0)} s` : 'reused'}; deep offset ${d.deepOffset.toLocaleString('en-US')}
- Load: wrk, ${st.connections} keep-alive HTTPS connections, ${st.threads} threads; the server warmed up for ${st.serverWarmupSeconds} s with the mixed workload, then per scenario ${st.warmupSeconds} s warm-up then ${st.seconds} s measured in ${st.slices} slices alternating with the baseline, ${st.runs} run${st.runs > 1 ? 's' : ''}; VIP limit ${st.rateLimitVip}/min, Profi ${st.rateLimitProfi}/min
- Baseline: a bare node:https server (same certificate, TLS settings and Node) answering a fixed body of each scenario's median response size
- "Stored answers": the share of the requests that passed the access check answered from the server's stored answers (its metrics), the rest by querying the store
- Values are the mean of the runs; p99 and RSS are the worst run; "Δ runs" is the change of the ratio from the first run to the last (largest: ${pct(maxDelta)}); "per CPU-s ratio" compares requests per CPU-second of the server process with the baseline's
- Wall time ${(report.wallSeconds / 60).toFixed(1)} min

${markdownTable(report, scenarios)}
${recordLines(report)}${gcLines(report)}`;
}

/** Records a second of the scenarios that count them (the BI loader), under the table. */
function recordLines(report: Report): string {
  const counted = report.summary.filter((s) => s.records !== null);
  if (counted.length === 0) return '';
  const lines = counted.map((s) => `- ${s.title}: ${s.records!.perSecond.toFixed(0)} records/s (the baseline, sending answers of the same size: ${s.records!.barePerSecond.toFixed(0)})`);
  return `\nRecords a second:\n\n${lines.join('\n')}\n`;
}

/** Each run's garbage collections per scenario, under the table. */
function gcLines(report: Report): string {
  const lines = report.runs.flatMap((r) => (r.gc ? [`- ${r.scenario}, run ${r.run}: ${formatGc(r.gc, r.api.seconds)}`] : []));
  if (lines.length === 0) return '';
  return `\nThe server's garbage collection while measured (nodejs_gc_duration_seconds of its metrics; major = full collections, minor = young generation, incremental = marking steps):\n\n${lines.join('\n')}\n`;
}

export function writeReport(report: Report, scenarios: Scenario[], dir: string, name: string): { md: string; json: string } {
  fs.mkdirSync(dir, { recursive: true });
  const md = path.join(dir, `${name}.md`);
  const json = path.join(dir, `${name}.json`);
  fs.writeFileSync(md, markdownReport(report, scenarios));
  fs.writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
  return { md, json };
}
