/**
 * Load from wrk (Debian package `wrk`): a C load generator that leaves the shared
 * cores to the server, with a Lua script (wrk/requests.lua) that sends a list of
 * requests, each with its own key and path, and prints its counts and its latency
 * histogram as one JSON line. Several wrk runs merge into one measurement with exact
 * percentiles.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import type { BenchRequest } from './scenarios.js';
import { ROOT } from './servers.js';

export interface WrkErrors {
  connect: number;
  read: number;
  write: number;
  /** Responses with a status of 400 or more. */
  status: number;
  timeout: number;
}

interface WrkResult {
  requests: number;
  duration_us: number;
  bytes: number;
  errors: WrkErrors;
  /** value (µs), count, value, count ... */
  histogram: number[];
}

export interface WrkOptions {
  origin: string;
  requestsFile: string;
  seconds: number;
  connections: number;
  threads: number;
}

/** One side (the service or the baseline) of a scenario, over all its slices. */
export interface Measurement {
  requests: number;
  seconds: number;
  rps: number;
  bytes: number;
  errors: WrkErrors;
  latencyMs: { mean: number; p50: number; p90: number; p99: number; p999: number; max: number };
  /** CPU seconds the server processes used while loaded (user + system). */
  cpuSeconds: number;
}

const SCRIPT = path.join(ROOT, 'bench/wrk/requests.lua');

/** The request list as wrk's script reads it: key, path and an optional entity tag per line. */
export const requestLines = (requests: BenchRequest[]) => requests.map((r) => `${r.key}\t${r.path}${r.ifNoneMatch ? `\t${r.ifNoneMatch}` : ''}\n`).join('');

export function checkWrk(): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('wrk', ['--version'], (err) => {
      // wrk --version exits with 1 after printing its version; only a missing binary is an error.
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') reject(new Error('wrk is not installed: apt-get install -y wrk'));
      else resolve();
    });
  });
}

export function runWrk(o: WrkOptions): Promise<WrkResult> {
  const args = ['-t', String(o.threads), '-c', String(o.connections), '-d', `${o.seconds}s`, '--timeout', '30s', '-s', SCRIPT, o.origin, '--', o.requestsFile];
  return new Promise((resolve, reject) => {
    execFile('wrk', args, { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`wrk failed: ${err.message}\n${stderr}`));
      const line = stdout.split('\n').find((l) => l.startsWith('{"requests"'));
      if (!line) return reject(new Error(`wrk printed no result:\n${stdout}\n${stderr}`));
      resolve(JSON.parse(line) as WrkResult);
    });
  });
}

/** Collects the slices of one side of a scenario. */
export class Accumulator {
  private readonly counts = new Map<number, number>();
  private requests = 0;
  private micros = 0;
  private bytes = 0;
  private cpuSeconds = 0;
  private readonly errors: WrkErrors = { connect: 0, read: 0, write: 0, status: 0, timeout: 0 };

  add(r: WrkResult, cpuSeconds: number): void {
    this.requests += r.requests;
    this.micros += r.duration_us;
    this.bytes += r.bytes;
    this.cpuSeconds += cpuSeconds;
    for (const k of Object.keys(this.errors) as (keyof WrkErrors)[]) this.errors[k] += r.errors[k];
    for (let i = 0; i + 1 < r.histogram.length; i += 2) {
      const value = r.histogram[i]!;
      this.counts.set(value, (this.counts.get(value) ?? 0) + r.histogram[i + 1]!);
    }
  }

  result(): Measurement {
    const values = [...this.counts.keys()].sort((a, b) => a - b);
    const total = values.reduce((n, v) => n + this.counts.get(v)!, 0);
    const sum = values.reduce((s, v) => s + v * this.counts.get(v)!, 0);
    const percentile = (p: number) => {
      const rank = Math.ceil((p / 100) * total);
      let seen = 0;
      for (const v of values) {
        seen += this.counts.get(v)!;
        if (seen >= rank) return v / 1000;
      }
      return (values[values.length - 1] ?? 0) / 1000;
    };
    const seconds = this.micros / 1e6;
    return {
      requests: this.requests,
      seconds,
      rps: this.requests / Math.max(seconds, 1e-9),
      bytes: this.bytes,
      errors: { ...this.errors },
      latencyMs: {
        mean: total > 0 ? sum / total / 1000 : 0,
        p50: percentile(50),
        p90: percentile(90),
        p99: percentile(99),
        p999: percentile(99.9),
        max: (values[values.length - 1] ?? 0) / 1000,
      },
      cpuSeconds: this.cpuSeconds,
    };
  }
}
