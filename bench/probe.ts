/**
 * A few requests of a scenario sent one by one before it is measured: they check that
 * the answers have the expected status and give the size of a typical answer, which
 * the bare baseline then sends.
 */
import https from 'node:https';
import { gcFromMetrics, metricValue, type GcSummary } from './gc.js';
import type { BenchRequest } from './scenarios.js';

export interface ProbeResult {
  statuses: Record<string, number>;
  medianBytes: number;
}

function get(origin: string, ca: string, agent: https.Agent, r: BenchRequest): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const request = https.get(new URL(r.path, origin), { ca, agent, headers: r.key ? { Authorization: `Bearer ${r.key}` } : {} }, (response) => {
      let bytes = 0;
      response.on('data', (chunk: Buffer) => (bytes += chunk.length));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, bytes }));
      response.on('error', reject);
    });
    request.on('error', reject);
  });
}

/** Sends up to `count` requests spread evenly over the list. */
export async function probe(origin: string, ca: string, requests: BenchRequest[], count = 25): Promise<ProbeResult> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const step = Math.max(1, Math.floor(requests.length / count));
    const statuses: Record<string, number> = {};
    const sizes: number[] = [];
    for (let i = 0; i < requests.length && sizes.length < count; i += step) {
      const { status, bytes } = await get(origin, ca, agent, requests[i]!);
      statuses[status] = (statuses[status] ?? 0) + 1;
      sizes.push(bytes);
    }
    sizes.sort((a, b) => a - b);
    return { statuses, medianBytes: sizes[Math.floor(sizes.length / 2)] ?? 0 };
  } finally {
    agent.destroy();
  }
}

/**
 * What the bench reads from the server's metrics around a slice, cumulative and summed over
 * its workers: stored-answer lookups (school_data_stored_answer_lookups_total) and GC.
 */
interface ServerCounts {
  stored: { hits: number; misses: number };
  gc: GcSummary;
}

export function serverCounts(metricsUrl: string, ca: string): Promise<ServerCounts> {
  return new Promise((resolve, reject) => {
    const request = https.get(metricsUrl, { ca }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => {
        const count = (result: string) => metricValue(text, `school_data_stored_answer_lookups_total\\{result="${result}"\\}`);
        if (response.statusCode !== 200) reject(new Error(`${metricsUrl}: ${response.statusCode}`));
        else resolve({ stored: { hits: count('hit'), misses: count('miss') }, gc: gcFromMetrics(text) });
      });
      response.on('error', reject);
    });
    request.on('error', reject);
  });
}
