/**
 * `serve --workers 2` on PostgreSQL and Redis: connections are spread over the workers,
 * one rate limit holds for the school whichever worker answers, and /metrics on the
 * cabinet port counts the whole service's requests whichever worker the scrape reaches;
 * workers that cannot listen stop the service instead of being started again and again.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { loadTls } from '../../src/tls.js';
import { FaultProxy } from '../helpers/faultproxy.js';
import { httpsClient } from '../helpers/http.js';
import { runCli, startServe, type ServeProcess } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

const external = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);
const PROFI_LIMIT = 12;

describe('serve --workers 2', { skip: external ? false : 'needs DATABASE_URL and REDIS_URL' }, () => {
  let store: TestStore;
  let server: ServeProcess;
  let apiOrigin: string;
  let cabinetOrigin: string;
  let ca: string;

  before(async () => {
    store = await createTestStore();
    ca = (await loadTls({ dataDir: store.dataDir, tlsCert: null, tlsKey: null })).cert;
    const [port, cabinetPort] = [await freePort(), await freePort()];
    apiOrigin = `https://127.0.0.1:${port}`;
    cabinetOrigin = `https://127.0.0.1:${cabinetPort}`;
    server = await startServe(
      {
        ...process.env,
        DATABASE_URL: store.url!,
        SCHOOL_DATA_DIR: store.dataDir,
        PORT: String(port),
        SCHOOL_DATA_CABINET_PORT: String(cabinetPort),
        SCHOOL_DATA_RATE_LIMIT_PROFI: String(PROFI_LIMIT),
        SCHOOL_DATA_LOG_LEVEL: 'warn',
      },
      ['--workers', '2'],
    );
  });

  after(async () => {
    if (server?.child.exitCode === null) {
      server.child.kill('SIGTERM');
      const killer = setTimeout(() => server.child.kill('SIGKILL'), 20_000);
      const code = await server.exited;
      clearTimeout(killer);
      assert.equal(code, 0, `the primary and its workers exit 0 on SIGTERM:\n${server.output()}`);
    }
    await store?.close();
  });

  /** One request on a connection of its own, so that the primary hands each to the next worker. */
  async function once(origin: string, path: string, key?: string) {
    const client = httpsClient(origin, ca);
    try {
      return await client.request(path, key ? { key } : {});
    } finally {
      client.close();
    }
  }

  async function school() {
    const s = await createSchool(store.db, { name: 'Workers', plan: 'Profi', id: `wk_${randomBytes(5).toString('hex')}` });
    assert.ok(s.ok);
    const k = await createKey(store.db, s.value.id, 'workers');
    assert.ok(k.ok);
    return k.value;
  }

  it('answers from both workers under one rate limit', async () => {
    const { key } = await school();
    const statuses: number[] = [];
    for (let i = 0; i <= PROFI_LIMIT; i++) statuses.push((await once(apiOrigin, '/api/public/v1/vehicles', key)).status);
    assert.deepEqual(statuses, [...Array<number>(PROFI_LIMIT).fill(200), 429]);
  });

  it('/metrics sums every worker: each scrape sees all the requests', async () => {
    const metric = /^school_data_http_requests_total\{route="\/api\/public\/v1\/instructors",status="401"\} (\d+)$/m;
    const sent = 10;
    for (let i = 0; i < sent; i++) assert.equal((await once(apiOrigin, '/api/public/v1/instructors')).status, 401);
    // Scrapes on connections of their own reach both workers; every one must see all ten.
    for (let i = 0; i < 4; i++) {
      const res = await once(cabinetOrigin, '/metrics');
      assert.equal(res.status, 200, res.text);
      assert.equal(metric.exec(res.text)?.[1], String(sent), `scrape ${i + 1}`);
      // The process gauges are summed too: two workers' memory, not one's.
      assert.match(res.text, /^process_resident_memory_bytes \d/m);
    }
  });

  it('with ports of 0, prints the ports the system chose, and both answer there', async () => {
    const chosen = await startServe(
      { ...process.env, DATABASE_URL: store.url!, SCHOOL_DATA_DIR: store.dataDir, PORT: '0', SCHOOL_DATA_CABINET_PORT: '0', SCHOOL_DATA_LOG_LEVEL: 'warn' },
      ['--workers', '2'],
    );
    try {
      // Its JSON value is on stdout, its log lines (warnings) may come between: the URLs are read by name.
      const out = chosen.output();
      const api = /"base_url": ?"https:\/\/127\.0\.0\.1:(\d+)\/api\/public\/v1\/"/.exec(out);
      const cabinet = /"cabinet_url": ?"https:\/\/127\.0\.0\.1:(\d+)\/"/.exec(out);
      assert.ok(api && cabinet, out);
      assert.notEqual(api[1], '0');
      assert.notEqual(cabinet[1], '0');
      assert.notEqual(cabinet[1], api[1]);
      assert.equal((await once(`https://127.0.0.1:${api[1]}`, '/api/public/v1/vehicles')).status, 401);
      assert.equal((await once(`https://127.0.0.1:${cabinet[1]}`, '/metrics')).status, 200);
    } finally {
      chosen.child.kill('SIGTERM');
      assert.equal(await chosen.exited, 0, chosen.output());
    }
  });

  it('starts another worker for one that died, and still exits 0 on SIGTERM afterwards', async () => {
    const served = await startServe(
      { ...process.env, DATABASE_URL: store.url!, SCHOOL_DATA_DIR: store.dataDir, PORT: '0', SCHOOL_DATA_CABINET_PORT: '0', SCHOOL_DATA_LOG_LEVEL: 'info' },
      ['--workers', '2'],
    );
    try {
      const pid = served.child.pid!;
      const workers = () => fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      const started = workers();
      assert.equal(started.length, 2);
      process.kill(started[0]!, 'SIGKILL');
      // The new worker's line once both its listeners are open.
      const listening = () => workers().some((w) => !started.includes(w) && served.output().includes(`"pid":${w},"store":`));
      const deadline = Date.now() + 15_000;
      while (!listening() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.match(served.output(), /worker exited; starting another/);
      assert.ok(listening(), served.output());
    } finally {
      served.child.kill('SIGTERM');
      assert.equal(await served.exited, 0, served.output());
    }
  });

  /** `serve --workers 2` on ports of 0, its database reached through a fault proxy, and its workers' pids now. */
  async function servedThroughProxy(logLevel: string) {
    const { proxy, url } = await FaultProxy.inFrontOf(store.url!);
    const served = await startServe(
      { ...process.env, DATABASE_URL: url, SCHOOL_DATA_DIR: store.dataDir, PORT: '0', SCHOOL_DATA_CABINET_PORT: '0', SCHOOL_DATA_LOG_LEVEL: logLevel },
      ['--workers', '2'],
    );
    const pid = served.child.pid!;
    const workers = () => fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    return { proxy, served, workers };
  }

  it('keeps serving while a new worker cannot start (the database refused), trying it again until it can', async () => {
    const { proxy, served, workers } = await servedThroughProxy('info');
    try {
      const until = async (done: () => boolean, ms: number) => {
        const deadline = Date.now() + ms;
        while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        return done();
      };
      const started = workers();
      await proxy.setMode('refuse');
      process.kill(started[0]!, 'SIGKILL');
      // The replacement fails against the refused database, and is tried again, twice at least.
      const failures = () => served.output().split('\n').filter((line) => line.includes('a new worker could not start; trying again')).length;
      assert.ok(await until(() => failures() >= 2, 15_000), served.output());
      assert.equal(served.child.exitCode, null, 'the primary serves on');
      assert.ok(workers().includes(started[1]!), 'the other worker serves on');
      await proxy.setMode('forward');
      const listening = () => workers().some((w) => !started.includes(w) && served.output().includes(`"pid":${w},"store":`));
      assert.ok(await until(listening, 20_000), served.output());
      assert.doesNotMatch(served.output(), /stopping the others/);
    } finally {
      served.child.kill('SIGTERM');
      assert.equal(await served.exited, 0, served.output());
      await proxy.close();
    }
  });

  it('stops at once, exit 0, while new workers wait for their pause or are still starting', async () => {
    const { proxy, served, workers } = await servedThroughProxy('warn');
    try {
      await proxy.setMode('refuse');
      // Both die: two replacements wait at once.
      for (const w of workers()) process.kill(w, 'SIGKILL');
      const failures = () => served.output().split('\n').filter((line) => line.includes('a new worker could not start; trying again')).length;
      const deadline = Date.now() + 15_000;
      while (failures() < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.ok(failures() >= 2, served.output());
    } finally {
      const atStop = served.output().length;
      served.child.kill('SIGTERM');
      const killer = setTimeout(() => served.child.kill('SIGKILL'), 10_000);
      const code = await served.exited;
      clearTimeout(killer);
      await proxy.close();
      assert.equal(code, 0, served.output());
      // No worker was started after the stop (one would try the database and say it is unavailable).
      assert.doesNotMatch(served.output().slice(atStop), /data store is unavailable/);
    }
  });

  it('stops, with the reason, when its workers cannot listen (a port another program holds)', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as net.AddressInfo).port;
    try {
      const r = await runCli(['serve', '--workers', '2'], { ...process.env, DATABASE_URL: store.url!, SCHOOL_DATA_DIR: store.dataDir, PORT: String(port), SCHOOL_DATA_CABINET_PORT: String(await freePort()), SCHOOL_DATA_LOG_LEVEL: 'warn' });
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: another program uses it`));
      assert.ok(!r.stderr.includes('    at '), 'stack trace on stderr');
    } finally {
      holder.close();
    }
  });
});
