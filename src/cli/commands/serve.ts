/**
 * `serve`: one process, or with --workers N a primary that prepares once (schema,
 * certificate) and forks N workers sharing the listening ports. Workers share no
 * memory, so more than one requires the Redis rate limiter.
 */
import cluster from 'node:cluster';
import v8 from 'node:v8';
import { localUrlHost, type Config } from '../../config/index.js';
import { createLogger, LineBatcher } from '../../logger.js';
import { ApiMetrics, serveClusterMetrics } from '../../ops/metrics.js';
import { closeOnSignal, startServer, StopSignals } from '../../server.js';
import { loadTls } from '../../tls.js';
import { CliError, RUN, upgradeStore, withStore, type CommandContext } from '../context.js';

/** Log lines go to stderr with --json, so stdout holds the one JSON value the command prints. */
const logsFor = (ctx: CommandContext) => createLogger(ctx.config, ctx.out.json ? LineBatcher.stderr() : LineBatcher.stdout());

/** The start banner's line for a database with no school yet. */
const NO_SCHOOLS = `no schools yet: load the demo with "${RUN} demo", or add one with "${RUN} school create" and "${RUN} import" (README, "Command line")`;

export async function serveCommand(ctx: CommandContext, opts: { workers?: string } = {}): Promise<number> {
  // Decimal digits only, as every other number the program reads (Number() takes 1e1, 0x4, " 4 ").
  const workers = opts.workers === undefined ? 1 : /^[0-9]{1,2}$/.test(opts.workers) ? Number(opts.workers) : NaN;
  if (!Number.isInteger(workers) || workers < 1 || workers > 64) throw new CliError('--workers must be an integer from 1 to 64');
  if (workers > 1 && !ctx.config.redisUrl) {
    throw new CliError('--workers above 1 needs REDIS_URL: in-memory rate limits would not be shared between workers');
  }
  if (cluster.isPrimary && workers > 1) return runPrimary(ctx, workers);
  return runServer(ctx, cluster.isWorker);
}

/**
 * Brings the store up to date before anything listens, waiting for another writer's lock as
 * the other commands do (on SQLite an import's merge holds it for minutes), where the serving
 * store would give up after SCHOOL_DATA_DB_TIMEOUT_MS: a start during an import that must
 * rebuild waits for it, saying so once.
 */
const upgradeBeforeServing = (config: Config) => withStore(config, () => Promise.resolve());

/**
 * A listener that cannot open, said as such rather than as "unexpected error" or, for a host
 * name that does not resolve, as the data store's failure: a port another program holds
 * (which, and how to choose others), an address this machine does not have or may not use.
 */
function cannotListen(err: unknown, host: string): CliError | null {
  const e = err as (NodeJS.ErrnoException & { address?: string; port?: number; hostname?: string }) | null;
  if (e?.code === 'EADDRINUSE') {
    return new CliError(
      `cannot listen on ${e.address ?? 'the address'}:${e.port ?? '?'}: another program uses it (another school-data serve?); stop it, or choose other ports with PORT and SCHOOL_DATA_CABINET_PORT (or --port and --cabinet-port)`,
    );
  }
  if (e?.syscall === 'getaddrinfo' && e.hostname === host) return new CliError(`cannot listen on ${host}: no such address (${e.code ?? 'unresolved'}); check HOST (or --host)`);
  if (e?.syscall === 'listen' && (e.code === 'EADDRNOTAVAIL' || e.code === 'EACCES')) {
    const why = e.code === 'EACCES' ? 'not allowed (a port below 1024 needs privileges)' : 'this machine has no such address';
    return new CliError(`cannot listen on ${e.address ?? host}:${e.port ?? '?'}: ${why}; check HOST and PORT (or --host and --port)`);
  }
  return null;
}

/**
 * V8 settings for a server, set here as NODE_OPTIONS takes neither.
 * - The heap growing factor (1 + 100 %): with the old generation capped (docs/deployment.md),
 *   V8 otherwise sets each next limit so near what is live that a full collection starts
 *   again a fraction of a second after the last (docs/performance.md, "Full collections one
 *   after the other").
 * - No allocation-site pretenuring: with it, some starts of a server kept a full collection
 *   about every second for their whole life, most likely from V8 judging a site's objects
 *   long-lived while a turn's requests were all in flight, where most of a server's objects
 *   live for one request (docs/performance.md, "Allocation-site pretenuring off").
 */
const SERVE_V8_FLAGS = '--heap-growing-percent=100 --no-allocation-site-pretenuring';

async function runServer(ctx: CommandContext, isWorker: boolean): Promise<number> {
  const { config, out } = ctx;
  v8.setFlagsFromString(SERVE_V8_FLAGS);
  const logger = logsFor(ctx);
  if (isWorker) ApiMetrics.forProcess().shareWithCluster();
  const signals = new StopSignals();
  let server;
  try {
    // A worker's primary has upgraded the store: the worker only checks it.
    server = await startServer(config, logger, isWorker ? upgradeStore : () => upgradeBeforeServing(config), signals);
  } catch (err) {
    // The channel to the primary would keep a worker that could not start alive.
    if (isWorker) process.disconnect();
    throw cannotListen(err, config.host) ?? err;
  }
  const base = `${server.origin}/api/public/v1/`;
  const cabinet = `${server.cabinetOrigin}/`;
  if (!isWorker) {
    const empty = server.hasSchools ? '' : `\n  ${NO_SCHOOLS}`;
    out.result(
      { base_url: base, cabinet_url: cabinet, cert: server.certPath, store: server.storeLocation, rate_limiter: server.limiter, workers: 1, has_schools: server.hasSchools },
      `school-data API: ${base}\n  director's cabinet: ${cabinet}\n  data: ${server.storeLocation}; rate limits: ${server.limiter}; certificate: ${server.certPath}${empty}\n  stop with Ctrl-C`,
    );
  }
  const code = await closeOnSignal(server, logger, signals);
  // A worker's channel to the primary stays open for the primary's metrics requests, and
  // would keep the closed worker alive.
  if (isWorker) process.disconnect();
  return code;
}

/** The pause before a replacement worker that could not start is tried again, doubling up to the limit. */
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;

async function runPrimary(ctx: CommandContext, workers: number): Promise<number> {
  const { config, out } = ctx;
  const logger = logsFor(ctx);
  // Prepared once here so that workers never race to migrate or to write the certificate.
  const tls = await loadTls(config);
  await upgradeBeforeServing(config);

  let stopping = false;
  let listening = 0;
  // Listening sockets per worker (two each: the API and the cabinet). A worker that dies after
  // both is replaced at once. One that dies before them at the start (a port in use, say) would
  // die again: all stop. Once the service has started, a replacement that cannot start (the
  // database unreachable for a while) is tried again after a pause that grows to a limit, while
  // the other workers serve: a passing outage never takes the service down.
  const listens = new Map<number, number>();
  const started = () => listening >= workers * 2;
  let failedStarts = 0;
  // The replacements waiting for their pause to end (several, when workers die one after another in an outage).
  const retries = new Set<NodeJS.Timeout>();
  const stopWorkers = () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
  };
  // The workers running, and the replacements waiting for their pause to end.
  let alive = workers;
  let worst = 0;
  let finish = (_code: number): void => undefined;
  const exits = new Promise<number>((resolve) => (finish = resolve));
  const settle = () => {
    if (alive === 0) finish(worst);
  };
  const stopRetries = () => {
    for (const retry of retries) clearTimeout(retry);
    alive -= retries.size;
    retries.clear();
    settle();
  };
  cluster.on('exit', (worker, code, signal) => {
    alive -= 1;
    // A worker replaced is logged, not the stop's failure: the stop's code is its workers' at the stop.
    if (!stopping && listens.get(worker.id) === 2) {
      logger.error({ worker: worker.process.pid, code }, 'worker exited; starting another');
      alive += 1;
      cluster.fork();
      return;
    }
    if (!stopping && started()) {
      const pauseMs = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** failedStarts);
      failedStarts += 1;
      logger.error({ worker: worker.process.pid, code, retryInMs: pauseMs }, 'a new worker could not start; trying again');
      alive += 1;
      const retry = setTimeout(() => {
        retries.delete(retry);
        cluster.fork();
      }, pauseMs);
      retries.add(retry);
      return;
    }
    if (!stopping) {
      stopping = true;
      worst = 1;
      logger.error({ worker: worker.process.pid, code }, 'a worker could not start; stopping the others');
      stopWorkers();
    }
    // A worker still starting when the stop came has no handler for it yet: its SIGTERM is the stop's, no failure.
    if (code !== 0 && !(stopping && signal === 'SIGTERM')) worst = 1;
    settle();
  });
  // The ports as bound (a port of 0 is one the system chose, shared by all workers), in the
  // order the first worker to listen opens them: the API's, then the cabinet's.
  const bound: number[] = [];
  let first: number | undefined;
  cluster.on('listening', (worker, address) => {
    listens.set(worker.id, (listens.get(worker.id) ?? 0) + 1);
    listening += 1;
    if (listens.get(worker.id) === 2) failedStarts = 0;
    first ??= worker.id;
    if (worker.id === first) bound.push(address.port);
    // Each worker listens twice: the API and the director's cabinet.
    if (listening === workers * 2) {
      const host = localUrlHost(config.host);
      const base = `https://${host}:${bound[0] ?? config.port}/api/public/v1/`;
      const cabinet = `https://${host}:${bound[1] ?? config.cabinetPort}/`;
      out.result(
        { base_url: base, cabinet_url: cabinet, cert: tls.certPath, store: config.databaseUrl ? 'postgres' : 'sqlite', rate_limiter: 'redis', workers },
        `school-data API: ${base} (${workers} workers)\n  director's cabinet: ${cabinet}\n  certificate: ${tls.certPath}\n  stop with Ctrl-C`,
      );
    }
  });
  serveClusterMetrics();
  for (let i = 0; i < workers; i++) cluster.fork();

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping workers');
    stopRetries();
    stopWorkers();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  return exits;
}
