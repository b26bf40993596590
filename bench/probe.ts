/**
 * A few requests of a scenario sent one by one before it is measured: they check that
 * the answers have the expected status and give the size of a typical answer, which
 * the bare baseline then sends. fetchOnce also serves scenarios that are made from the
 * server's own answers (entity tags, cursors).
 */
import https from 'node:https';
import { gcFromMetrics, metricValue, type GcSummary } from './gc.js';
import type { BenchRequest } from './scenarios.js';

export interface ProbeResult {
  statuses: Record<string, number>;
  medianBytes: number;
}

export interface Fetched {
  status: number;
  bytes: number;
  etag: string | undefined;
  body: Buffer;
}

/** One request of a scenario, as wrk sends it (no Accept-Encoding: the identity body). */
export function fetchOnce(origin: string, ca: string, agent: https.Agent, r: BenchRequest): Promise<Fetched> {
  const headers: Record<string, string> = {};
  if (r.key) headers.Authorization = `Bearer ${r.key}`;
  if (r.ifNoneMatch) headers['If-None-Match'] = r.ifNoneMatch;
  return new Promise((resolve, reject) => {
    const request = https.get(new URL(r.path, origin), { ca, agent, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const body = Buffer.concat(chunks);
        const etag = response.headers.etag;
        resolve({ status: response.statusCode ?? 0, bytes: body.length, etag, body });
      });
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
      const { status, bytes } = await fetchOnce(origin, ca, agent, requests[i]!);
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
 * A page cut from a list kept whole (school_data_stored_list_cuts_total) was answered from
 * memory: it counts as a hit, not as the miss its own answer's lookup was.
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
        const cuts = metricValue(text, 'school_data_stored_list_cuts_total');
        if (response.statusCode !== 200) reject(new Error(`${metricsUrl}: ${response.statusCode}`));
        else resolve({ stored: { hits: count('hit') + cuts, misses: count('miss') - cuts }, gc: gcFromMetrics(text) });
      });
      response.on('error', reject);
    });
    request.on('error', reject);
  });
}
