/**
 * The built client against the real server: every method returns what the API
 * returns, list calls give one page when awaited and every record when iterated,
 * the service's own certificate is trusted through `ca` (beside NODE_EXTRA_CA_CERTS),
 * and the key never shows when the client is inspected or serialized.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import tls from 'node:tls';
import util from 'node:util';
import { after, before, describe, it } from 'node:test';
import { selfSignedPaths } from '../../src/tls.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { seedWorld, type World } from '../helpers/world.js';
import { ListRequest, SchoolDataClient, SchoolDataConnectionError, type AttemptEvent, type ClientOptions } from './built.js';

describe('client: happy paths', () => {
  let t: TestApp;
  let w: World;
  let ca: string;
  let client: InstanceType<typeof SchoolDataClient>;
  const events: AttemptEvent[] = [];
  const make = (options: Partial<ClientOptions> = {}) => new SchoolDataClient({ baseUrl: t.origin, apiKey: w.a.key, ca, ...options });
  const direct = async (path: string) => (await t.request(`/api/public/v1${path}`, { key: w.a.key })).json();

  before(async () => {
    t = await startTestApp();
    w = await seedWorld(t.store.db);
    ca = fs.readFileSync(selfSignedPaths(t.store.dataDir).cert, 'utf8');
    client = make({ onResponse: (e) => events.push(e) });
  });
  after(async () => {
    client.close();
    await t.close();
  });

  it('answers each endpoint exactly as the API does', async () => {
    assert.deepEqual(await client.students.list(), await direct('/students'));
    assert.deepEqual(await client.students.list({ status: 'learning_practice', category: 'B' }), await direct('/students?status=learning_practice&category=B'));
    assert.deepEqual(await client.students.get('s1'), await direct('/students/s1'));
    assert.deepEqual(await client.instructors.list({ is_active: false }), await direct('/instructors?is_active=false'));
    assert.deepEqual(await client.vehicles.list(), await direct('/vehicles'));
    assert.deepEqual(await client.lessons.list({ period_from: '2026-03-01', period_to: '2026-03-31' }), await direct('/lessons?period_from=2026-03-01&period_to=2026-03-31'));
    assert.deepEqual(await client.contracts.list({ student_id: 's1' }), await direct('/contracts?student_id=s1'));
    assert.deepEqual(await client.payments.list({ period_from: '2026-03-01T00:00:00+03:00' }), await direct('/payments?period_from=2026-03-01T00%3A00%3A00%2B03%3A00'));
    assert.deepEqual(await client.leads.list({ status: 'new' }), await direct('/leads?status=new'));
    const summary = await client.reports.financeSummary({ period_from: '2026-01-01', period_to: '2026-12-31' });
    assert.deepEqual(summary, await direct('/reports/finance-summary?period_from=2026-01-01&period_to=2026-12-31'));
    assert.match(summary.income, /^-?\d+\.\d{2}$/);
  });

  it('awaits a list call as one page, and sends nothing until it is used', async () => {
    const before = events.length;
    const request = client.students.list({ limit: 2, offset: 1 });
    assert.ok(request instanceof ListRequest);
    assert.equal(events.length, before);
    const page = await request;
    assert.deepEqual(page.meta, { total: 5, limit: 2, offset: 1 });
    assert.deepEqual(page.items.map((s) => s.id), ['s2', 's3']);
    // page() and a second await share the one request.
    assert.equal(await request.page(), page);
    assert.equal(events.length, before + 1);
  });

  it('iterates every record across pages in the API order', async () => {
    const ids: string[] = [];
    for await (const student of client.students.list({ limit: 2 })) ids.push(student.id);
    assert.deepEqual(ids, ['s1', 's2', 's3', 's4', 's5']);
    const filtered: string[] = [];
    for await (const s of client.students.list({ group_id: 'g1', limit: 1, offset: 1 })) filtered.push(s.id);
    assert.deepEqual(filtered, ['s2', 's4', 's5']);
    for await (const s of client.students.list({ group_id: 'no-such-group' })) assert.fail(`unexpected ${s.id}`);
  });

  it('collects with toArray, stopping at max', async () => {
    assert.deepEqual((await client.students.list({ limit: 2 }).toArray({ max: 3 })).map((s) => s.id), ['s1', 's2', 's3']);
    assert.equal((await client.students.list().toArray({ max: Infinity })).length, 5);
    assert.deepEqual(await client.students.list().toArray({ max: 0 }), []);
    assert.deepEqual((await client.students.list({ limit: 2 }).toArray()).map((s) => s.id), ['s1', 's2', 's3', 's4', 's5']);
    await assert.rejects(client.students.list().toArray({ max: Number.NaN }), TypeError);
  });

  it('reports each attempt with its status and request id', async () => {
    events.length = 0;
    await client.vehicles.list();
    assert.equal(events.length, 1);
    assert.equal(events[0]?.status, 200);
    assert.equal(events[0]?.attempt, 0);
    assert.match(events[0]?.requestId ?? '', /^[0-9a-f-]{36}$/);
  });

  it('accepts the base URL with the API prefix, and refuses plain HTTP and malformed keys', async () => {
    const prefixed = make({ baseUrl: `${t.origin}/api/public/v1/` });
    assert.equal((await prefixed.students.list()).meta.total, 5);
    prefixed.close();
    assert.throws(() => make({ baseUrl: t.origin.replace('https:', 'http:') }), /https/);
    assert.throws(() => make({ apiKey: 'service_pk_short' }), /apiKey/);
    assert.throws(() => make({ timeout: 0 }), /timeout/);
  });

  it('trusts the service certificate only when told to', async () => {
    const untrusting = make({ ca: undefined, maxRetries: 0 });
    await assert.rejects(untrusting.students.list().page(), (err: unknown) => err instanceof SchoolDataConnectionError && /certificate|ca/i.test(err.message));
    untrusting.close();
    const insecure = make({ ca: undefined, rejectUnauthorized: false });
    assert.equal((await insecure.students.list()).meta.total, 5);
    insecure.close();
  });

  it('trusts NODE_EXTRA_CA_CERTS beside `ca`, as Node.js does without it', async () => {
    // NODE_EXTRA_CA_CERTS is read when a process starts: a process of its own, trusting the
    // service's certificate through it, given in `ca` a certificate that has nothing to do with it.
    const script = `
      const { SchoolDataClient } = await import(${JSON.stringify(new URL('../../client/dist/index.js', import.meta.url).href)});
      const client = new SchoolDataClient({ baseUrl: process.env.URL, apiKey: process.env.KEY, ca: process.env.UNRELATED_CA, maxRetries: 0 });
      try {
        process.stdout.write(String((await client.students.list()).meta.total));
      } finally {
        client.close();
      }`;
    const env = { ...process.env, NODE_EXTRA_CA_CERTS: selfSignedPaths(t.store.dataDir).cert, URL: t.origin, KEY: w.a.key, UNRELATED_CA: tls.rootCertificates[0] };
    const child = spawn(process.execPath, ['--input-type=module', '--eval', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise((resolve) => child.on('close', resolve));
    assert.equal(code, 0, stderr);
    assert.equal(stdout, '5');
  });

  it('refuses a `ca` that holds no PEM certificate when it is made', () => {
    const privateKey = fs.readFileSync(selfSignedPaths(t.store.dataDir).key, 'utf8');
    for (const bad of ['id,name\n1,a\n', privateKey, Buffer.from(privateKey), [ca, 'not a certificate']]) {
      assert.throws(() => make({ ca: bad }), (err: unknown) => err instanceof TypeError && /ca holds no PEM certificate/.test(err.message));
    }
    make({ ca: [ca, Buffer.from(ca)] }).close();
  });

  it('shows its key neither to util.inspect nor to JSON.stringify', async () => {
    const keyed = make();
    // After a request, with the agent's socket kept alive.
    await keyed.students.list();
    for (const text of [util.inspect(keyed, { depth: Infinity, showHidden: true }), JSON.stringify(keyed)]) {
      assert.ok(!text.includes(w.a.key), 'the key shows');
      assert.ok(!text.includes('Bearer'), 'the Authorization header shows');
    }
    keyed.close();
  });
});
