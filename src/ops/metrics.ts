/**
 * Prometheus metrics of the public API. Every label value comes from a bounded set:
 * the route pattern a request matched (or "unmatched"), the status code, the kind
 * of a connection-level error. Never a raw URL, a key or a school id, so the number
 * of series stays small however hostile the traffic is.
 */
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
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

  /** The text exposition of the API's metrics and the process's. */
  async exposition(): Promise<string> {
    return (await this.registry.metrics()) + (await processMetrics().metrics());
  }

  readonly contentType = this.registry.contentType;
}
