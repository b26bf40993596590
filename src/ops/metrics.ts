/**
 * Prometheus metrics of the public API. Every label value comes from a bounded set:
 * the route pattern a request matched (or "unmatched"), the status code, the kind
 * of a connection-level error. Never a raw URL, a key or a school id, so the number
 * of series stays small however hostile the traffic is.
 */
import cluster from 'node:cluster';
import { randomUUID } from 'node:crypto';
import { AggregatorRegistry, collectDefaultMetrics, Counter, Registry, type Metric } from 'prom-client';
import type { DependencyState } from './dependency.js';

/** The route label of requests that matched no route (404s, undecodable paths). */
export const UNMATCHED_ROUTE = 'unmatched';

/** What the stored answers hold and have served. */
interface StoredAnswerCounts {
  hits: number;
  misses: number;
  /** Pages cut from a list kept whole (each a miss of its own stored answer). */
  cuts: number;
  /** Reads of a list to keep it whole that failed. */
  runReadFailures: number;
  bytes: number;
}

/** How a connection-level failure is counted: one the app never saw as a request. */
export type ClientErrorKind = 'tls' | 'header_overflow' | 'timeout' | 'malformed';

/** The HTTPS listeners, as the client errors' `listener` label names them. */
export type ListenerName = 'api' | 'cabinet';

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

/** Upper bounds (seconds) of the request duration histogram's buckets. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface RouteCounts {
  byStatus: Map<number, number>;
  /** Observations per bucket (not cumulative); the +Inf bucket is `count`. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

interface MetricValue {
  metricName?: string;
  labels: Record<string, string | number>;
  value: number;
}

/**
 * A metric in the shape prom-client's Registry reads (`get()`), whose values are made
 * at each scrape from numbers the service keeps. Summed across workers like prom-client's
 * own counters and histograms.
 */
function metricOf(name: string, help: string, type: 'counter' | 'gauge' | 'histogram', values: () => MetricValue[]): Metric {
  const metric = { name, help, type, aggregator: 'sum', get: () => Promise.resolve({ name, help, type, aggregator: 'sum', values: values() }) };
  return metric as unknown as Metric;
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
  /** Per route label: its answers' counts by status and its duration histogram, kept as plain numbers. */
  private readonly routes = new Map<string, RouteCounts>();
  private readonly clientErrors = new Counter({
    name: 'school_data_http_client_errors_total',
    help: 'Connections ended by the HTTP or TLS layer before the app: failed TLS handshakes, unparsable requests, oversized headers, timeouts',
    labelNames: ['kind', 'listener'] as const,
    registers: [this.registry],
  });

  /** The dependencies whose outages refuse requests (dependency.ts), for the refusals by cause. */
  private dependencies: readonly DependencyState[] = [];

  /** What the stored answers of the app recording here hold and served (src/resources/cache.ts). */
  private storedAnswers: () => StoredAnswerCounts = () => ({ hits: 0, misses: 0, cuts: 0, runReadFailures: 0, bytes: 0 });

  constructor() {
    // prom-client reads these two at each scrape (Registry and the cluster aggregation call
    // get()); a request only adds to numbers. prom-client's own Counter and Histogram hash
    // their label values on every increment, which under load cost more than the rest of a
    // refused request's bookkeeping (docs/performance.md).
    const routes = this.routes;
    this.registry.registerMetric(metricOf('school_data_http_requests_total', 'Answered API requests by route pattern and status code', 'counter', () => {
      const values: MetricValue[] = [];
      for (const [route, counts] of routes) for (const [status, value] of counts.byStatus) values.push({ labels: { route, status }, value });
      return values;
    }));
    this.registry.registerMetric(metricOf('school_data_http_request_duration_seconds', 'Time from the request arriving to the response being sent, by route pattern', 'histogram', () => {
      const name = 'school_data_http_request_duration_seconds';
      const values: MetricValue[] = [];
      for (const [route, counts] of routes) {
        let cumulative = 0;
        DURATION_BUCKETS.forEach((le, i) => {
          cumulative += counts.buckets[i]!;
          values.push({ metricName: `${name}_bucket`, labels: { le, route }, value: cumulative });
        });
        values.push({ metricName: `${name}_bucket`, labels: { le: '+Inf', route }, value: counts.count });
        values.push({ metricName: `${name}_sum`, labels: { route }, value: counts.sum });
        values.push({ metricName: `${name}_count`, labels: { route }, value: counts.count });
      }
      return values;
    }));
    this.registry.registerMetric(metricOf('school_data_stored_answer_lookups_total', 'Lookups of a stored API answer (docs/operations.md, "Request path and stored answers"), by whether one was found', 'counter', () => {
      const { hits, misses } = this.storedAnswers();
      return [{ labels: { result: 'hit' }, value: hits }, { labels: { result: 'miss' }, value: misses }];
    }));
    this.registry.registerMetric(metricOf('school_data_stored_list_cuts_total', 'API list pages cut from a list kept whole with the stored answers, not queried (each also a missed lookup)', 'counter', () => [
      { labels: {}, value: this.storedAnswers().cuts },
    ]));
    this.registry.registerMetric(metricOf('school_data_stored_list_read_failures_total', 'Reads of a whole list to keep with the stored answers that failed (the page asked for was then queried)', 'counter', () => [
      { labels: {}, value: this.storedAnswers().runReadFailures },
    ]));
    this.registry.registerMetric(metricOf('school_data_stored_answer_bytes', 'Memory held by stored API answers (SCHOOL_DATA_RESPONSE_CACHE_MB bounds it)', 'gauge', () => [
      { labels: {}, value: this.storedAnswers().bytes },
    ]));
    this.registry.registerMetric(metricOf('school_data_refused_requests_total', 'API requests answered 503 because a dependency did not answer, by cause (the problem code)', 'counter', () => {
      const byCause = new Map<string, number>([['data_unavailable', 0], ['rate_limit_unavailable', 0]]);
      for (const d of this.dependencies) byCause.set(d.cause, (byCause.get(d.cause) ?? 0) + d.refusedTotal);
      return [...byCause].map(([cause, value]) => ({ labels: { cause }, value }));
    }));
  }

  /** Reports the refusals counted by these dependencies (the app's data store and rate limiter). */
  watchDependencies(dependencies: readonly DependencyState[]): void {
    this.dependencies = dependencies;
  }

  /** Reports the stored answers of `source` (the app's; one per process outside tests). */
  watchStoredAnswers(source: () => StoredAnswerCounts): void {
    this.storedAnswers = source;
  }

  /**
   * A recorder bound to one route label, made once when the route is registered: the
   * per-request work is then a few additions to plain numbers.
   */
  recorderFor(route: string): ResponseRecorder {
    let counts = this.routes.get(route);
    if (counts === undefined) {
      counts = { byStatus: new Map(), buckets: new Float64Array(DURATION_BUCKETS.length), sum: 0, count: 0 };
      this.routes.set(route, counts);
    }
    const c = counts;
    return (status, elapsedMs) => {
      c.byStatus.set(status, (c.byStatus.get(status) ?? 0) + 1);
      const seconds = elapsedMs / 1000;
      c.sum += seconds;
      c.count += 1;
      for (let i = 0; i < DURATION_BUCKETS.length; i++) {
        if (seconds <= DURATION_BUCKETS[i]!) {
          c.buckets[i]! += 1;
          break;
        }
      }
    };
  }

  /** A connection ended by the TLS or HTTP layer of the API's listener or of the cabinet's. */
  clientError(kind: ClientErrorKind, listener: ListenerName): void {
    this.clientErrors.inc({ kind, listener });
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
