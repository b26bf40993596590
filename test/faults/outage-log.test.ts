/**
 * A database outage as an operator meets it: a private PostgreSQL stopped under load and
 * started again, with one real `serve` process logging at its default level. Meanwhile
 * every request gets 503 data_unavailable; the whole outage writes a handful of warn or
 * error lines (one when the database goes, one for the failing usage flush), never a
 * line per request; the first answer after the database is back comes within 2 s; and
 * the refusals are on the metric.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { openStore, type Store } from '../../src/db/index.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { loadTls } from '../../src/tls.js';
import { httpsClient } from '../helpers/http.js';
import { PrivatePostgres, postgresBin } from '../helpers/postgres.js';
import { startServe, type ServeProcess } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const skip = !process.env.DATABASE_URL ? 'PostgreSQL only' : postgresBin() === null ? 'PostgreSQL server programs not installed' : false;
const OUTAGE_MS = 4000;

describe('a private PostgreSQL stopped and started under load', { skip }, () => {
  let pg: PrivatePostgres;
  let store: Store;
  let server: ServeProcess;
  let client: ReturnType<typeof httpsClient>;
  let cabinetPort: number;
  let dataDir: string;
  let key: string;

  before(async () => {
    pg = await PrivatePostgres.create();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-outage-'));
    store = openStore({ databaseUrl: pg.url, dataDir, dbTimeoutMs: 3000, dbPoolSize: 2 });
    await store.migrate();
    const s = await createSchool(store.db, { name: 'Outage', plan: 'VIP', id: `out_${randomBytes(5).toString('hex')}` });
    assert.ok(s.ok);
    const k = await createKey(store.db, s.value.id, 'outage');
    assert.ok(k.ok);
    key = k.value.key;
    const port = await freePort();
    cabinetPort = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: pg.url, SCHOOL_DATA_DIR: dataDir, PORT: String(port), SCHOOL_DATA_CABINET_PORT: String(cabinetPort), SCHOOL_DATA_RATE_LIMIT_VIP: '1000000', SCHOOL_DATA_DB_TIMEOUT_MS: '1000' };
    delete env.REDIS_URL;
    delete env.SCHOOL_DATA_LOG_LEVEL;
    server = await startServe(env);
    const tls = await loadTls({ dataDir, tlsCert: null, tlsKey: null });
    client = httpsClient(`https://127.0.0.1:${port}`, tls.cert);
  });
  after(async () => {
    client?.close();
    if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
    await store?.close();
    await pg?.destroy();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('503 meanwhile, a handful of log lines, answers within 2 s of its return', async (t) => {
    const statuses = new Map<number, number>();
    let stop = false;
    let backAt = 0;
    let firstAfter = 0;
    const loops = Array.from({ length: 4 }, async (_, i) => {
      while (!stop) {
        const res = await client.request(i % 2 ? '/api/public/v1/students?limit=5' : '/api/public/v1/vehicles', { key });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 200 && backAt > 0 && firstAfter === 0) firstAfter = Date.now();
        if (res.status !== 200) assert.equal((res.json() as { code: string }).code, 'data_unavailable', res.text);
      }
    });
    await new Promise((r) => setTimeout(r, 1000));
    const linesBefore = server.output().split('\n').length;
    await pg.stop();
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    await pg.start();
    backAt = Date.now();
    const deadline = Date.now() + 10_000;
    while (firstAfter === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 1500));
    stop = true;
    await Promise.all(loops);

    assert.ok((statuses.get(503) ?? 0) > 20, `few 503s: ${JSON.stringify([...statuses])}`);
    assert.deepEqual([...statuses.keys()].filter((s) => s !== 200 && s !== 503), []);
    assert.ok(firstAfter > 0, 'no answer after the database came back');
    assert.ok(firstAfter - backAt < 2000, `first answer ${firstAfter - backAt} ms after the database came back`);

    const lines = server.output().split('\n').slice(linesBefore - 1).filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string; err?: unknown; stack?: unknown });
    const loud = lines.filter((l) => l.level >= 40);
    t.diagnostic(`503: ${statuses.get(503)}, 200: ${statuses.get(200)}, warn/error lines: ${loud.length}, first answer ${firstAfter - backAt} ms after the return`);
    assert.ok(loud.length >= 1 && loud.length <= 5, `warn/error lines of the outage: ${loud.length}\n${loud.map((l) => JSON.stringify(l)).join('\n')}`);
    assert.ok(loud.some((l) => l.msg.startsWith('postgres unavailable')), JSON.stringify(loud));
    assert.ok(lines.some((l) => l.level === 30 && l.msg === 'postgres available again'), 'the return is logged');
    assert.ok(!server.output().includes('"stack"'), `no stack traces: ${server.output().split('\n').find((l) => l.includes('"stack"'))}`);

    const metrics = await httpsClient(`https://127.0.0.1:${cabinetPort}`, (await loadTls({ dataDir, tlsCert: null, tlsKey: null })).cert).request('/metrics');
    const refused = /school_data_refused_requests_total\{cause="data_unavailable"\} (\d+)/.exec(metrics.text);
    assert.ok(refused, metrics.text.slice(0, 500));
    assert.equal(Number(refused[1]), statuses.get(503));
  });
});
