/**
 * `school-data demo`, run as a real process against the real store: the demo schools
 * with their keys and, beside the keys, a director for each school whose printed
 * sign-in works in the real cabinet; a second run gives new ones; a skipped demo says
 * how to get a key and a sign-in with commands that run as printed.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { startTestCabinet, type TestCabinet } from '../helpers/cabinet.js';
import { createKey } from '../../src/management/keys.js';
import { selfSignedPaths } from '../../src/tls.js';
import { BIN, runCli } from '../helpers/processes.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

interface DemoSchool {
  id: string;
  plan: string;
  key: string | null;
  director: { email: string; password: string };
}

describe('school-data demo', () => {
  let store: TestStore;
  let env: NodeJS.ProcessEnv;
  let cabinet: TestCabinet;
  let api: TestApp;
  let first: DemoSchool[];

  const demo = async (...args: string[]) => {
    const r = await runCli(['demo', ...args], env);
    assert.equal(r.code, 0, r.stderr);
    return r;
  };
  const signsIn = async (email: string, password: string) => (await cabinet.browser().login(email, password)).status === 303;

  before(async () => {
    // No certificate yet: the demo's first run makes it, through the built program, as on a
    // newcomer's machine; the cabinet and the API started after it serve the same one.
    store = await createTestStore({ certificate: false });
    env = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, DATABASE_URL: store.url ?? '', SCHOOL_DATA_LOG_LEVEL: 'warn' };
    const out = JSON.parse((await demo('--json')).stdout) as { cabinet_url: string; cert: string; schools: DemoSchool[] };
    first = out.schools;
    assert.match(out.cabinet_url, /^https:\/\/127\.0\.0\.1:\d+\/$/);
    const made = selfSignedPaths(store.dataDir);
    assert.ok(fs.existsSync(made.cert) && fs.existsSync(made.key), 'the certificate was made');
    assert.equal(out.cert, made.cert, 'the curl line trusts the certificate made');
    cabinet = await startTestCabinet({ store });
    api = await startTestApp({ store });
    assert.equal(api.ca, fs.readFileSync(made.cert, 'utf8'), 'the API serves the certificate the demo made');
  });
  after(async () => {
    await cabinet.close();
    await api.close();
    await store.close();
  });

  it('makes a director for every demo school, whose printed sign-in opens its cabinet', async () => {
    assert.deepEqual(
      first.map((s) => [s.id, s.plan, s.director.email]),
      [
        ['demo-vip', 'VIP', 'director@demo-vip.example'],
        ['demo-profi', 'Profi', 'director@demo-profi.example'],
        ['demo-standart', 'Standart', 'director@demo-standart.example'],
      ],
    );
    for (const school of first) {
      assert.match(school.director.password, /^[A-Za-z0-9_-]{24}$/);
      const b = cabinet.browser();
      assert.equal((await b.login(school.director.email, school.director.password)).status, 303, school.id);
      const page = await b.get('/settings/api');
      assert.equal(page.status, 200);
      assert.match(page.text, new RegExp(`<dd id="plan">${school.plan}</dd>`));
    }
    // The keys printed beside them work too.
    const key = first[0]!.key!;
    assert.equal((await api.request('/api/public/v1/students?limit=1', { key })).status, 200);
  });

  it('on a wildcard HOST, prints addresses this machine can open, which the certificate names', async () => {
    // The IPv4 wildcard's address (127.0.0.1) is localUrlHost's, in test/config/config.test.ts: a demo run is costly.
    for (const [host, url] of [['::', '[::1]']]) {
      const r = await runCli(['demo', '--json'], { ...env, HOST: host });
      assert.equal(r.code, 0, r.stderr);
      const out = JSON.parse(r.stdout) as { base_url: string; cabinet_url: string; curl: string };
      assert.ok(out.base_url.startsWith(`https://${url}:`), `${host}: ${out.base_url}`);
      assert.ok(out.cabinet_url.startsWith(`https://${url}:`), `${host}: ${out.cabinet_url}`);
      assert.ok(out.curl.includes(`https://${url}:`), `${host}: ${out.curl}`);
    }
  });

  it('run again, prints new sign-ins beside the new keys; the old passwords stop working', async () => {
    // A demo school whose time zone was changed since: the run keeps it, and says so.
    await store.db.updateTable('schools').set({ timezone: 'Europe/Samara' }).where('id', '=', 'demo-profi').execute();
    const r = await demo();
    assert.match(r.stdout, /^demo-profi\s+Profi\s+Europe\/Samara\s/m);
    assert.match(r.stdout, /Director's cabinet: https:\/\/127\.0\.0\.1:\d+\//);
    const rows = [...r.stdout.matchAll(/^(demo-\w+)\s+(director@\S+)\s+([A-Za-z0-9_-]{24})$/gm)].map((m) => ({ id: m[1]!, email: m[2]!, password: m[3]! }));
    assert.deepEqual(
      rows.map((row) => row.id),
      ['demo-vip', 'demo-profi', 'demo-standart'],
    );
    assert.match(r.stdout, /PASSWORD \(shown once\)/);
    assert.match(r.stdout, /Once the server is up \(npx school-data serve; npm start starts it for you\), try:/);
    for (const row of rows) {
      const before = first.find((s) => s.id === row.id)!;
      assert.equal(row.email, before.director.email);
      assert.notEqual(row.password, before.director.password);
      assert.ok(await signsIn(row.email, row.password), `${row.id}: the new password`);
      assert.ok(!(await signsIn(before.director.email, before.director.password)), `${row.id}: the old password still works`);
    }
    assert.equal((await store.db.selectFrom('directors').select('id').execute()).length, 3, 'one director per school, not one per run');
  });

  it('stops before writing anything when a demo school has no room for its key', async () => {
    // demo-profi filled to 10 active keys; demo-vip, made first, would get its key and new password.
    const active = async (school: string) => (await store.db.selectFrom('api_keys').select('id').where('school_id', '=', school).where('revoked_at', 'is', null).execute()).length;
    for (let n = await active('demo-profi'); n < 10; n++) assert.ok((await createKey(store.db, 'demo-profi', `filler ${n}`)).ok);
    const hashes = async () => (await store.db.selectFrom('directors').select(['email', 'password_hash']).orderBy('email').execute()).map((d) => `${d.email} ${d.password_hash}`);
    const before = { vip: await active('demo-vip'), hashes: await hashes() };
    const r = await runCli(['demo'], env);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^school-data: demo-profi: the school already has 10 active keys.*nothing was written\n$/);
    assert.deepEqual({ vip: await active('demo-vip'), hashes: await hashes() }, before);
  });

  it('skipped on a database with schools, says how to get a key and a sign-in with commands that run as printed', async () => {
    const r = await demo('--if-empty');
    assert.match(r.stdout, /^Demo skipped: the database already has schools\.$/m);
    assert.match(r.stdout, /Create a key with: npx school-data key create --school demo-vip --name try$/m);
    assert.match(r.stdout, /Sign in to the cabinet with a new password: npx school-data director set-password --email director@demo-vip\.example$/m);
    const key = await runCli(['key', 'create', '--school', 'demo-vip', '--name', 'try'], env);
    assert.equal(key.code, 0, key.stderr);
    const password = await runCli(['director', 'set-password', '--email', 'director@demo-vip.example', '--json'], env);
    assert.equal(password.code, 0, password.stderr);
    const { email, password: generated } = JSON.parse(password.stdout) as { email: string; password: string };
    assert.ok(await signsIn(email, generated));
  });
});

describe('school-data demo on a new store, stopped midway', () => {
  let store: TestStore;
  beforeEach(async () => {
    store = await createTestStore();
  });
  afterEach(async () => {
    await store.close();
  });

  it('with a certificate it cannot read, stops in one line before writing anything, rather than after making keys and passwords it never shows', async () => {
    const missing = `${store.dataDir}/no-such-cert.pem`;
    const env = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, DATABASE_URL: store.url ?? '', SCHOOL_DATA_TLS_CERT: missing, SCHOOL_DATA_TLS_KEY: missing };
    const r = await runCli(['demo', '--json'], env);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^school-data: .*no-such-cert\.pem.*\n$/);
    assert.deepEqual(await store.db.selectFrom('schools').select('id').execute(), []);
    assert.deepEqual(await store.db.selectFrom('api_keys').select('id').execute(), []);
    assert.deepEqual(await store.db.selectFrom('directors').select('id').execute(), []);
  });

  it('refuses in one line, before writing anything, a demo school in another currency or a demo director\'s email held by another school', async () => {
    const env = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, DATABASE_URL: store.url ?? '', SCHOOL_DATA_LOG_LEVEL: 'warn' };
    const ok = async (...args: string[]) => assert.equal((await runCli(args, env)).code, 0);
    const written = async () => ({
      schools: (await store.db.selectFrom('schools').select('id').orderBy('id').execute()).map((s) => s.id),
      keys: (await store.db.selectFrom('api_keys').select('id').execute()).length,
      directors: (await store.db.selectFrom('directors').select(['email', 'password_hash']).orderBy('email').execute()).map((d) => `${d.email} ${d.password_hash}`),
      students: (await store.db.selectFrom('students').select('id').execute()).length,
    });
    // demo-standart's director's email is the sign-in of another school's director: demo-vip
    // and demo-profi, made first, would get their keys and passwords.
    await ok('school', 'create', '--name', 'Other', '--plan', 'VIP', '--id', 'other');
    assert.equal((await runCli(['director', 'add', '--school', 'other', '--email', 'Director@demo-standart.example'], env, 'a long passphrase of theirs\n')).code, 0);
    const taken = await written();
    const email = await runCli(['demo'], env);
    assert.equal(email.code, 1);
    assert.equal(
      email.stderr,
      "school-data: demo-standart: its director's email director@demo-standart.example is the sign-in of a director of school other: remove that director first (npx school-data director remove --email director@demo-standart.example); nothing was written\n",
    );
    assert.deepEqual(await written(), taken);
    await ok('director', 'remove', '--email', 'director@demo-standart.example');

    // demo-profi, second of the three, in dollars: the demo's data is in roubles.
    await ok('school', 'create', '--name', 'Mine', '--plan', 'Profi', '--id', 'demo-profi', '--currency', 'USD');
    const before = await written();
    const currency = await runCli(['demo', '--json'], env);
    assert.equal(currency.code, 1);
    assert.equal(currency.stdout, '');
    assert.match(currency.stderr, /^school-data: demo-profi: the school's currency is USD, the demo's data is in RUB: run the demo on a database without this school \(another SCHOOL_DATA_DIR or DATABASE_URL\), or remove the school first .*; nothing was written\n$/);
    assert.deepEqual(await written(), before);
  });

  it('by a Ctrl-C, acts on it once the keys and passwords it made are shown, never between', async () => {
    const env = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, DATABASE_URL: store.url ?? '', SCHOOL_DATA_LOG_LEVEL: 'warn' };
    const child = spawn(process.execPath, [BIN, 'demo', '--json'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    // The first school is made once the demo is under way, before its data and keys.
    const deadline = Date.now() + 30_000;
    while (!(await store.db.selectFrom('schools').select('id').where('id', '=', 'demo-vip').executeTakeFirst())) {
      assert.ok(Date.now() < deadline, `the demo never started: ${stderr}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    child.kill('SIGINT');
    assert.equal(await exited, 130, stderr);
    assert.match(stderr, /^SIGINT: the demo stops once its keys and passwords are shown \(again to stop now\)\n$/);
    const shown = (JSON.parse(stdout) as { schools: DemoSchool[] }).schools;
    const keys = await store.db.selectFrom('api_keys').select(['school_id', 'hint']).where('revoked_at', 'is', null).orderBy('school_id').execute();
    const hint = (key: string) => `${key.slice(0, 15)}...${key.slice(-4)}`;
    assert.deepEqual(
      keys,
      shown.filter((s) => s.key !== null).map((s) => ({ school_id: s.id, hint: hint(s.key!) })).sort((a, b) => a.school_id.localeCompare(b.school_id)),
      'every key made was shown',
    );
    assert.equal(shown.length, 3);
  });
});
