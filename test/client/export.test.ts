/**
 * A long export with the built client under a Profi limit: 2100 students in pages of
 * 200 is 11 requests against a limit of 10 per minute, so it must cross the limit.
 * With throttling the client keeps under it and never sees a 429; without, it meets
 * the 429, waits its Retry-After and carries on. Either way every student arrives
 * once, in the API's order. The two exports run side by side (two schools) so the
 * minute of waiting is spent once.
 * @waits
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { importData } from '../../src/importer/index.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { selfSignedPaths } from '../../src/tls.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { SchoolDataClient, type AttemptEvent, type RetryEvent, type Student } from './built.js';

const STUDENTS = 2100;
const LIMIT_PER_MINUTE = 10;

async function profiSchoolWithStudents(t: TestApp): Promise<string> {
  const created = await createSchool(t.store.db, { name: 'Export test', plan: 'Profi', timezone: 'Europe/Moscow', id: `t_export_${randomBytes(5).toString('hex')}` });
  assert.ok(created.ok);
  const schoolId = created.value.id;
  const students = Array.from({ length: STUDENTS }, (_, i) => ({
    id: `st-${String(i).padStart(5, '0')}`,
    full_name: `Ученик ${i}`,
    phone: `+7999${String(i).padStart(7, '0')}`,
    email: `st${i}@example.ru`,
    category: 'B',
    status: i % 3 === 0 ? 'learning_practice' : 'learning_theory',
    group_id: 'g1',
    branch_id: null,
    // Many students share a second, so the order also leans on the id.
    created_at: new Date(Date.UTC(2025, 0, 1) + Math.floor(i / 7) * 1000).toISOString().replace('.000Z', 'Z'),
  }));
  const imported = await importData(t.store.db, schoolId, { groups: [{ id: 'g1', name: 'B-01', category: 'B', branch_id: null }], students });
  assert.ok(imported.ok, JSON.stringify(imported));
  const key = await createKey(t.store.db, schoolId, 'export');
  assert.ok(key.ok);
  return key.value.key;
}

describe('client: a paged export under the Profi limit', { concurrency: 2 }, () => {
  let t: TestApp;
  let ca: string;
  let keys: [string, string];

  before(async () => {
    t = await startTestApp({ config: { rateLimitProfi: LIMIT_PER_MINUTE } });
    ca = fs.readFileSync(selfSignedPaths(t.store.dataDir).cert, 'utf8');
    keys = [await profiSchoolWithStudents(t), await profiSchoolWithStudents(t)];
  });
  after(() => t.close());

  async function exportAll(apiKey: string, throttle: boolean) {
    const attempts: AttemptEvent[] = [];
    const retries: RetryEvent[] = [];
    const client = new SchoolDataClient({ baseUrl: t.origin, apiKey, ca, throttle, onResponse: (e) => attempts.push(e), onRetry: (e) => retries.push(e) });
    const students: Student[] = [];
    try {
      for await (const s of client.students.list()) students.push(s);
    } finally {
      client.close();
    }
    return { students, attempts, retries };
  }

  function assertComplete(students: Student[]): void {
    assert.equal(students.length, STUDENTS);
    assert.equal(new Set(students.map((s) => s.id)).size, STUDENTS);
    const ordered = [...students].sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? -1 : 1) : a.created_at < b.created_at ? -1 : 1));
    assert.deepEqual(
      students.map((s) => s.id),
      ordered.map((s) => s.id),
    );
  }

  it('with throttling: keeps under the limit and never meets a 429', async () => {
    const { students, attempts, retries } = await exportAll(keys[0], true);
    assertComplete(students);
    assert.deepEqual(
      attempts.filter((a) => a.status !== 200),
      [],
    );
    assert.equal(retries.length, 0);
    assert.equal(attempts.length, Math.ceil(STUDENTS / 200));
  });

  it('without throttling: meets the 429, waits Retry-After, and finishes', async () => {
    const { students, attempts, retries } = await exportAll(keys[1], false);
    assertComplete(students);
    assert.ok(
      retries.some((r) => r.reason === 'http_429' && r.delayMs >= 60_000),
      'the limit was crossed and the 429 waited out',
    );
    assert.equal(attempts.filter((a) => a.status === 200).length, Math.ceil(STUDENTS / 200));
  });
});
