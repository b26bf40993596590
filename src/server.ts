/**
 * Starting and stopping the service: open the stores, build the API app and the
 * director's cabinet, listen over HTTPS (one port each), and on SIGTERM/SIGINT close
 * gracefully (stop accepting, finish in-flight requests, let open connections end for
 * up to a second, flush usage counts, close the stores).
 */
import type http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { RateLimiter } from './access/ratelimit/index.js';
import { MemoryRateLimiter } from './access/ratelimit/memory.js';
import { RedisRateLimiter } from './access/ratelimit/redis.js';
import { UsageRecorder } from './access/usage.js';
import { buildApp, type App } from './app.js';
import { apiServerFactory } from './edge/listener.js';
import { settleClosingConnections } from './edge/raw.js';
import { buildCabinetApp, type CabinetApp } from './cabinet/app.js';
import { localUrlHost, type Config } from './config/index.js';
import { isStoreUnavailable, openStore, type Store } from './db/index.js';
import { sweepKeys } from './management/keys.js';
import { hasSchools } from './management/schools.js';
import { createLogger } from './logger.js';
import { DependencyState } from './ops/dependency.js';
import { loadTls } from './tls.js';

export interface RunningServer {
  app: App;
  /** https://host:port, the API base is this plus /api/public/v1/. */
  origin: string;
  /** The director's cabinet: its own listener, same process, stores and certificate. */
  cabinet: CabinetApp;
  /** https://host:port of the cabinet. */
  cabinetOrigin: string;
  certPath: string;
  /** Where the data lives and where the rate-limit counters live, for the start banner. */
  storeLocation: string;
  limiter: 'redis' | 'memory';
  /** False when the database has no school yet: the API has nothing to serve until one is added. */
  hasSchools: boolean;
  close(): Promise<void>;
}

export function createLimiter(config: Pick<Config, 'redisUrl' | 'redisTimeoutMs'>): RateLimiter {
  return config.redisUrl ? new RedisRateLimiter(config.redisUrl, config.redisTimeoutMs) : new MemoryRateLimiter();
}

/** How often the key sweep runs (its records only; the request path refuses ended keys at once). */
const KEY_SWEEP_MS = 60_000;

/**
 * Marks revoked, with their audit events, the keys that expired, ended their roll's overlap
 * or went unused too long (src/management/keys.ts, sweepKeys). Every instance sweeps; the
 * first to mark a key records its event.
 */
function keySweep(store: Store, config: Config, logger: Logger): NodeJS.Timeout {
  // A store that does not answer is an outage, logged as one (ops/dependency.ts): no stack trace per sweep.
  const sweeps = new DependencyState(store.dialect, 'data_unavailable', logger);
  const run = () => {
    sweepKeys(store.db, { unusedDays: config.keyUnusedDays }).then(
      (marked) => {
        sweeps.answered();
        if (marked > 0) logger.info({ keys: marked }, 'ended keys marked revoked');
      },
      (err: unknown) => (isStoreUnavailable(err) ? sweeps.failedBeside(err, 'key sweep') : logger.warn({ err }, 'key sweep failed; will retry')),
    );
  };
  const timer = setInterval(run, KEY_SWEEP_MS);
  timer.unref();
  run();
  return timer;
}

/**
 * `upgrade` brings the store up to date before anything is served; by default the
 * schema's migrations (the CLI's serve adds the read-model rebuild).
 */
export async function startServer(
  config: Config,
  logger: Logger = createLogger(config),
  upgrade: (store: Store) => Promise<unknown> = (store) => store.migrate(),
  signals?: StopSignals,
): Promise<RunningServer> {
  const tls = await loadTls(config);
  const store = openStore(config);
  // What is open so far; a start that fails closes it all, so the process can end (a Redis
  // connection or the key watch would keep it alive, reconnecting).
  let limiter: RateLimiter | undefined;
  let usage: UsageRecorder | undefined;
  let app: App | undefined;
  let cabinet: CabinetApp | undefined;
  let anySchool: boolean;
  try {
    await upgrade(store);
    limiter = createLimiter(config);
    // Connect before listening, so the first requests are not refused while Redis is
    // still being reached. If it is down, serve anyway: requests fail closed until it is up.
    if (!(await limiter.ready(5000))) logger.error('rate-limit service not reachable at start; requests get 503 until it is');
    usage = await UsageRecorder.open(store.db, logger, config.usageFlushMs, limiter);
    app = await buildApp({ config, store, limiter, usage, logger, serverFactory: apiServerFactory(config, tls) });
    cabinet = await buildCabinetApp({ config, db: store.db, limiter, logger, tls });
    anySchool = await hasSchools(store.db);
  } catch (err) {
    // The API app closes the stores it was given; before it exists, they are closed here.
    const [built, opened, counting, limits] = [app, cabinet, usage, limiter];
    await closeEach(built !== undefined ? [() => opened?.close(), () => built.close()] : [() => counting?.close(), () => limits?.close(), () => store.close()]);
    throw err;
  }
  const sweep = keySweep(store, config, logger);
  app.addHook('onClose', () => clearInterval(sweep));
  // From the moment a port opens, a signal stops the server gracefully (closeOnSignal).
  signals?.arm();
  try {
    await app.listen({ host: config.host, port: config.port });
    await cabinet.listen({ host: config.host, port: config.cabinetPort });
  } catch (err) {
    await closeEach([() => cabinet.close(), () => app.close()]);
    throw err;
  }
  const host = localUrlHost(config.host);
  const originOf = (server: App['server'], configured: number) => {
    const address = server.address();
    return `https://${host}:${typeof address === 'object' && address ? address.port : configured}`;
  };
  const limiterKind = config.redisUrl ? 'redis' : 'memory';
  logger.info({ store: store.dialect, limiter: limiterKind }, 'school-data API and cabinet listening');
  return {
    app,
    origin: originOf(app.server, config.port),
    cabinet,
    cabinetOrigin: originOf(cabinet.server, config.cabinetPort),
    certPath: tls.certPath,
    storeLocation: store.location,
    limiter: limiterKind,
    hasSchools: anySchool,
    // The cabinet first: it shares the stores that the API app closes when it closes.
    close: async () => {
      await cabinet.close();
      await app.close();
    },
  };
}

/** Runs each step of closing a start that failed, whatever the one before did: the start's own error is the one told. */
async function closeEach(steps: (() => Promise<unknown> | undefined)[]): Promise<void> {
  for (const step of steps) {
    try {
      await step();
    } catch {
      // Not told: the failed start's error is.
    }
  }
}

/**
 * SIGTERM and SIGINT, taken over from Node's default (the process ends at once) by `arm`,
 * which startServer calls just before its ports open, so that no request in flight can be
 * cut off by a signal. `received` is the first signal after that; later ones are absorbed
 * (Ctrl-C reaches cluster workers from both the terminal and the primary), so a second one
 * cannot cut the flush of usage counts short. Before `arm` (while the store is upgraded)
 * a signal ends the process as usual.
 */
export class StopSignals {
  readonly received: Promise<NodeJS.Signals>;
  private take: ((signal: NodeJS.Signals) => void) | null = null;

  constructor() {
    this.received = new Promise((resolve) => (this.take = resolve));
  }

  arm(): void {
    const take = this.take;
    if (take === null) return;
    this.take = null;
    let taken = false;
    const stop = (signal: NodeJS.Signals) => {
      if (taken) return;
      taken = true;
      take(signal);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  }
}

/**
 * How long a stop lets the open connections (the API's and the cabinet's) end by themselves
 * before it closes those left (idle ones; requests in flight always finish).
 */
const DRAIN_MS = 1000;
/** How often the drain looks whether connections are left. */
const DRAIN_POLL_MS = 20;

/**
 * Stops accepting connections on `server` and waits up to `ms` for those open to end. The
 * answers given meanwhile carry `Connection: close` (the API's answer writer says so while
 * its listener is closed; for the cabinet, `sayClose`), so a client that asks again on a
 * kept-alive connection is answered and then opens a new one elsewhere, rather than having
 * the connection closed under the request it is sending. (http's own close would close
 * every idle connection at once: net's stops the listener alone.)
 */
async function drain(server: http.Server, ms: number, sayClose: boolean): Promise<void> {
  if (!server.listening) return;
  if (sayClose) server.prependListener('request', (_req: http.IncomingMessage, res: http.ServerResponse) => res.setHeader('Connection', 'close'));
  net.Server.prototype.close.call(server);
  const openConnections = () => new Promise<number>((resolve) => server.getConnections((err, n) => resolve(err ? 0 : n)));
  const until = performance.now() + ms;
  while (performance.now() < until && (await openConnections()) > 0) await sleep(DRAIN_POLL_MS);
}

/** Closes the server on the first signal `signals` takes (after a drain); resolves with the exit code. */
export async function closeOnSignal(server: RunningServer, logger: Logger, signals: StopSignals): Promise<number> {
  const signal = await signals.received;
  logger.info({ signal }, 'shutting down');
  try {
    await Promise.all([drain(server.app.server, DRAIN_MS, false), drain(server.cabinet.server, DRAIN_MS, true)]);
    await settleClosingConnections();
    await server.close();
    return 0;
  } catch (err) {
    logger.error({ err }, 'error during shutdown');
    return 1;
  }
}
