/**
 * The cabinet from the operator's side, as real processes (the built CLI):
 * `director add` with a password from stdin or generated, its refusals, `director list`,
 * `set-password` and `remove` (each ending the director's sessions), and
 * `serve` starting the cabinet beside the API and closing both on SIGTERM.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import https from 'node:https';
import { after, before, describe, it } from 'node:test';
import { randomBytes } from 'node:crypto';
import { signInAddress } from '../../src/cli/commands/director/add.js';
import { loadTls } from '../../src/tls.js';
import { formFields, startTestCabinet, type TestCabinet } from '../helpers/cabinet.js';
import { BIN, runCli, startServe, type CliResult } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

describe('school-data director add', () => {
  let store: TestStore;
  let t: TestCabinet;
  let env: NodeJS.ProcessEnv;
  const school = `cli_${randomBytes(4).toString('hex')}`;
  const email = () => `head.${randomBytes(4).toString('hex')}@Example.com`;
  const add = (mail: string, stdin: string, ...extra: string[]) => runCli(['director', 'add', '--school', school, '--email', mail, ...extra], env, stdin);
  const fails = (r: CliResult, pattern: RegExp) => {
    assert.notEqual(r.code, 0);
    assert.equal(r.stderr.trim().split('\n').length, 1, `not one line: ${r.stderr}`);
    assert.match(r.stderr, /^school-data: /);
    assert.match(r.stderr, pattern);
  };
  const signsIn = async (mail: string, password: string) => (await t.browser().login(mail, password)).status === 303;
  const directors = async () => (await store.db.selectFrom('directors').select('email').execute()).length;

  before(async () => {
    store = await createTestStore();
    t = await startTestCabinet({ store });
    env = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, DATABASE_URL: store.url ?? '', SCHOOL_DATA_LOG_LEVEL: 'warn' };
    const created = await runCli(['school', 'create', '--name', 'Автошкола', '--plan', 'VIP', '--id', school], env);
    assert.equal(created.code, 0, created.stderr);
  });
  after(async () => {
    await t.close();
    await store.close();
  });

  it('takes the password from stdin, prints it nowhere, and the director can sign in', async () => {
    const mail = email();
    const password = 'a long passphrase from stdin';
    const r = await add(mail, `${password}\n`, '--json');
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.deepEqual(Object.keys(out).sort(), ['created_at', 'email', 'id', 'school_id']);
    assert.equal(out.email, mail.toLowerCase());
    assert.equal(out.school_id, school);
    assert.ok(!r.stdout.includes(password) && !r.stderr.includes(password));
    const row = await store.db.selectFrom('directors').selectAll().where('id', '=', String(out.id)).executeTakeFirstOrThrow();
    assert.match(row.password_hash, /^scrypt\$32768\$8\$3\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    assert.ok(await signsIn(mail, password));
    assert.ok(!(await signsIn(mail, 'a long passphrase from stdin?')));
  });

  it('generates a strong password when stdin is empty, and shows it once', async () => {
    const mail = email();
    const r = await add(mail, '', '--json');
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { password: string };
    assert.match(out.password, /^[A-Za-z0-9_-]{24}$/);
    assert.ok(await signsIn(mail, out.password));
    const human = await add(email(), '');
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /password: [A-Za-z0-9_-]{24}\n/);
    assert.match(human.stdout, /shown only this once/);
    assert.match(human.stdout, /sign in at https:\/\/127\.0\.0\.1:8444\/login/);
  });

  it('prints a sign-in address that can be used: the URL on a named host, the port of this server on a wildcard one', async () => {
    const signIn = async (host: string) => {
      const r = await runCli(['director', 'add', '--school', school, '--email', email()], { ...env, HOST: host, SCHOOL_DATA_CABINET_PORT: '9444' }, '');
      assert.equal(r.code, 0, r.stderr);
      return /; they sign in at (.*)$/m.exec(r.stdout)?.[1];
    };
    assert.equal(await signIn('cabinet.example.org'), 'https://cabinet.example.org:9444/login');
    assert.equal(await signIn('0.0.0.0'), "https://<this server's name>:9444/login (HOST is 0.0.0.0: the cabinet listens on every address of this server)");
    // The other hosts by the same function, in this process (a director added costs a password hash).
    assert.equal(signInAddress('::1', 9444), 'https://[::1]:9444/login');
    for (const host of ['::', '0:0:0:0:0:0:0:0']) {
      assert.equal(signInAddress(host, 9444), `https://<this server's name>:9444/login (HOST is ${host}: the cabinet listens on every address of this server)`);
    }
  });

  it('reads only the first line of a stdin that is never closed (`yes |`), and refuses a line too long without reading on', async () => {
    // stdin stays open and the writer never stops: the command must end by itself.
    const endless = (mail: string, chunk: string) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [BIN, 'director', 'add', '--school', school, '--email', mail, '--json'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.stdin.on('error', () => undefined);
        const feed = setInterval(() => child.stdin.write(chunk), 5);
        const guard = setTimeout(() => child.kill('SIGKILL'), 30_000);
        child.on('close', (code) => {
          clearInterval(feed);
          clearTimeout(guard);
          resolve({ code, stdout, stderr });
        });
      });
    const mail = email();
    const r = await endless(mail, 'a long passphrase, again\n');
    assert.equal(r.code, 0, r.stderr);
    assert.equal((JSON.parse(r.stdout) as { email: string }).email, mail.toLowerCase());
    assert.ok(await signsIn(mail, 'a long passphrase, again'));
    const count = await directors();
    const long = await endless(email(), 'x'.repeat(4096));
    fails({ code: long.code ?? -1, stdout: long.stdout, stderr: long.stderr }, /password must be 12-256 characters/);
    assert.equal(await directors(), count);
  });

  it('refuses a taken email (in any case), an unknown school, a bad email or password: one line, nothing added', async () => {
    const mail = email();
    assert.equal((await add(mail, 'first password ok\n')).code, 0);
    const count = await directors();
    fails(await add(mail.toUpperCase(), 'second password ok\n'), /already exists/);
    fails(await runCli(['director', 'add', '--school', 'no-such-school', '--email', email()], env, 'a fine password\n'), /no school with id "no-such-school"/);
    fails(await add('not-an-email', 'a fine password\n'), /email must be an address/);
    fails(await add(email(), 'short\n'), /password must be 12-256 characters/);
    fails(await add(email(), '\n'), /password on stdin is empty/);
    fails(await runCli(['director', 'add', '--school', school], env), /--email/);
    assert.equal(await directors(), count);
  });

  it('lists directors, sets a new password and removes a director; both end their open sessions', async () => {
    const mail = email();
    assert.equal((await add(mail, 'the first password\n')).code, 0);
    const listed = await runCli(['director', 'list', '--school', school, '--json'], env);
    assert.equal(listed.code, 0, listed.stderr);
    const rows = JSON.parse(listed.stdout) as { email: string; school_id: string }[];
    assert.ok(rows.some((r) => r.email === mail.toLowerCase() && r.school_id === school));
    assert.ok(rows.every((r) => r.school_id === school));
    assert.match((await runCli(['director', 'list'], env)).stdout, new RegExp(mail.toLowerCase().replace(/\./g, '\\.')));
    fails(await runCli(['director', 'list', '--school', 'no-such-school'], env), /no school with id "no-such-school"/);

    // A new password: the old one stops working, and a browser signed in with it is signed out.
    const before = t.browser();
    assert.equal((await before.login(mail, 'the first password')).status, 303);
    assert.equal((await before.get('/settings/api')).status, 200);
    const reset = await runCli(['director', 'set-password', '--email', mail.toUpperCase(), '--json'], env, 'the second password\n');
    assert.equal(reset.code, 0, reset.stderr);
    assert.ok(!reset.stdout.includes('the second password'));
    assert.notEqual((await before.get('/settings/api')).status, 200, 'the old session still works');
    assert.ok(!(await signsIn(mail, 'the first password')));
    assert.ok(await signsIn(mail, 'the second password'));
    const generated = JSON.parse((await runCli(['director', 'set-password', '--email', mail, '--json'], env, '')).stdout) as { password: string };
    assert.match(generated.password, /^[A-Za-z0-9_-]{24}$/);
    assert.ok(await signsIn(mail, generated.password));
    fails(await runCli(['director', 'set-password', '--email', mail], env, 'short\n'), /password must be 12-256 characters/);
    fails(await runCli(['director', 'set-password', '--email', 'nobody@example.com'], env, 'a fine password\n'), /no director with email "nobody@example.com"/);

    // Removed: signed out at once, cannot sign in, gone from the list.
    const signedIn = t.browser();
    assert.equal((await signedIn.login(mail, generated.password)).status, 303);
    const count = await directors();
    const removed = await runCli(['director', 'remove', '--email', mail], env);
    assert.equal(removed.code, 0, removed.stderr);
    assert.match(removed.stdout, /Removed director/);
    assert.equal(await directors(), count - 1);
    assert.notEqual((await signedIn.get('/settings/api')).status, 200, 'the removed director is still signed in');
    assert.ok(!(await signsIn(mail, generated.password)));
    fails(await runCli(['director', 'remove', '--email', mail], env), /no director with email/);
  });

  it('adds directors to Free and Standart schools too (they see why there are no keys)', async () => {
    for (const plan of ['Free', 'Standart']) {
      const id = `cli_${plan.toLowerCase()}_${randomBytes(3).toString('hex')}`;
      assert.equal((await runCli(['school', 'create', '--name', plan, '--plan', plan, '--id', id], env)).code, 0);
      const r = await runCli(['director', 'add', '--school', id, '--email', email(), '--json'], env, 'password of a director\n');
      assert.equal(r.code, 0, r.stderr);
    }
  });
});

describe('school-data serve with the cabinet', () => {
  let store: TestStore;

  before(async () => {
    store = await createTestStore();
  });
  after(() => store.close());

  function get(url: string, ca: string): Promise<{ status: number; type: string | undefined; text: string }> {
    return new Promise((resolve, reject) => {
      https
        .get(url, { ca, agent: false }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'], text }));
        })
        .on('error', reject);
    });
  }

  it('serves the cabinet on its own port, prints its URL, and closes both listeners on SIGTERM', async () => {
    const [port, cabinetPort] = [await freePort(), await freePort()];
    const env = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, DATABASE_URL: store.url ?? '', SCHOOL_DATA_LOG_LEVEL: 'warn', PORT: String(port), SCHOOL_DATA_CABINET_PORT: String(cabinetPort) };
    const serve = await startServe(env);
    try {
      const output = serve.output();
      const start = output.indexOf('{\n  "base_url"');
      const banner = JSON.parse(output.slice(start, output.indexOf('\n}', start) + 2)) as Record<string, unknown>;
      assert.equal(banner.base_url, `https://127.0.0.1:${port}/api/public/v1/`);
      assert.equal(banner.cabinet_url, `https://127.0.0.1:${cabinetPort}/`);
      const { cert } = await loadTls({ dataDir: store.dataDir, tlsCert: null, tlsKey: null });
      const login = await get(`https://127.0.0.1:${cabinetPort}/login`, cert);
      assert.equal(login.status, 200);
      assert.equal(login.type, 'text/html; charset=utf-8');
      assert.ok(formFields(login.text, '/login').csrf);
      assert.equal((await get(`https://127.0.0.1:${port}/login`, cert)).status, 404);
      assert.equal((await get(`https://127.0.0.1:${cabinetPort}/api/public/v1/students`, cert)).status, 404);
      serve.child.kill('SIGTERM');
      assert.equal(await serve.exited, 0);
      await assert.rejects(get(`https://127.0.0.1:${cabinetPort}/login`, cert), /ECONNREFUSED/);
    } finally {
      if (serve.child.exitCode === null) serve.child.kill('SIGKILL');
    }
  });

  it('refuses a cabinet port equal to the API port, naming the variable', async () => {
    const r = await runCli(['serve'], { ...process.env, SCHOOL_DATA_DIR: store.dataDir, PORT: '9555', SCHOOL_DATA_CABINET_PORT: '9555' });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /SCHOOL_DATA_CABINET_PORT must differ from PORT/);
  });
});
