/**
 * The operator's endpoints, for the cabinet listener (never the public API's):
 *
 *   GET /healthz  liveness: 200 whenever the process answers at all
 *   GET /readyz   readiness: the data store and the rate limiter answer now, else 503
 *                 naming the part that did not
 *   GET /metrics  Prometheus text format: the API's request counts and latencies, and
 *                 process metrics
 *
 * A load balancer should route by /readyz (an instance whose stores are unreachable
 * answers every API request with 503) and restart by /healthz.
 */
import type { FastifyPluginCallback } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { ClusterMetricsUnavailable, type ApiMetrics } from './metrics.js';

/** A store that can say whether it answers now (the rate limiter is one). */
export interface Pingable {
  ping(): Promise<boolean>;
}

export interface OpsOptions {
  /** The metrics the API app records into (the same instance passed to buildApp). */
  metrics: ApiMetrics;
  db: Kysely<Database>;
  limiter: Pingable;
  /** Each readiness check gives up after this long (use SCHOOL_DATA_DB_TIMEOUT_MS). */
  checkTimeoutMs: number;
}

type CheckResult = 'ok' | 'unavailable';

export interface Readiness {
  status: 'ready' | 'not_ready';
  checks: { database: CheckResult; rate_limiter: CheckResult };
}

/** Runs `check`, turning a failure, a false or no answer within `ms` into 'unavailable'. */
async function probe(check: () => Promise<boolean>, ms: number): Promise<CheckResult> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return (await Promise.race([check(), timeout])) ? 'ok' : 'unavailable';
  } catch {
    return 'unavailable';
  } finally {
    clearTimeout(timer);
  }
}

/** Whether the data store answers a read of a table (on SQLite a `select 1` reads no page of the file); throws when it does not. */
export async function storeAnswers(db: Kysely<Database>): Promise<boolean> {
  await db.selectFrom('schools').select('id').limit(1).execute();
  return true;
}

export async function readiness(opts: Pick<OpsOptions, 'db' | 'limiter' | 'checkTimeoutMs'>): Promise<Readiness> {
  const [database, rateLimiter] = await Promise.all([
    probe(() => storeAnswers(opts.db), opts.checkTimeoutMs),
    probe(() => opts.limiter.ping(), opts.checkTimeoutMs),
  ]);
  const ready = database === 'ok' && rateLimiter === 'ok';
  return { status: ready ? 'ready' : 'not_ready', checks: { database, rate_limiter: rateLimiter } };
}

/** Registers /healthz, /readyz and /metrics on the instance it is registered in. */
export const opsPlugin: FastifyPluginCallback<OpsOptions> = (app, opts, done) => {
  const noStore = { 'Cache-Control': 'no-store' };

  app.get('/healthz', async (_request, reply) => {
    reply.headers(noStore);
    return { status: 'ok' };
  });

  // Logged when readiness changes, not at every probe: a load balancer asks every few
  // seconds, and an outage is logged by its dependency (dependency.ts).
  let lastStatus: Readiness['status'] = 'ready';
  app.get('/readyz', async (request, reply) => {
    const result = await readiness(opts);
    if (result.status !== lastStatus) {
      lastStatus = result.status;
      if (result.status === 'ready') request.log.info('ready again');
      else request.log.warn({ checks: result.checks }, 'not ready');
    }
    return reply.code(result.status === 'ready' ? 200 : 503).headers(noStore).send(result);
  });

  app.get('/metrics', async (request, reply) => {
    let text;
    try {
      text = await opts.metrics.exposition();
    } catch (err) {
      if (!(err instanceof ClusterMetricsUnavailable)) throw err;
      // A partial sum would look like a drop in traffic: better no sample than a wrong one.
      request.log.warn({ err }, 'cluster metrics unavailable');
      return reply.code(503).headers({ ...noStore, 'Retry-After': '5' }).type('text/plain; charset=utf-8').send('the workers\' metrics could not be collected; try again\n');
    }
    return reply.headers(noStore).type(opts.metrics.contentType).send(text);
  });
  done();
};
