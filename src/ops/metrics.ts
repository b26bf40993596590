/**
 * Prometheus metrics of the public API. Every label value comes from a bounded set:
 * the route pattern a request matched (or "unmatched"), the status code, the kind
 * of a connection-level error. Never a raw URL, a key or a school id, so the number
 * of series stays small however hostile the traffic is.
 */
import cluster from 'node:cluster';
import { randomUUID } from 'node:crypto';
import { AggregatorRegistry, collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import type { ClientErrorKind } from '../problems/handlers.js';

/** The route label of requests that matched no route (404s, undecodable paths). */
export const UNMATCHED_ROUTE = 'unmatched';

/** Records one answered request: its status and its time in milliseconds. */
export type ResponseRecorder = (status: number, elapsedMs: number) => void;

let processRegistry: Registry | null = null;

/**
 * Process metrics (CPU, memory, event loop, handles) are one set per process, so they
 * live in one registry shared by every app the process builds (tests build many).
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

let processApiMetrics: ApiMetrics | null = null;

export class ApiMetrics {
  /**
   * The process's instance: the API app records into it and the cabinet's /metrics
   * serves it, unless each is given another (tests give their own).
   */
  static forProcess(): ApiMetrics {
    processApiMetrics ??= new ApiMetrics();
    return processApiMetrics;
  }

  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: 'school_data_http_requests_total',
    help: 'Answered API requests by route pattern and status code',
    labelNames: ['route', 'status'] as const,
    registers: [this.registry],
  });
  private readonly duration = new Histogram({
    name: 'school_data_http_request_duration_seconds',
    help: 'Time from the request arriving to the response being sent, by route pattern',
    labelNames: ['route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  private readonly clientErrors = new Counter({
    name: 'school_data_http_client_errors_total',
    help: 'Connections ended by the HTTP or TLS layer before the app: failed TLS handshakes, unparsable requests, oversized headers, timeouts',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  /**
   * A recorder bound to one route label, made once when the route is registered: the
   * per-request work is then a lookup of the status's counter and two increments.
   */
  recorderFor(route: string): ResponseRecorder {
    const timer = this.duration.labels({ route });
    const byStatus = new Map<number, Counter.Internal>();
    return (status, elapsedMs) => {
      let counter = byStatus.get(status);
      if (!counter) {
        counter = this.requests.labels({ route, status: String(status) });
        byStatus.set(status, counter);
      }
      counter.inc();
      timer.observe(elapsedMs / 1000);
    };
  }

  clientError(kind: ClientErrorKind): void {
    this.clientErrors.inc({ kind });
  }

  /**
   * The text exposition of the API's metrics and the process's. In a worker of
   * `serve --workers N` (see shareWithCluster) it is the whole service's: every worker's
   * counts summed, whichever worker the scrape reached.
   */
  async exposition(): Promise<string> {
    if (this.clustered) return clusterExposition();
    return (await this.registry.metrics()) + (await processMetrics().metrics());
  }

  private clustered = false;

  /**
   * Called once in each worker of `serve --workers N`: the worker answers the primary's
   * requests for its metrics, and its /metrics asks the primary for the sum of all
   * workers' (a scrape reaches one worker at random, whose own counts alone would be a
   * fraction of the service's, and a different fraction each time).
   */
  shareWithCluster(): void {
    if (!cluster.isWorker) return;
    // Constructing one installs prom-client's listener for the primary's requests.
    new AggregatorRegistry();
    AggregatorRegistry.setRegistries([this.registry, processMetrics()]);
    process.on('message', onAnswer);
    this.clustered = true;
  }

  readonly contentType = this.registry.contentType;
}

const METRICS_REQUEST = 'school-data:metrics-request';
const METRICS_ANSWER = 'school-data:metrics-answer';
/** How long a worker waits for the primary's sum (prom-client gives workers 5 s to answer). */
const CLUSTER_TIMEOUT_MS = 6000;

interface MetricsRequest {
  type: typeof METRICS_REQUEST;
  id: string;
}
interface MetricsAnswer {
  type: typeof METRICS_ANSWER;
  id: string;
  text?: string;
  error?: string;
}

const pendingAnswers = new Map<string, (answer: MetricsAnswer) => void>();

/** Thrown when the primary does not give the cluster's metrics; /metrics answers 503. */
export class ClusterMetricsUnavailable extends Error {
  override name = 'ClusterMetricsUnavailable';
}

/** A worker asks the primary for every worker's metrics, summed. */
function clusterExposition(): Promise<string> {
  const id = randomUUID();
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => settle({ type: METRICS_ANSWER, id, error: 'no answer from the primary' }), CLUSTER_TIMEOUT_MS);
    function settle(answer: MetricsAnswer) {
      clearTimeout(timer);
      pendingAnswers.delete(id);
      if (answer.text !== undefined) resolve(answer.text);
      else reject(new ClusterMetricsUnavailable(answer.error ?? 'no metrics'));
    }
    pendingAnswers.set(id, settle);
    process.send!({ type: METRICS_REQUEST, id } satisfies MetricsRequest);
  });
}

function onAnswer(message: unknown): void {
  const answer = message as Partial<MetricsAnswer> | null;
  if (answer?.type === METRICS_ANSWER && typeof answer.id === 'string') pendingAnswers.get(answer.id)?.(answer as MetricsAnswer);
}

/**
 * In the primary of `serve --workers N`: answers a worker's request for the service's
 * metrics with prom-client's sum over every live worker (counters and histogram buckets
 * added; process gauges added too, so memory is the service's total).
 */
export function serveClusterMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, message: Partial<MetricsRequest> | null) => {
    if (message?.type !== METRICS_REQUEST || typeof message.id !== 'string') return;
    const id = message.id;
    aggregator.clusterMetrics().then(
      (text) => worker.isConnected() && worker.send({ type: METRICS_ANSWER, id, text } satisfies MetricsAnswer),
      (err: unknown) => worker.isConnected() && worker.send({ type: METRICS_ANSWER, id, error: String(err) } satisfies MetricsAnswer),
    );
  });
}
