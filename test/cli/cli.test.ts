/**
 * The operator command line, run as a real process against the real store: every
 * command in human and --json form, and every error as one line on stderr with a
 * non-zero exit and nothing written.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { serveCommand } from '../../src/cli/commands/serve.js';
import { createOutput } from '../../src/cli/context.js';
import { describeError } from '../../src/cli/errors.js';
import { loadConfig } from '../../src/config/index.js';
import { isStoreUnavailable, openStore } from '../../src/db/index.js';
import { roomIn } from '../../src/db/unavailable.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { schoolData } from '../helpers/fixtures.js';
import { BIN, runCli, type CliResult } from '../helpers/processes.js';
import { freePort, REDIS_ONLY } from '../helpers/redis.js';
import { createTestStore, urlWithSchema, type TestStore } from '../helpers/store.js';

describe('school-data CLI', () => {
  let store: TestStore;
  let env: NodeJS.ProcessEnv;
  const cli = (...args: string[]) => runCli(args, env);
  const json = async (...args: string[]) => {
    const r = await cli(...args, '--json');
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as Record<string, unknown> & Record<string, unknown>[];
  };
  const fails = (r: CliResult, pattern: RegExp) => {
    assert.notEqual(r.code, 0);
    assert.equal(r.stderr.trim().split('\n').length, 1, `not one line: ${r.stderr}`);
    assert.match(r.stderr, /^school-data: /);
    assert.match(r.stderr, pattern);
    assert.ok(!r.stderr.includes('    at '), 'stack trace on stderr');
  };

  before(async () => {
    store = await createTestStore();
    env = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, DATABASE_URL: store.url ?? '', SCHOOL_DATA_LOG_LEVEL: 'warn' };
  });
  after(() => store.close());

  it('migrate is idempotent', async () => {
    const first = await json('migrate');
    assert.deepEqual(first.applied, []);
    const human = await cli('migrate');
    assert.equal(human.code, 0);
    assert.match(human.stdout, /up to date/);
  });

  it('serve on a database with no school says, in one line, how to get some', async () => {
    // Human output: the banner is what a newcomer reads.
    const child = spawn(process.execPath, [BIN, 'serve'], { env: { ...env, PORT: '0', SCHOOL_DATA_CABINET_PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        if (out.includes('stop with Ctrl-C')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`serve exited (${code}):\n${out}`)));
    });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    const hint = out.split('\n').filter((line) => line.includes('no schools yet'));
    assert.equal(hint.length, 1, out);
    assert.match(hint[0]!, /npx school-data demo/);
  });

  it('serve --json prints one JSON value on stdout, its log lines on stderr', async () => {
    const child = spawn(process.execPath, [BIN, 'serve', '--json'], { env: { ...env, PORT: '0', SCHOOL_DATA_CABINET_PORT: '0', SCHOOL_DATA_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let [stdout, stderr] = ['', ''];
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise((resolve) => child.on('exit', resolve));
    await new Promise<void>((resolve, reject) => {
      const started = () => stderr.includes('listening') && stdout.trimEnd().endsWith('}') && resolve();
      child.stdout.on('data', started);
      child.stderr.on('data', started);
      void exited.then((code) => reject(new Error(`serve exited (${String(code)}):\n${stdout}${stderr}`)));
    });
    child.kill('SIGTERM');
    await exited;
    const started = JSON.parse(stdout) as { base_url: string; store: string };
    assert.match(started.base_url, /^https:\/\/127\.0\.0\.1:\d+\/api\/public\/v1\/$/);
    assert.match(stderr, /"msg":"school-data API and cabinet listening"/);
    assert.match(stderr, /"msg":"shutting down"/);
  });

  it('serve stops gracefully on a SIGTERM sent the moment its API port opens', async () => {
    // Outside the range of ports given for port 0, so no server of a test running beside this
    // one can take it and answer the probe below before this child listens.
    const port = await freePort();
    const child = spawn(process.execPath, [BIN, 'serve'], { env: { ...env, PORT: String(port), SCHOOL_DATA_CABINET_PORT: '0', SCHOOL_DATA_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (code, signal) => resolve([code, signal])));
    let done = false;
    void exited.then(() => (done = true));
    // The first connection the port accepts: the signal follows within a millisecond or two.
    while (!done) {
      const open = await new Promise<boolean>((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => {
          socket.destroy();
          resolve(true);
        });
        socket.on('error', () => resolve(false));
      });
      if (open) break;
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    child.kill('SIGTERM');
    const [code, signal] = await exited;
    assert.deepEqual([code, signal], [0, null], out);
    assert.match(out, /"msg":"shutting down"/);
  });

  it('serve that fails to start once its stores are open closes them and ends, rather than stay up on its Redis connection', { skip: REDIS_ONLY }, async () => {
    const broken = await createTestStore();
    try {
      // A store without its usage queue's row: the usage recorder cannot open.
      await broken.db.deleteFrom('usage_queue').execute();
      const child = spawn(process.execPath, [BIN, 'serve'], {
        env: { ...env, SCHOOL_DATA_DIR: broken.dataDir, DATABASE_URL: broken.url ?? '', REDIS_URL: process.env.REDIS_URL, PORT: '0', SCHOOL_DATA_CABINET_PORT: '0' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (c, sig) => resolve([c, sig])));
      clearTimeout(timer);
      assert.equal(signal, null, `still running after 15 s: ${stderr}`);
      fails({ code: code ?? -1, stdout: '', stderr }, /unexpected error/);
    } finally {
      await broken.close();
    }
  });

  it('serve on a port another program holds says so, and how to choose another, in one line', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as net.AddressInfo).port;
    try {
      fails(await runCli(['serve'], { ...env, PORT: String(port), SCHOOL_DATA_CABINET_PORT: '0' }), new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: another program uses it.*PORT and SCHOOL_DATA_CABINET_PORT`));
    } finally {
      holder.close();
    }
  });

  it('creates, lists and re-plans schools', async () => {
    const created = await json('school', 'create', '--name', 'Автошкола Тест', '--plan', 'Profi', '--id', 'cli-school', '--timezone', 'Asia/Yekaterinburg');
    assert.equal(created.id, 'cli-school');
    assert.equal(created.timezone, 'Asia/Yekaterinburg');
    const generated = await json('school', 'create', '--name', 'Другая', '--plan', 'Free');
    assert.match(String(generated.id), /^sch_[0-9a-f]{12}$/);
    const listed = (await json('school', 'list')) as unknown as { id: string; plan: string }[];
    assert.deepEqual(
      listed.filter((s) => s.id === 'cli-school').map((s) => s.plan),
      ['Profi'],
    );
    const human = await cli('school', 'list');
    assert.match(human.stdout, /cli-school\s+Автошкола Тест\s+Profi/);
    const moved = await json('school', 'set-plan', '--school', 'cli-school', '--plan', 'VIP');
    assert.equal(moved.plan, 'VIP');
  });

  it('refuses bad school input with one line and writes nothing', async () => {
    fails(await cli('school', 'create', '--name', 'X', '--plan', 'Gold'), /plan/);
    fails(await cli('school', 'create', '--name', 'X', '--plan', 'VIP', '--timezone', '+03:00'), /unknown time zone .*use an IANA name/);
    fails(await cli('school', 'create', '--name', 'X', '--plan', 'VIP', '--currency', 'XYZ'), /ISO 4217 code in use/);
    fails(await cli('school', 'create', '--name', 'Two\nlines', '--plan', 'VIP'), /school name must not contain control characters/);
    fails(await cli('school', 'create', '--name', 'Again', '--plan', 'VIP', '--id', 'cli-school'), /already exists/);
    fails(await cli('school', 'create', '--plan', 'VIP'), /--name/);
    fails(await cli('school', 'set-plan', '--school', 'nope', '--plan', 'VIP'), /no school/);
    // The command prints createSchool's reason: the other values, by the same function in this
    // process rather than a process each.
    const refused = async (input: { name?: string; timezone?: string; currency?: string; id?: string }, reason: RegExp) => {
      const outcome = await createSchool(store.db, { name: 'X', plan: 'VIP', ...input });
      assert.ok(!outcome.ok, JSON.stringify(input));
      assert.match(outcome.reason, reason);
    };
    await refused({ timezone: 'Mars/Base' }, /time zone/);
    for (const offset of ['-0500', '+03']) await refused({ timezone: offset }, /unknown time zone .*use an IANA name/);
    await refused({ id: 'bad id' }, /school id/);
    for (const currency of ['XXX', 'RU', 'РУБ']) await refused({ currency }, /ISO 4217 code in use/);
    for (const name of ['Next\u0085line', 'Line\u2028separator', 'Right\u202eto left']) await refused({ name }, /school name must not contain control characters/);
    // 1-200 characters, an emoji being one.
    for (const name of ['X'.repeat(201), '🚗'.repeat(201)]) await refused({ name }, /school name must be 1-200 characters/);
    const emoji = await json('school', 'create', '--name', '🚗'.repeat(200), '--plan', 'Free');
    assert.equal(emoji.name, '🚗'.repeat(200));
    // A time zone is kept as its IANA name, whatever the case it was typed in; a currency in capitals.
    const typed = await createSchool(store.db, { name: 'Typed zone', plan: 'VIP', timezone: 'europe/MOSCOW', currency: 'eur' });
    assert.ok(typed.ok);
    assert.deepEqual([typed.value.timezone, typed.value.currency], ['Europe/Moscow', 'EUR']);
    const listed = (await json('school', 'list')) as unknown as { name: string }[];
    assert.equal(listed.filter((s) => s.name === 'X' || s.name === 'Again' || s.name.startsWith('X'.repeat(201)) || s.name === '🚗'.repeat(201)).length, 0);
  });

  it('creates a key shown once, lists it with its usage, and revokes it', async () => {
    const created = await json('key', 'create', '--school', 'cli-school', '--name', 'Бухгалтерия');
    assert.match(String(created.key), /^service_pk_[0-9a-f]{32}$/);
    const hex = String(created.key).slice('service_pk_'.length);
    assert.equal(created.hint, `service_pk_${hex.slice(0, 4)}...${hex.slice(-4)}`);
    const listed = (await json('key', 'list', '--school', 'cli-school')) as unknown as Record<string, unknown>[];
    // The spec's fields, then the options of docs/api/keys.md.
    for (const field of ['created_at', 'hint', 'id', 'last_used_at', 'name', 'request_count', 'revoked_at', 'scopes', 'expires_at', 'allow', 'unused_revoke_at']) {
      assert.ok(field in listed[0]!, `key list has no ${field}`);
    }
    assert.equal(listed[0]!.request_count, 0);
    assert.ok(!JSON.stringify(listed).includes(String(created.key)), 'key value listed');
    const human = await cli('key', 'create', '--school', 'cli-school', '--name', 'сайт');
    assert.match(human.stdout, /service_pk_[0-9a-f]{32}/);
    assert.match(human.stdout, /shown only this once/);
    const revoked = await json('key', 'revoke', '--key', String(created.id));
    assert.match(String(revoked.revoked_at), /Z$/);
    fails(await cli('key', 'revoke', '--key', 'key_nope'), /no key/);
  });

  it('refuses keys for Free and Standart schools, and an 11th active key', async () => {
    await json('school', 'create', '--name', 'Std', '--plan', 'Standart', '--id', 'cli-std');
    fails(await cli('key', 'create', '--school', 'cli-std', '--name', 'x'), /Profi and VIP/);
    await json('school', 'create', '--name', 'Many', '--plan', 'Profi', '--id', 'cli-many');
    // A name's length is in characters: a hundred emoji are a hundred. The other nine are made
    // in this process (the limit between commands is the next test's, through the CLI).
    await json('key', 'create', '--school', 'cli-many', '--name', '🚗'.repeat(100));
    for (let i = 1; i < 10; i++) assert.ok((await createKey(store.db, 'cli-many', `k${i}`)).ok);
    fails(await cli('key', 'create', '--school', 'cli-many', '--name', 'eleventh'), /^school-data: the school already has 10 active keys; revoke an unused key first\n$/);
    // A key this shell judges unused is shown revoked by its list, which marks nothing: the
    // refusal names it and what ends it, where it would otherwise contradict the list.
    const stale = await store.db.selectFrom('api_keys').select(['id', 'created_at']).where('school_id', '=', 'cli-many').where('name', '=', 'k9').executeTakeFirstOrThrow();
    await store.db.updateTable('api_keys').set({ created_at: '2020-01-01T00:00:00Z' }).where('id', '=', stale.id).execute();
    const shown = (await json('key', 'list', '--school', 'cli-many')) as unknown as { id: string; status: string }[];
    assert.equal(shown.find((k) => k.id === stale.id)!.status, 'revoked');
    fails(
      await runCli(['key', 'create', '--school', 'cli-many', '--name', 'eleventh'], { ...env, SCHOOL_DATA_KEY_UNUSED_DAYS: '90' }),
      new RegExp(`^school-data: the school already has 10 active keys; revoke an unused key first \\(${stale.id}: not used for 90 days, shown revoked by the key list; a server with the same SCHOOL_DATA_KEY_UNUSED_DAYS revokes it within a minute\\)\n$`),
    );
    await store.db.updateTable('api_keys').set({ created_at: stale.created_at }).where('id', '=', stale.id).execute();
    const keys = (await json('key', 'list', '--school', 'cli-many')) as unknown as { id: string }[];
    assert.equal(keys.length, 10);
    await json('key', 'revoke', '--key', keys[0]!.id);
    await json('key', 'create', '--school', 'cli-many', '--name', 'after revoke');
    fails(await cli('key', 'create', '--school', 'cli-many', '--name', ''), /1-100/);
    fails(await cli('key', 'list', '--school', 'nope'), /no school/);
  });

  it('lets commands that write at the same time wait their turn, and keeps the 10-key limit between them', async () => {
    await json('school', 'create', '--name', 'Busy', '--plan', 'VIP', '--id', 'cli-busy');
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => cli('key', 'create', '--school', 'cli-busy', '--name', `at once ${i}`)));
    for (const r of results) {
      if (r.code !== 0) fails(r, /revoke an unused key first/);
    }
    assert.equal(results.filter((r) => r.code === 0).length, 10, results.map((r) => r.stderr).join(''));
    assert.equal(((await json('key', 'list', '--school', 'cli-busy')) as unknown as unknown[]).length, 10);
  });

  it('lets commands that start at once on a new data directory migrate it one at a time', async () => {
    // Each command migrates the store first: on a new SQLite file, they all find every migration pending.
    const dataDir = fs.mkdtempSync(path.join(store.dataDir, 'fresh-'));
    const fresh = { ...env, DATABASE_URL: '', SCHOOL_DATA_DIR: dataDir };
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => runCli(['school', 'create', '--name', `At once ${i}`, '--plan', 'Free', '--id', `fresh-${i}`], fresh)));
    for (const r of results) assert.equal(r.code, 0, r.stderr);
    const listed = await runCli(['school', 'list', '--json'], fresh);
    assert.equal((JSON.parse(listed.stdout) as unknown[]).length, 6);
  });

  it('imports a file whole and idempotently, and refuses a bad one without writing', async () => {
    const file = path.join(store.dataDir, 'data.json');
    fs.writeFileSync(file, JSON.stringify(schoolData('CLI')));
    const first = await json('import', '--school', 'cli-school', file);
    assert.equal(first.ok, true);
    assert.equal((first.counts as Record<string, number>).students, 5);
    const again = await cli('import', '--school', 'cli-school', file);
    assert.equal(again.code, 0, again.stderr);
    const count = async () => Number((await store.db.selectFrom('students').select((eb) => eb.fn.countAll().as('n')).where('school_id', '=', 'cli-school').executeTakeFirstOrThrow()).n);
    assert.equal(await count(), 5);

    const bad = schoolData('BAD');
    (bad.students![2] as Record<string, unknown>).category = 'Z';
    (bad.students![0] as Record<string, unknown>).id = 'new-one';
    fs.writeFileSync(file, JSON.stringify(bad));
    fails(await cli('import', '--school', 'cli-school', file), /students\[2\]\.category/);
    assert.equal(await count(), 5);
    const names = await store.db.selectFrom('students').select('full_name').where('school_id', '=', 'cli-school').execute();
    assert.ok(names.every((n) => n.full_name.endsWith(' CLI')), 'a refused import changed data');

    fs.writeFileSync(file, '{"students": [');
    fails(await cli('import', '--school', 'cli-school', file), /not valid JSON/);
    fails(await cli('import', '--school', 'cli-school', path.join(store.dataDir, 'missing.json')), /no such file/);
    // With --json, stdout still holds one JSON value: the import refused, saying why.
    const missing = await cli('import', '--school', 'cli-school', '--json', store.dataDir);
    fails(missing, /not a file/);
    assert.deepEqual(JSON.parse(missing.stdout), { ok: false, errors: [{ array: null, index: null, field: null, reason: `cannot read ${store.dataDir}: not a file` }] });
    fails(await cli('import', '--school', 'nope', file), /school "nope" does not exist|not valid JSON/);
    // And so it does when the store cannot be reached.
    const down = await runCli(['import', '--school', 'cli-school', '--json', file], { ...env, DATABASE_URL: 'postgres://root@127.0.0.1:1/none' });
    fails(down, /the data store is unavailable: connect ECONNREFUSED/);
    assert.deepEqual(JSON.parse(down.stdout), { ok: false, errors: [{ array: null, index: null, field: null, reason: 'the data store is unavailable: connect ECONNREFUSED 127.0.0.1:1' }] });
    // And when the configuration cannot be read: the same value, and the same line on stderr.
    for (const [name, value] of [['DATABASE_URL', 'mysql://x'], ['PORT', 'x']] as const) {
      const bad = await runCli(['import', '--school', 'cli-school', '--json', file], { ...env, [name]: value });
      fails(bad, new RegExp(`^school-data: ${name} must be`));
      assert.deepEqual(JSON.parse(bad.stdout), { ok: false, errors: [{ array: null, index: null, field: null, reason: bad.stderr.slice('school-data: '.length, -1) }] });
    }

    // A file of deletions only.
    fs.writeFileSync(file, JSON.stringify({ deleted: { leads: ['ld3'] } }));
    const deletions = await cli('import', '--school', 'cli-school', file);
    assert.equal(deletions.code, 0, deletions.stderr);
    assert.match(deletions.stdout, /: read no records; 1 change \(deleted 1 leads\), change seq \d+$/m);
  });

  it('says a data directory this user may not write is one, naming it, rather than "unexpected error"', () => {
    for (const [code, message] of [['SQLITE_READONLY', 'attempt to write a readonly database'], ['SQLITE_CANTOPEN', 'unable to open database file']] as const) {
      assert.equal(
        describeError(Object.assign(new Error(message), { code }), '/srv/data'),
        `cannot write the database in /srv/data (${message}): this user needs to be able to write the directory and its files (SCHOOL_DATA_DIR, --data-dir)`,
      );
    }
  });

  it('says the SQLite file is locked by another writer, and what to do', () => {
    assert.match(describeError(Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }), '/srv/data'), /^the SQLite file stayed locked by another writer .*: nothing was written; run it again once that ends$/);
  });

  it('says a full disk is full, on either store, rather than "unexpected error"', () => {
    for (const [code, message] of [['SQLITE_FULL', 'database or disk is full'], ['53100', 'could not extend file: No space left on device']] as const) {
      const line = describeError(Object.assign(new Error(message), { code }));
      assert.match(line, /^the disk of the data store is full \(/, code);
      assert.ok(line.includes(message) && !line.includes('\n'), line);
    }
    // No room at all for SQLite's shared-memory file or journal is an I/O error to it: a full
    // disk when the data directory has no room left (docs/decisions.md, "A full disk is
    // called full"), an outage otherwise.
    const ioError = Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR_SHMSIZE' });
    assert.match(describeError(ioError, '/data', () => 4096), /^the disk of the data store is full \(disk I\/O error\): /);
    assert.equal(describeError(ioError, '/data', () => 10 * 2 ** 30), 'the data store is unavailable: disk I/O error');
    assert.equal(describeError(ioError, '/data', () => null), 'the data store is unavailable: disk I/O error');
    assert.equal(describeError(ioError), 'the data store is unavailable: disk I/O error');
    assert.match(describeError(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' })), /^the disk of the data store is full \(ENOSPC: /);
    // The room looked at is the file system's, as this process may use it.
    assert.ok((roomIn(os.tmpdir()) ?? 0) > 0);
    assert.equal(roomIn(path.join(os.tmpdir(), 'no-such-directory', 'x')), null);
  });

  it('names a connection PostgreSQL refuses, and a request then gets 503 rather than 500', () => {
    for (const [code, message] of [
      ['28P01', 'password authentication failed for user "app"'], ['3D000', 'database "app" does not exist'], ['DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'],
      ['55000', 'database "app" is not currently accepting connections'], ['42501', 'permission denied for database "app"'],
    ] as const) {
      const err = Object.assign(new Error(message), { code });
      assert.equal(describeError(err), `PostgreSQL refused the connection: ${message} (check DATABASE_URL)`);
      assert.ok(isStoreUnavailable(err), code);
    }
    assert.equal(describeError(new Error('The server does not support SSL connections')), 'PostgreSQL refused the connection: The server does not support SSL connections (check DATABASE_URL)');
    // A server speaking another language is told by the routine that refused the connection.
    assert.ok(isStoreUnavailable(Object.assign(new Error('база данных "app" не принимает подключения'), { code: '55000', routine: 'CheckMyDatabase' })));
    // The same codes raised by a query are no refusal of a connection.
    assert.ok(!isStoreUnavailable(Object.assign(new Error('permission denied for table students'), { code: '42501' })));
  });

  it('says what is wrong with the store a setting points at, and which setting to check, for a command and for serve alike', async () => {
    const serve = (over: NodeJS.ProcessEnv) => runCli(['serve'], { ...env, PORT: '0', SCHOOL_DATA_CABINET_PORT: '0', ...over });
    // A school-data.db that is not SQLite's.
    const dir = fs.mkdtempSync(path.join(store.dataDir, 'not-sqlite-'));
    fs.writeFileSync(path.join(dir, 'school-data.db'), 'not a database, but long enough to be read as its header\n'.repeat(4));
    const notDb = `${dir}/school-data.db is not a SQLite database (file is not a database): check that SCHOOL_DATA_DIR (or --data-dir) names the data directory, or move the file away to start a new database there`;
    for (const r of [await runCli(['school', 'list'], { ...env, DATABASE_URL: '', SCHOOL_DATA_DIR: dir }), await serve({ DATABASE_URL: '', SCHOOL_DATA_DIR: dir })]) {
      fails(r, /^school-data: /);
      assert.equal(r.stderr, `school-data: ${notDb}\n`);
    }
    // A socket directory with no PostgreSQL in it: an outage, also to a running server (503, not 500).
    const noSocket = /^school-data: the data store is unavailable: no PostgreSQL socket at \/nonexistent-dir\/\.s\.PGSQL\.5432 \(ENOENT\): PostgreSQL is not running, or keeps its socket in another directory \(check the host in DATABASE_URL\)\n$/;
    const socketUrl = 'postgres://school@localhost/school?host=/nonexistent-dir';
    fails(await runCli(['school', 'list'], { ...env, DATABASE_URL: socketUrl }), noSocket);
    fails(await serve({ DATABASE_URL: socketUrl }), noSocket);
    assert.ok(isStoreUnavailable(Object.assign(new Error('connect ENOENT /run/postgresql/.s.PGSQL.5432'), { code: 'ENOENT', syscall: 'connect' })));
    assert.ok(!isStoreUnavailable(Object.assign(new Error("ENOENT: no such file or directory, open 'x'"), { code: 'ENOENT', syscall: 'open' })));
    // A damaged SQLite file, said as such.
    assert.equal(
      describeError(Object.assign(new Error('database disk image is malformed'), { code: 'SQLITE_CORRUPT' }), '/srv/data'),
      '/srv/data/school-data.db is damaged (database disk image is malformed): restore a copy of it (docs/operations.md, "Backups")',
    );
    // A search_path that names no schema there is (PostgreSQL only).
    const noSchema = /^school-data: PostgreSQL has no schema to create the tables in \(no schema has been selected to create in\): the search_path DATABASE_URL sets \(options=-c search_path=\.\.\.\) names none that exists; create the schema, or correct DATABASE_URL\n$/;
    assert.match(`school-data: ${describeError(Object.assign(new Error('no schema has been selected to create in'), { code: '3F000' }))}\n`, noSchema);
    if (store.url !== null) {
      const url = urlWithSchema(store.url, `no_such_schema_${Date.now()}`);
      fails(await runCli(['school', 'list'], { ...env, DATABASE_URL: url }), noSchema);
      fails(await serve({ DATABASE_URL: url }), noSchema);
    }
  });

  it('reports configuration and usage errors in one line', async () => {
    fails(await runCli(['school', 'list'], { ...env, SCHOOL_DATA_DB_TIMEOUT_MS: 'soon' }), /SCHOOL_DATA_DB_TIMEOUT_MS/);
    // A URL is named, never echoed (it may hold a password), also when only its port is wrong
    // (the other wrong URLs: test/config/config.test.ts).
    const bad = await runCli(['school', 'list'], { ...env, DATABASE_URL: 'postgres://u:secret@127.0.0.1:99999/x' });
    fails(bad, /^school-data: DATABASE_URL is not a valid URL/);
    assert.ok(!bad.stderr.includes('secret'), bad.stderr);
    // Certificate files: the setting is named, whether the file cannot be read or holds no PEM.
    const json = path.join(store.dataDir, 'not-a-cert.json');
    fs.writeFileSync(json, '{}');
    fails(await runCli(['serve'], { ...env, DATABASE_URL: '', SCHOOL_DATA_TLS_CERT: '/nonexistent/cert.pem', SCHOOL_DATA_TLS_KEY: json }), /^school-data: SCHOOL_DATA_TLS_CERT: cannot read \/nonexistent\/cert.pem \(ENOENT\)\n$/);
    fails(await runCli(['serve'], { ...env, DATABASE_URL: '', SCHOOL_DATA_TLS_CERT: json, SCHOOL_DATA_TLS_KEY: json }), /^school-data: SCHOOL_DATA_TLS_CERT and SCHOOL_DATA_TLS_KEY must name a PEM certificate and its private key/);
    // A data directory that cannot be made is named at once (Node's own recursive mkdir spins there).
    fails(await runCli(['school', 'list'], { ...env, DATABASE_URL: '', SCHOOL_DATA_DIR: '/proc/school-data-nope' }), /SCHOOL_DATA_DIR: cannot create the directory \/proc\/school-data-nope/);
    // A serve flag given empty (a script's unset variable) is refused, not replaced by the variable or the default.
    // (The certificate that cannot be read stops a serve that would start anyway, before it writes.)
    const noCert = { ...env, SCHOOL_DATA_TLS_CERT: '/nonexistent/cert.pem', SCHOOL_DATA_TLS_KEY: '/nonexistent/key.pem' };
    for (const [flag, variable] of [['--data-dir', 'SCHOOL_DATA_DIR'], ['--port', 'PORT'], ['--host', 'HOST'], ['--cabinet-port', 'SCHOOL_DATA_CABINET_PORT']]) {
      fails(await runCli(['serve', flag!, ''], noCert), new RegExp(`^school-data: ${flag} is empty: leave the option out to use ${variable} or its default\n$`));
    }
    // --workers in decimal digits only: one through the process, the others by the same
    // function in this one (with no REDIS_URL, so that one let through could not start workers).
    fails(await runCli(['serve', '--workers', '1e1'], noCert), /^school-data: --workers must be an integer from 1 to 64\n$/);
    const ctx = { config: loadConfig({ ...env, REDIS_URL: '' }), out: createOutput(false) };
    for (const workers of ['0x4', ' 4 ', '2.0', '0', '65']) await assert.rejects(serveCommand(ctx, { workers }), { name: 'CliError', message: '--workers must be an integer from 1 to 64' });
    // A link to a directory that is not there (a volume not mounted) is named, not followed for ever.
    const dangling = path.join(store.dataDir, 'dangling');
    fs.symlinkSync(path.join(store.dataDir, 'unmounted', 'data'), dangling);
    fails(await runCli(['school', 'list'], { ...env, DATABASE_URL: '', SCHOOL_DATA_DIR: dangling }), /^school-data: SCHOOL_DATA_DIR: \S+dangling is a symbolic link to \S+unmounted\/data, which does not exist\n$/);
    const file = path.join(store.dataDir, 'a-file');
    fs.writeFileSync(file, '');
    fails(await runCli(['school', 'list'], { ...env, DATABASE_URL: '', SCHOOL_DATA_DIR: file }), /^school-data: SCHOOL_DATA_DIR: .*a-file is not a directory\n$/);
    // Given by serve's flag, the data directory is named by the flag, whichever step finds it wrong.
    fails(await runCli(['serve', '--data-dir', file], { ...env, DATABASE_URL: '', SCHOOL_DATA_DIR: store.dataDir }), /^school-data: --data-dir \(SCHOOL_DATA_DIR\): cannot read the certificate in \S+a-file\/tls \(ENOTDIR\)\n$/);
    assert.throws(() => openStore(loadConfig({ ...env, DATABASE_URL: '' }, { dataDir: file })), { name: 'ConfigError', message: `--data-dir (SCHOOL_DATA_DIR): ${file} is not a directory` });
    fails(await cli('frobnicate'), /unknown command/);
    fails(await cli('key', 'create', '--school', 'x'), /--name/);
    // An id typed with a line break or a tab is named whole, on the one line.
    fails(await cli('key', 'revoke', '--key', 'key_a\nb'), /^school-data: no key with id "key_a\\nb"\n$/);
    fails(await cli('school', 'set-plan', '--school', 'x\ty\u2028', '--plan', 'VIP'), /^school-data: no school with id "x\\ty\\u2028"\n$/);
  });

  it('prints its version, and points every usage error to the --help that lists what it takes', async () => {
    const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const r = await cli(flag);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `${pkg.version}\n`);
      assert.equal(r.stderr, '');
    }
    fails(await cli('frobnicate'), /^school-data: unknown command 'frobnicate' \(see npx school-data --help\)$/m);
    // Commander's suggestion is said on the same line.
    fails(await cli('key', 'lst'), /^school-data: unknown command 'lst' \(did you mean list\?\) \(see npx school-data key --help\)$/m);
    fails(await cli('key'), /key needs a command: create, list, revoke, roll, allow, log \(see npx school-data key --help\)/);
    fails(await cli(), /give a command: serve, migrate, .* \(see npx school-data --help\)/);
    fails(await cli('school', 'create', '--plan', 'VIP'), /--name.*\(see npx school-data school create --help\)/);
    fails(await cli('key', 'list', '--school', 'x', '--jsn'), /^school-data: unknown option '--jsn' \(did you mean --json\?\) \(see npx school-data key list --help\)$/m);
    // What commander echoes back is made printable: still one line.
    fails(await cli('key', 'list', '--school', 'x', '--bo\ngus'), /unknown option '--bo\\ngus'/);
    fails(await cli('migrate', 'one\ntwo'), /too many arguments for 'migrate'.* \(see npx school-data migrate --help\)/);
    // An option given twice is refused, not the last one taken: which of the two was meant?
    fails(await cli('key', 'list', '--school', 'a', '--school=b'), /^school-data: option '--school' is given more than once: give it once \(see npx school-data key list --help\)$/m);
    fails(await cli('key', 'roll', '--key', 'k', '--overlap', '1h', '--overlap', 'now'), /option '--overlap' is given more than once/);
    const help = await cli('--help');
    assert.equal(help.code, 0);
    assert.match(help.stdout, /-V, --version/);
    // `help` names a command at any depth, as its --help does.
    for (const args of [['key', 'create'], ['director', 'set-password'], ['key']]) {
      const viaHelp = await cli('help', ...args);
      assert.equal(viaHelp.code, 0, viaHelp.stderr);
      assert.equal(viaHelp.stdout, (await cli(...args, '--help')).stdout);
      assert.match(viaHelp.stdout, new RegExp(`^Usage: school-data ${args.join(' ')} `));
    }
  });

  it('says in one line that it is not built yet, rather than a module-not-found stack', async () => {
    const bin = path.join(store.dataDir, 'unbuilt', 'bin', 'school-data.js');
    fs.mkdirSync(path.dirname(bin), { recursive: true });
    fs.copyFileSync(BIN, bin);
    const r = await new Promise<CliResult>((resolve, reject) => {
      const child = spawn(process.execPath, [bin, '--help'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    });
    fails(r, /not built yet; run "npm run build"/);
  });

  it('says in one line which Node.js it needs, on a line older than 22.18 (where the SQLite driver crashes)', async () => {
    for (const version of ['20.20.2', '22.17.1']) {
      // The process told it runs on `version` before the CLI starts (NODE_OPTIONS splits at spaces: none in the module).
      const older = `--import=data:text/javascript,Object.defineProperty(process,'versions',{value:{...process.versions,node:'${version}'}})`;
      const r = await runCli(['school', 'list'], { ...env, NODE_OPTIONS: older });
      fails(r, new RegExp(`needs Node\\.js 22\\.18 or later; this is ${version.replaceAll('.', '\\.')}$`, 'm'));
    }
    assert.equal((await cli('school', 'list')).code, 0, 'this line runs it');
  });
});
