/**
 * The examples of examples/, run as a newcomer runs them (`node examples/...`) against
 * the real app with a school of demo data: each prints what it is for, and each ends
 * quietly, exit code 0 and nothing on stderr, when its reader closes the pipe early
 * (`node examples/export-students-csv.mjs | head`).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { generateSchoolData } from '../../src/demo/generate.js';
import { importData } from '../../src/importer/index.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { selfSignedPaths } from '../../src/tls.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

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

  before(async () => {
    t = await startTestApp();
    const school = await createSchool(t.store.db, { id: `t_examples_${randomBytes(5).toString('hex')}`, name: 'Examples', plan: 'VIP', timezone: 'Europe/Moscow' });
    assert.ok(school.ok);
    const data = generateSchoolData({ seed: 7, students: STUDENTS, now: new Date(), timezone: 'Europe/Moscow' });
    const imported = await importData(t.store.db, school.value.id, data);
    assert.ok(imported.ok, JSON.stringify(imported));
    const key = await createKey(t.store.db, school.value.id, 'examples');
    assert.ok(key.ok);
    env = { ...process.env, SCHOOL_DATA_KEY: key.value.key, SCHOOL_DATA_URL: t.origin, SCHOOL_DATA_CA: selfSignedPaths(t.store.dataDir).cert };
  });
  after(() => t.close());

  /** Runs an example; with `closedPipe`, its stdout is a pipe whose reader is already gone. */
  function run(file: string, args: string[] = [], closedPipe = false): Promise<Run> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [path.join(EXAMPLES, file), ...args], { env, cwd: t.store.dataDir, stdio: ['ignore', 'pipe', 'pipe'] });
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

  for (const [file, args] of [
    ['export-students-csv.mjs', []],
    ['finance-monthly.mjs', []],
    ['vehicles-expiring.mjs', ['3650']],
  ] as const) {
    it(`${file} ends quietly when its reader closes the pipe`, async () => {
      const out = await run(file, [...args], true);
      assert.equal(out.stderr, '', 'a stack trace or a message on stderr');
      assert.equal(out.code, 0);
    });
  }
});
