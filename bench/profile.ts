/**
 * Reads a V8 CPU profile (node --cpu-prof) and tells where the time went: the top
 * functions by self time, and self time grouped into areas (TLS and sockets, HTTP,
 * Fastify, logging, Kysely, the database driver, the service's own code, GC).
 *
 *   node --import ./scripts/ts-resolve.mjs bench/profile.ts FILE.cpuprofile [TOP]
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  /** Milliseconds of samples, idle excluded. */
  busyMs: number;
  areas: { area: string; share: number }[];
  functions: { name: string; share: number }[];
}

const AREAS: [RegExp, string][] = [
  [/^\((garbage collector)\)/, 'GC'],
  [/node_modules\/better-sqlite3\//, 'SQLite (better-sqlite3)'],
  [/node_modules\/(pg|pg-protocol|pg-pool|pg-types)\//, 'PostgreSQL driver (pg)'],
  [/node_modules\/kysely\//, 'Kysely (query building, compiling)'],
  [/node_modules\/(pino|sonic-boom|pino-std-serializers|fast-redact|thread-stream)/, 'logging (pino)'],
  [/node_modules\/(fastify|@fastify|find-my-way|avvio|light-my-request|fast-json-stringify|fast-querystring|toad-cache|process-warning|secure-json-parse|fast-uri|rfdc|abstract-logging)/, 'Fastify (routing, hooks, serialisation)'],
  [/node_modules\/(ioredis|@ioredis|redis-parser|cluster-key-slot|denque)/, 'Redis client'],
  [/node_modules\/prom-client/, 'metrics (prom-client)'],
  [/node_modules\//, 'other packages'],
  [/node:(_tls|tls|internal\/tls|net|internal\/stream_base_commons|stream|internal\/streams|internal\/net)/, 'TLS and sockets (Node)'],
  [/node:(_http|http|https|internal\/http)/, 'HTTP (Node)'],
  [/node:/, 'other Node internals'],
  [/\/src\//, 'the service (src/)'],
  // The built program: the bundle holds Kysely's and TypeBox's code with the service's.
  [/\/dist\/bundle\//, 'the service, Kysely and TypeBox (dist/bundle/)'],
  [/\/dist\//, 'the service (dist/)'],
  [/^\(program\)/, 'native, unattributed (TLS crypto, syscalls)'],
];

function areaOf(node: ProfileNode): string {
  const key = node.callFrame.url || `(${node.callFrame.functionName.replace(/[()]/g, '')})`;
  for (const [re, area] of AREAS) if (re.test(key)) return area;
  // Native functions called from JS (crypto, zlib, the SQLite binding) carry no URL.
  return 'native, called from JS';
}

export function summariseProfile(file: string, top = 15): ProfileSummary {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const sampleMs = (profile.endTime - profile.startTime) / 1000 / Math.max(1, profile.nodes.reduce((n, x) => n + (x.hitCount ?? 0), 0));
  const areas = new Map<string, number>();
  const functions = new Map<string, number>();
  let busy = 0;
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    if (hits === 0 || node.callFrame.functionName === '(idle)') continue;
    busy += hits;
    const area = areaOf(node);
    areas.set(area, (areas.get(area) ?? 0) + hits);
    const where = node.callFrame.url ? ` ${node.callFrame.url.replace(/^.*\/(node_modules|src)\//, '$1/').replace(/^file:\/\//, '')}:${node.callFrame.lineNumber + 1}` : '';
    const name = `${node.callFrame.functionName || '(anonymous)'}${where}`;
    functions.set(name, (functions.get(name) ?? 0) + hits);
  }
  const ranked = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).map(([k, v]) => ({ k, share: v / Math.max(1, busy) }));
  return {
    busyMs: busy * sampleMs,
    areas: ranked(areas).map(({ k, share }) => ({ area: k, share })),
    functions: ranked(functions)
      .slice(0, top)
      .map(({ k, share }) => ({ name: k, share })),
  };
}

export function formatProfile(s: ProfileSummary): string {
  const pct = (x: number) => `${(100 * x).toFixed(1).padStart(5)} %`;
  return [
    `busy ${(s.busyMs / 1000).toFixed(1)} s; self time by area:`,
    ...s.areas.map((a) => `  ${pct(a.share)}  ${a.area}`),
    'top functions by self time:',
    ...s.functions.map((f) => `  ${pct(f.share)}  ${f.name}`),
  ].join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    console.error('usage: node --import ./scripts/ts-resolve.mjs bench/profile.ts FILE.cpuprofile [TOP]');
    process.exitCode = 2;
  } else {
    console.log(formatProfile(summariseProfile(file, top ? Number(top) : 25)));
  }
}
