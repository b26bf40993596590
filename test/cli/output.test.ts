/**
 * The command line where its output goes wrong or its input is a mistake a script makes:
 * what is shown only once (a new key, a generated password) is never lost without a word
 * (a reader that left, a full disk, /dev/null), a failed write is one line and never a
 * stack, text holding a key is refused as a name or an id, an option's value that is
 * another option is a usage error, and so is a help request for a command that does not
 * exist.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { passwordFromStdin } from '../../src/cli/commands/director/add.js';
import { CliError } from '../../src/cli/context.js';
import { hashPassword, verifyDirector } from '../../src/management/directors.js';
import { BIN, runCli, type CliResult } from '../helpers/processes.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

describe('the command line when its output fails, and the mistakes of scripts', () => {
  let store: TestStore;
  let env: NodeJS.ProcessEnv;
  const cli = (...args: string[]) => runCli(args, env);
  const keyNames = async () => (JSON.parse((await cli('key', 'list', '--school', 'out-school', '--json')).stdout) as { id: string; name: string; retires_at: string | null }[]);

  /** Runs the CLI with its stdout on `stdout` (a file descriptor), or on a pipe whose reader leaves at once. */
  function runWithStdout(args: string[], stdout: number | 'gone'): Promise<CliResult> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', stdout === 'gone' ? 'pipe' : stdout, 'pipe'] });
      if (stdout === 'gone') child.stdout!.destroy();
      let stderr = '';
      child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code: code ?? -1, stdout: '', stderr }));
    });
  }
  const oneLine = (r: CliResult) => {
    assert.equal(r.stderr.trim().split('\n').length, 1, `not one line: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /\n\s+at |Error:/, 'a stack trace');
  };

  before(async () => {
    store = await createTestStore();
    env = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, DATABASE_URL: store.url ?? '', SCHOOL_DATA_LOG_LEVEL: 'warn' };
    assert.equal((await cli('school', 'create', '--name', 'Output', '--plan', 'VIP', '--id', 'out-school')).code, 0);
  });
  after(() => store.close());

  it('a new key whose reader left: exit 1, and one line naming the key and what to do', async () => {
    const r = await runWithStdout(['key', 'create', '--school', 'out-school', '--name', 'reader left', '--json'], 'gone');
    assert.equal(r.code, 1, r.stderr);
    oneLine(r);
    const made = (await keyNames()).find((k) => k.name === 'reader left');
    assert.ok(made, 'the key was made');
    assert.match(r.stderr, new RegExp(`the key ${made.id} "reader left" was made for school out-school, but standard output could not take it \\(EPIPE\\): revoke it \\(npx school-data key revoke --key ${made.id}\\)`));
  });

  it('a new key on a full disk: the same; a list on a full disk: one line, exit 1', async () => {
    const full = fs.openSync('/dev/full', 'w');
    try {
      const key = await runWithStdout(['key', 'create', '--school', 'out-school', '--name', 'disk full'], full);
      assert.equal(key.code, 1);
      oneLine(key);
      assert.match(key.stderr, /"disk full" was made .* \(ENOSPC\): revoke it/);
      const list = await runWithStdout(['school', 'list'], full);
      assert.equal(list.code, 1);
      oneLine(list);
      assert.match(list.stderr, /^school-data: standard output could not be written \(ENOSPC\)$/m);
    } finally {
      fs.closeSync(full);
    }
  });

  it('a new key, a generated password or the demo is not made when standard output is /dev/null', async () => {
    const nul = fs.openSync('/dev/null', 'w');
    try {
      for (const args of [
        ['key', 'create', '--school', 'out-school', '--name', 'nowhere'],
        ['director', 'add', '--school', 'out-school', '--email', 'nowhere@example.com'],
        ['demo'],
      ]) {
        const r = await runWithStdout(args, nul);
        assert.equal(r.code, 1);
        oneLine(r);
        assert.match(r.stderr, /standard output goes to \/dev\/null \(or is closed\): the (new key|generated password|demo keys and passwords) would be shown nowhere; nothing was made/);
      }
    } finally {
      fs.closeSync(nul);
    }
    assert.doesNotMatch((await cli('school', 'list')).stdout, /demo-vip/);
    assert.equal((await keyNames()).some((k) => k.name === 'nowhere'), false);
    assert.doesNotMatch((await cli('director', 'list', '--school', 'out-school')).stdout, /nowhere@/);
  });

  it('a reader that stops early is no error where nothing was shown only once', async () => {
    const r = await runWithStdout(['openapi'], 'gone');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
  });

  it('refuses a key as a school id, a school name, a key name or a director\'s email', async () => {
    const key = `service_pk_${'ab'.repeat(16)}`;
    for (const [args, pattern] of [
      [['school', 'create', '--name', 'X', '--plan', 'VIP', '--id', key], /school id must not hold an API key/],
      [['school', 'create', '--name', `a ${key}`, '--plan', 'VIP'], /school name must not hold an API key/],
      [['key', 'create', '--school', 'out-school', '--name', key.toUpperCase()], /key name must not hold an API key/],
      [['director', 'add', '--school', 'out-school', '--email', `${key}@example.com`], /email must not hold an API key/],
    ] as const) {
      const r = await cli(...args);
      assert.equal(r.code, 1);
      oneLine(r);
      assert.match(r.stderr, pattern);
    }
    assert.doesNotMatch((await cli('school', 'list')).stdout, /service_pk_/i);
    assert.doesNotMatch((await cli('director', 'list', '--school', 'out-school')).stdout, /service_pk_/i);
    // A director added before the rule still signs in, and the operator can still give them a password.
    const email = `${key}@old.example`;
    await store.db.insertInto('directors').values({ id: 'dir_0123456789abcdef', school_id: 'out-school', email, password_hash: await hashPassword('an old long password'), created_at: '2026-01-01T00:00:00Z' }).execute();
    assert.equal((await verifyDirector(store.db, email, 'an old long password'))?.email, email);
    assert.equal((await cli('director', 'set-password', '--email', email)).code, 0);
  });

  it("an option whose value is another option (a script's unset variable) is a usage error", async () => {
    const r = await cli('key', 'create', '--school', 'out-school', '--name', '--json');
    assert.equal(r.code, 2);
    oneLine(r);
    assert.match(r.stderr, /option '--name' has '--json' for its value, which is an option: is its value missing\?/);
    assert.equal((await keyNames()).some((k) => k.name === '--json'), false);
  });

  it('help for a command that does not exist is a usage error; for one that does, the help, also as JSON', async () => {
    for (const args of [['help', 'nope'], ['nope', '--help'], ['key', 'nope', '--help']]) {
      const r = await cli(...args);
      assert.equal(r.code, 2, args.join(' '));
      assert.equal(r.stderr, "school-data: unknown command 'nope' (see npx school-data --help)\n");
    }
    const known = await cli('help', 'key', 'create');
    assert.equal(known.code, 0);
    assert.match(known.stdout, /--scopes/);
    assert.equal((await cli('help', 'help')).code, 0);
    // With --json, as every command's output: one JSON value.
    for (const args of [['help', 'key', 'create', '--json'], ['key', 'create', '--help', '--json']]) {
      const r = await cli(...args);
      assert.equal(r.code, 0);
      const help = JSON.parse(r.stdout) as { command: string; options: { flags: string; required: boolean }[] };
      assert.equal(help.command, 'school-data key create');
      assert.deepEqual(help.options.find((o) => o.flags === '--school <id>'), { flags: '--school <id>', description: 'school id', required: true, choices: null, default: null });
    }
    const root = JSON.parse((await cli('help', '--json')).stdout) as { commands: { name: string }[] };
    assert.ok(root.commands.some((c) => c.name === 'import'));
  });

  it('an import of a path that is no readable file says why, also in --json', async () => {
    const dir = fs.mkdtempSync(`${store.dataDir}/import-`);
    const r = await cli('import', '--school', 'out-school', `${dir}/missing/file.json`, '--json');
    assert.equal(r.code, 1);
    assert.deepEqual((JSON.parse(r.stdout) as { errors: { reason: string }[] }).errors.map((e) => e.reason), [`cannot read ${dir}/missing/file.json: no such file`]);
    const folder = await cli('import', '--school', 'out-school', dir);
    assert.equal(folder.stderr, `school-data: cannot read ${dir}: not a file\n`);
  });

  it("the key list's table says until when a rolled key keeps working", async () => {
    const created = JSON.parse((await cli('key', 'create', '--school', 'out-school', '--name', 'to roll', '--json')).stdout) as { id: string };
    assert.equal((await cli('key', 'roll', '--key', created.id, '--overlap', '1h')).code, 0);
    const old = (await keyNames()).find((k) => k.id === created.id)!;
    assert.ok(old.retires_at !== null);
    assert.match((await cli('key', 'list', '--school', 'out-school')).stdout, new RegExp(`${created.id} .* active until ${old.retires_at} \\(rolled\\)`));
  });

  it('serve on a host name that does not resolve says so, naming HOST, not the data store', async () => {
    const r = await cli('serve', '--host', 'no-such-host.invalid', '--port', '18999', '--cabinet-port', '18998');
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^school-data: cannot listen on no-such-host\.invalid: no such address \(\w+\); check HOST \(or --host\)\n$/);
  });

  /**
   * Runs the CLI while another connection holds SQLite's write lock, released once the command
   * says it waits (a second in, however slowly it starts); a command that serves is stopped once
   * `started` holds of its stdout.
   */
  async function whileLocked(args: string[], started?: (stdout: string) => boolean): Promise<CliResult> {
    const holder = new SQLite(path.join(store.dataDir, 'school-data.db'));
    holder.exec('begin immediate');
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...env, SCHOOL_DATA_DB_TIMEOUT_MS: '200', PORT: '0', SCHOOL_DATA_CABINET_PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
      if (started?.(stdout) === true) child.kill('SIGTERM');
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
      if (stderr.includes('waiting for') && holder.inTransaction) holder.exec('commit');
    });
    // Should it never say so, the lock goes after 20 s, and a server is stopped after 30 s: a failed assertion, not a hung test.
    const backstop = setTimeout(() => holder.inTransaction && holder.exec('commit'), 20_000);
    const stop = setTimeout(() => child.kill('SIGKILL'), 30_000);
    try {
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      return { code: code ?? -1, stdout, stderr };
    } finally {
      clearTimeout(backstop);
      clearTimeout(stop);
      if (holder.inTransaction) holder.exec('commit');
      holder.close();
    }
  }
  const WAITING = "school-data: waiting for the SQLite file's write lock, held by another writer (an import merging its records holds it until it commits); Ctrl-C to give up\n";

  it("a command on SQLite waits out another writer's lock (an import's merge), saying so once, and then does its work", { skip: process.env.DATABASE_URL ? 'the embedded store only' : false }, async () => {
    const created = JSON.parse((await cli('key', 'create', '--school', 'out-school', '--name', 'revoked while locked', '--json')).stdout) as { id: string };
    const r = await whileLocked(['key', 'revoke', '--key', created.id]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, WAITING);
    assert.match(r.stdout, /is revoked/);
  });

  it("serve on SQLite, whose upgrade must rebuild, waits out another writer's lock as the commands do, then starts", { skip: process.env.DATABASE_URL ? 'the embedded store only' : false }, async () => {
    // A part of the read model made by an older version: the start rebuilds it, which writes.
    const file = new SQLite(path.join(store.dataDir, 'school-data.db'));
    const version = () => (file.prepare("select version from read_model_versions where part = 'day_totals'").get() as { version: number }).version;
    const current = version();
    file.prepare("update read_model_versions set version = version - 1 where part = 'day_totals'").run();
    try {
      const r = await whileLocked(['serve', '--json'], (stdout) => stdout.includes('"base_url"'));
      assert.equal(r.code, 0, r.stderr);
      assert.ok(r.stderr.startsWith(WAITING), r.stderr);
      assert.match(r.stdout, /"base_url"/);
      assert.equal(version(), current, 'rebuilt');
    } finally {
      file.close();
    }
  });

  it('a password on a pipe left open with nothing on it, or with a line not ended, is refused after the wait, never waited for forever', async () => {
    const silent = new PassThrough() as unknown as NodeJS.ReadStream;
    await assert.rejects(passwordFromStdin(silent, 100), (err: unknown) => err instanceof CliError && /nothing came on stdin in 0.1 s/.test(err.message));
    const given = new PassThrough() as unknown as NodeJS.ReadStream & PassThrough;
    given.end('a-password-123\n');
    assert.deepEqual(await passwordFromStdin(given, 100), { password: 'a-password-123', generated: false });
    // A line begun and never ended, the pipe left open.
    const partial = new PassThrough() as unknown as NodeJS.ReadStream & PassThrough;
    partial.write('a-pass');
    setTimeout(() => partial.write('word'), 50);
    const noLineEnd = /^the password on stdin has no line end, and nothing more came in 0.1 s/;
    await assert.rejects(passwordFromStdin(partial, 100), (err: unknown) => err instanceof CliError && noLineEnd.test(err.message));
    // The wait is for silence, not for the whole line: a slow writer, a piece every 60 ms for longer than it, is read to its end.
    const slow = new PassThrough() as unknown as NodeJS.ReadStream & PassThrough;
    const pieces = ['a-', 'slow', '-pass', 'word', '-123', '\n'];
    const writing = (async () => {
      for (const piece of pieces) {
        await new Promise((resolve) => setTimeout(resolve, 60));
        slow.write(piece);
      }
    })();
    assert.deepEqual(await passwordFromStdin(slow, 100), { password: 'a-slow-password-123', generated: false });
    await writing;
  });

  it('a password on stdin is its first line as UTF-8 text: an editor\'s byte order mark and line end left out, other encodings refused', async () => {
    const piped = (bytes: Buffer) => {
      const stdin = new PassThrough() as unknown as NodeJS.ReadStream & PassThrough;
      stdin.end(bytes);
      return passwordFromStdin(stdin, 100);
    };
    assert.deepEqual(await piped(Buffer.from('\uFEFFпароль-из-блокнота 1\r\nmore', 'utf8')), { password: 'пароль-из-блокнота 1', generated: false });
    assert.deepEqual(await piped(Buffer.from('no line end at all 2', 'utf8')), { password: 'no line end at all 2', generated: false });
    const notUtf8 = /^the password on stdin is not UTF-8 text; save it as UTF-8/;
    await assert.rejects(piped(Buffer.from([0xff, 0xfe, ...Buffer.from(' invalid utf8 password\n')])), (err: unknown) => err instanceof CliError && notUtf8.test(err.message));
    // Latin-1, as a file saved in another encoding has it.
    await assert.rejects(piped(Buffer.from('mot de passe très long\n', 'latin1')), (err: unknown) => err instanceof CliError && notUtf8.test(err.message));
  });
});
