/**
 * The examples of examples/, run as a newcomer runs them (`node examples/...`) against
 * the real app with a school of demo data: each prints what it is for, and each ends
 * quietly, exit code 0 and nothing on stderr, when its reader closes the pipe early
 * (`node examples/export-students-csv.mjs | head`); what it cannot use ends it in one line.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { generateSchoolData } from '../../src/demo/generate.js';
import { importData } from '../../src/importer/index.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { selfSignedPaths } from '../../src/tls.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { freePort } from '../helpers/redis.js';

const EXAMPLES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../examples');
const STUDENTS = 60;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('examples', () => {
  let t: TestApp;
  let env: NodeJS.ProcessEnv;
  let schoolId: string;

  before(async () => {
    t = await startTestApp();
    const school = await createSchool(t.store.db, { id: `t_examples_${randomBytes(5).toString('hex')}`, name: 'Examples', plan: 'VIP', timezone: 'Europe/Moscow' });
    assert.ok(school.ok);
    const data = generateSchoolData({ seed: 7, students: STUDENTS, now: new Date(), timezone: 'Europe/Moscow' });
    const imported = await importData(t.store.db, school.value.id, data);
    assert.ok(imported.ok, JSON.stringify(imported));
    schoolId = school.value.id;
    const key = await createKey(t.store.db, school.value.id, 'examples');
    assert.ok(key.ok);
    env = { ...process.env, SCHOOL_DATA_KEY: key.value.key, SCHOOL_DATA_URL: t.origin, SCHOOL_DATA_CA: selfSignedPaths(t.store.dataDir).cert };
  });
  after(() => t.close());

  /**
   * Runs an example; with `closedPipe`, its stdout is a pipe whose reader is already gone;
   * `changed` sets (or, empty, clears) variables of the environment.
   */
  function run(file: string, args: string[] = [], { closedPipe = false, changed = {} }: { closedPipe?: boolean; changed?: NodeJS.ProcessEnv } = {}): Promise<Run> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [path.join(EXAMPLES, file), ...args], { env: { ...env, ...changed }, cwd: t.store.dataDir, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      if (closedPipe) child.stdout.destroy();
      else child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  }

  it('export-students-csv: every student as CSV, to stdout or to a file', async () => {
    const out = await run('export-students-csv.mjs');
    assert.equal(out.code, 0, out.stderr);
    const lines = out.stdout.split('\r\n');
    assert.equal(lines[0], 'id,full_name,phone,email,category,status,group_id,branch_id,created_at');
    assert.equal(lines.length, STUDENTS + 2, 'header, one line per student, and the final line end');
    assert.equal(out.stderr, `${STUDENTS} students exported\n`);
    const file = path.join(t.store.dataDir, 'students.csv');
    const toFile = await run('export-students-csv.mjs', [file, '--status', 'learning_practice']);
    assert.equal(toFile.code, 0, toFile.stderr);
    assert.ok(fs.readFileSync(file, 'utf8').split('\r\n').slice(1, -1).every((l) => l.includes(',learning_practice,')));
    assert.ok(!fs.existsSync(`${file}.partial`));
    // A file it cannot write, or a command line it does not take: one line, exit 1, no partial file.
    const nowhere = path.join(t.store.dataDir, 'no-such-folder', 'students.csv');
    const unwritable = await run('export-students-csv.mjs', [nowhere]);
    assert.equal(unwritable.code, 1);
    assert.match(unwritable.stderr, /^cannot write \S+no-such-folder\/students\.csv\.partial: ENOENT/);
    assert.equal(unwritable.stderr.trim().split('\n').length, 1, unwritable.stderr);
    for (const args of [['--status'], ['--statu', 'x']]) {
      const bad = await run('export-students-csv.mjs', args);
      assert.equal(bad.code, 1, bad.stderr);
      assert.match(bad.stderr, /^(--status needs a value|unexpected argument: --statu)/);
      assert.equal(bad.stderr.trim().split('\n').length, 1, bad.stderr);
    }
    assert.ok(!fs.existsSync('--statu') && !fs.existsSync(path.join(t.store.dataDir, '--statu')));
    // A setting it refuses (no key) ends it before any file is made.
    const keyless = path.join(t.store.dataDir, 'keyless.csv');
    const noKey = await new Promise<number | null>((resolve) => spawn(process.execPath, [path.join(EXAMPLES, 'export-students-csv.mjs'), keyless], { env: { ...env, SCHOOL_DATA_KEY: '' }, stdio: 'ignore' }).on('close', resolve));
    assert.equal(noKey, 1);
    assert.ok(!fs.existsSync(`${keyless}.partial`));
  });

  it('sync-to-sqlite --every: waits out a service it cannot reach, saying so, rather than end', async () => {
    const port = await freePort();
    const file = path.join(t.store.dataDir, 'unreachable.db');
    const child = spawn(process.execPath, [path.join(EXAMPLES, 'sync-to-sqlite.mjs'), file, '--every', '1'], { env: { ...env, SCHOOL_DATA_URL: `https://127.0.0.1:${port}` }, cwd: t.store.dataDir, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const closed = new Promise((resolve) => child.on('close', resolve));
    for (let i = 0; i < 300 && (stderr.match(/trying again in 1 s/g) ?? []).length < 2 && child.exitCode === null; i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(child.exitCode, null, `it ended: ${stderr}`);
    assert.ok((stderr.match(/ECONNREFUSED.*: trying again in 1 s\n/g) ?? []).length >= 2, stderr);
    child.kill('SIGTERM');
    await closed;
  });

  it('export-students-csv: a Ctrl-C leaves no partial file', async () => {
    const file = path.join(t.store.dataDir, 'stopped.csv');
    const child = spawn(process.execPath, [path.join(EXAMPLES, 'export-students-csv.mjs'), file], { env, cwd: t.store.dataDir, stdio: ['ignore', 'ignore', 'pipe'] });
    // Stopped once its partial file is there (the pages are still being read, or just done).
    for (let i = 0; i < 3000 && !fs.existsSync(`${file}.partial`) && child.exitCode === null; i++) await new Promise((r) => setTimeout(r, 5));
    child.kill('SIGINT');
    const code = await new Promise((resolve) => child.on('close', resolve));
    if (code === 0) assert.ok(fs.existsSync(file), 'it had finished: the whole file is there');
    else assert.equal(code, 130);
    assert.ok(!fs.existsSync(`${file}.partial`));
  });

  it('finance-monthly: twelve months and a total', async () => {
    const out = await run('finance-monthly.mjs');
    assert.equal(out.code, 0, out.stderr);
    const lines = out.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^month\s+income, RUB\s+expense, RUB\s+profit, RUB$/);
    assert.equal(lines.length, 2 + 12 + 1);
    assert.match(lines.at(-1)!, /^total\s+-?\d+\.\d{2}\s+-?\d+\.\d{2}\s+-?\d+\.\d{2}$/);
  });

  it('vehicles-expiring: the papers that end within the days given', async () => {
    const out = await run('vehicles-expiring.mjs', ['3650']);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /^plate\s+vehicle\s+status\s+what\s+valid until/);
    const refused = await run('vehicles-expiring.mjs', ['soon']);
    assert.notEqual(refused.code, 0);
  });

  it('a command line, a setting or a file they cannot use ends them in one line and exit 1, before any file is made', async () => {
    /** One line on stderr, no stack trace, exit code 1. */
    const refused = async (file: string, args: string[], expected: RegExp, changed: NodeJS.ProcessEnv = {}) => {
      const out = await run(file, args, { changed });
      assert.equal(out.code, 1, `${file} ${args.join(' ')}: ${out.stderr}`);
      assert.match(out.stderr, expected);
      assert.equal(out.stderr.trim().split('\n').length, 1, out.stderr);
    };
    for (const days of ['abc', '-5', '1.5']) await refused('vehicles-expiring.mjs', [days], /^days must be a whole number/);
    await refused('sync-to-sqlite.mjs', [], /^usage: node examples\/sync-to-sqlite\.mjs/);
    await refused('sync-to-sqlite.mjs', ['copy.db', '--every', '0'], /^usage: /);
    await refused('sync-to-sqlite.mjs', [path.join(t.store.dataDir, 'no-such-folder', 'copy.db')], /^cannot open \S+no-such-folder\/copy\.db as the copy: /);
    const csv = path.join(t.store.dataDir, 'not-a-database.csv');
    fs.writeFileSync(csv, 'id,full_name\r\ns1,Иван\r\n');
    await refused('sync-to-sqlite.mjs', [csv], /^cannot open \S+not-a-database\.csv as the copy: file is not a database/);
    assert.equal(fs.readFileSync(csv, 'utf8'), 'id,full_name\r\ns1,Иван\r\n');
    // No key: said before the copy is made, so no empty database (nor its -wal and -shm) is left.
    const keyless = path.join(t.store.dataDir, 'keyless.db');
    await refused('sync-to-sqlite.mjs', [keyless], /^set SCHOOL_DATA_KEY/, { SCHOOL_DATA_KEY: '' });
    for (const made of [keyless, `${keyless}-wal`, `${keyless}-shm`]) assert.ok(!fs.existsSync(made), `${made} was made`);
  });

  it('sync-to-sqlite: a full copy first, then only what changed, deletions included; equal to the lists', async () => {
    const file = path.join(t.store.dataDir, `copy-${randomBytes(3).toString('hex')}.db`);
    const first = await run('sync-to-sqlite.mjs', [file]);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /^\d+ records written, 0 deleted; the copy holds \d+ records\n$/);

    // A student renamed, a payment and a lead deleted.
    const first3 = async (resource: string) => ((await t.request(`/api/public/v1/${resource}?limit=3`, { key: env.SCHOOL_DATA_KEY! })).json() as { items: { id: string }[] }).items;
    const [student] = await first3('students');
    const [payment] = await first3('payments');
    const [lead] = await first3('leads');
    // The card's own fields are the importable ones; its contracts, lesson counts and balance are computed.
    const card = (await t.request(`/api/public/v1/students/${student!.id}`, { key: env.SCHOOL_DATA_KEY! })).json() as Record<string, unknown>;
    const fields = Object.fromEntries(Object.entries(card).filter(([name]) => !['contracts', 'lessons', 'balance'].includes(name)));
    const changed = await importData(t.store.db, schoolId, {
      students: [{ ...fields, full_name: 'Переименован' }],
      deleted: { payments: [payment!.id], leads: [lead!.id] },
    });
    assert.ok(changed.ok, JSON.stringify(changed));
    const second = await run('sync-to-sqlite.mjs', [file]);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, /^[1-9]\d* records written, 2 deleted;/);

    const copy = new Database(file, { readonly: true });
    try {
      for (const resource of ['students', 'instructors', 'vehicles', 'lessons', 'contracts', 'payments', 'leads']) {
        const listed: string[] = [];
        for (let offset = 0; ; offset += 200) {
          const page = (await t.request(`/api/public/v1/${resource}?limit=200&offset=${offset}`, { key: env.SCHOOL_DATA_KEY! })).json() as { items: unknown[]; meta: { total: number } };
          listed.push(...page.items.map((item) => JSON.stringify(item)));
          if (offset + 200 >= page.meta.total) break;
        }
        const held = (copy.prepare(`select record from ${resource} order by id`).all() as { record: string }[]).map((r) => r.record);
        assert.deepEqual([...held].sort(), [...listed].sort(), resource);
      }
      const name = copy.prepare('select record from students where id = ?').get(student!.id) as { record: string };
      assert.match(name.record, /Переименован/);
    } finally {
      copy.close();
    }
  });

  for (const [file, args] of [
    ['export-students-csv.mjs', []],
    ['finance-monthly.mjs', []],
    ['vehicles-expiring.mjs', ['3650']],
  ] as const) {
    it(`${file} ends quietly when its reader closes the pipe`, async () => {
      const out = await run(file, [...args], { closedPipe: true });
      assert.equal(out.stderr, '', 'a stack trace or a message on stderr');
      assert.equal(out.code, 0);
    });
  }
});
