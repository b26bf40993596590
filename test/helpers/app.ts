/**
 * The real app for tests: HTTPS on a free loopback port, a real store (SQLite, or a
 * fresh PostgreSQL schema when DATABASE_URL is set), and the real rate limiter
 * (memory, or Redis when REDIS_URL is set). Every response its request() receives is
 * checked against the OpenAPI document.
 */
import { Writable } from 'node:stream';
import { MemoryRateLimiter } from '../../src/access/ratelimit/memory.js';
import type { RateLimiter } from '../../src/access/ratelimit/index.js';
import { UsageRecorder } from '../../src/access/usage.js';
import { buildApp, type App } from '../../src/app.js';
import { apiServerFactory } from '../../src/edge/listener.js';
import { loadConfig, type Config, type ConfigOverrides } from '../../src/config/index.js';
import { createLogger } from '../../src/logger.js';
import type { ApiMetrics } from '../../src/ops/metrics.js';
import type { ResponseCache } from '../../src/resources/cache.js';
import { createLimiter } from '../../src/server.js';
import { loadTls } from '../../src/tls.js';
import { createTestStore, type TestStore } from './store.js';
import { httpsClient, type RequestOptions, type TestResponse } from './http.js';
import { documentContract } from './openapi.js';

/** A whole API key value; hints (`service_pk_ab12...cd34`) do not match. */
export const KEY_VALUE = /service_pk_[0-9a-f]{32}/;

/**
 * Fails when `text` (logs, process output) holds a key value. Every test app checks its
 * logs when it closes and every spawned process its output when it exits
 * (processes.ts), so a run of the whole suite is a scan of everything it logged.
 */
export function assertNoKeyValues(text: string, where: string): void {
  const leak = keyLeak(text, where);
  if (leak) throw leak;
}

/** The error assertNoKeyValues would throw, or null. */
export function keyLeak(text: string, where: string): Error | null {
  const found = KEY_VALUE.exec(text);
  return found ? new Error(`${where} contain an API key value (${found[0].slice(0, 15)}...): keys must never be logged`) : null;
}

export interface TestApp {
  app: App;
  store: TestStore;
  config: Config;
  origin: string;
  /** The certificate the app serves, for clients of its own to trust. */
  ca: string;
  /** Every log line the app wrote, for assertions about what is (not) logged. */
  logs: string[];
  request(path: string, opts?: RequestOptions): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  config?: ConfigOverrides;
  /** Replace the configured limiter (e.g. one pointed at a private redis-server). */
  limiter?: RateLimiter;
  store?: TestStore;
  metrics?: ApiMetrics;
  cache?: ResponseCache;
}

/**
 * The shared Redis's timeout in tests: the suites run side by side on a busy machine, where a
 * round trip can outlast the production 250 ms. The tests of the timeout itself build their
 * own limiter with it (test/faults/redis.test.ts, test/access/ratelimit.test.ts).
 */
export const TEST_REDIS_TIMEOUT_MS = 2000;

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const store = options.store ?? (await createTestStore());
  const config = loadConfig(
    { ...process.env, DATABASE_URL: store.url ?? '', SCHOOL_DATA_DIR: store.dataDir },
    { host: '127.0.0.1', port: 0, logLevel: 'info', usageFlushMs: 200, redisTimeoutMs: TEST_REDIS_TIMEOUT_MS, ...options.config },
  );
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString('utf8'));
      cb();
    },
  });
  const logger = createLogger(config, sink);
  const tls = await loadTls(config);
  const limiter = options.limiter ?? (config.redisUrl ? createLimiter(config) : new MemoryRateLimiter());
  await limiter.ready(5000);
  const usage = await UsageRecorder.open(store.db, logger, config.usageFlushMs, limiter);
  const app = await buildApp({ config, store: { ...store, close: () => Promise.resolve() }, limiter, usage, logger, serverFactory: apiServerFactory(config, tls), metrics: options.metrics, cache: options.cache });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const origin = `https://127.0.0.1:${port}`;
  const client = httpsClient(origin, tls.cert);
  return {
    app,
    store,
    config,
    origin,
    ca: tls.cert,
    logs,
    // Every response is checked against the OpenAPI document (see openapi.ts).
    async request(path, opts) {
      const res = await client.request(path, opts);
      (await documentContract()).check(opts?.method ?? 'GET', path, res);
      return res;
    },
    async close() {
      client.close();
      await app.close();
      if (!options.store) await store.close();
      assertNoKeyValues(logs.join(''), 'the app logs');
    },
  };
}
