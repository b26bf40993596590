/**
 * The built client's changes feed and conditional requests against the real server: a
 * feed read from the beginning and then from its saved cursor gives the lists exactly,
 * page by page or change by change; an expired cursor is a CursorExpiredError; in
 * conditional mode an unchanged answer comes back as a 304 served from the kept copy.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { importData } from '../../src/importer/index.js';
import { selfSignedPaths } from '../../src/tls.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { seedWorld, type World } from '../helpers/world.js';
import { ChangeFeed, CursorExpiredError, SchoolDataClient, type AttemptEvent, type ClientOptions } from './built.js';

describe('client: the changes feed and conditional requests', () => {
  let t: TestApp;
  let w: World;
  let ca: string;
  const make = (apiKey: string, options: Partial<ClientOptions> = {}) => new SchoolDataClient({ baseUrl: t.origin, apiKey, ca, ...options });

  before(async () => {
    t = await startTestApp({ config: { rateLimitVip: 100_000, rateLimitProfi: 100_000 } });
    w = await seedWorld(t.store.db);
    ca = fs.readFileSync(selfSignedPaths(t.store.dataDir).cert, 'utf8');
  });
  after(() => t.close());

  it('iterates the feed from the beginning, then from the saved cursor', async () => {
    const client = make(w.a.key);
    const feed = client.changes.list({ limit: 4 });
    assert.ok(feed instanceof ChangeFeed);
    assert.equal(feed.cursor, undefined);
    const all = [];
    for await (const change of feed) all.push(change);
    const students = (await client.students.list({ limit: 200 })).items;
    assert.deepEqual(all.filter((c) => c.resource === 'students').map((c) => c.record).sort((a, b) => a!.id.localeCompare(b!.id)), students.sort((a, b) => a.id.localeCompare(b.id)));
    const saved = feed.cursor!;
    assert.ok(saved);

    const result = await importData(t.store.db, w.a.id, { deleted: { leads: ['ld1'] } });
    assert.ok(result.ok && result.seq !== null);
    const pages = [];
    for await (const page of client.changes.list({ after: saved }).pages()) pages.push(page);
    assert.equal(pages.length, 1);
    assert.deepEqual(pages[0]!.changes.map((c) => [c.change, c.resource, c.id, c.record]), [['delete', 'leads', 'ld1', null]]);
    assert.equal(pages[0]!.hasMore, false);
    const again = client.changes.list({ after: pages[0]!.cursor, resources: ['leads'] });
    for await (const change of again) assert.fail(`nothing changed since, got ${JSON.stringify(change)}`);
    assert.equal(again.cursor, pages[0]!.cursor);
    client.close();
  });

  it('takes resources as an array or as the comma-separated list the API takes', async () => {
    const client = make(w.a.key);
    const read = async (resources: Parameters<typeof client.changes.list>[0]) => {
      const changes = [];
      for await (const change of client.changes.list(resources)) changes.push(`${change.resource}/${change.id}`);
      return changes.sort();
    };
    const listed = await read({ resources: ['students', 'payments'] });
    assert.ok(listed.some((c) => c.startsWith('students/')) && listed.some((c) => c.startsWith('payments/')), listed.join(' '));
    assert.ok(listed.every((c) => /^(students|payments)\//.test(c)), listed.join(' '));
    assert.deepEqual(await read({ resources: 'students,payments' }), listed);
    assert.deepEqual(await read({ resources: 'students, payments' }), listed);
    await assert.rejects(read({ resources: 42 as unknown as string }), (err: unknown) => err instanceof TypeError && /resources/.test(err.message));
    client.close();
  });

  it('throws CursorExpiredError for a cursor the feed no longer honours', async () => {
    const client = make(w.lone.key, { maxRetries: 0 });
    const feed = client.changes.list();
    for await (const change of feed) void change;
    const gone = await importData(t.store.db, w.lone.id, { deleted: { students: ['only-here'] } });
    assert.ok(gone.ok && gone.seq !== null);
    await sql`update change_batches set committed_at = '2000-01-01T00:00:00Z' where school_id = ${w.lone.id} and seq = ${gone.seq}`.execute(t.store.db);
    const later = await importData(t.store.db, w.lone.id, { groups: [{ id: 'g-more', name: 'Ещё', category: 'B', branch_id: null }] }, { tombstoneDays: 90 });
    assert.ok(later.ok);
    await assert.rejects(async () => {
      for await (const change of client.changes.list({ after: feed.cursor })) void change;
    }, (err: unknown) => err instanceof CursorExpiredError && err.status === 410 && err.code === 'cursor_expired');
    client.close();
  });

  it('in conditional mode, sends If-None-Match and serves a 304 from the answer it kept', async () => {
    const events: AttemptEvent[] = [];
    const client = make(w.b.key, { conditional: true, onResponse: (e) => events.push(e) });
    const first = await client.students.list({ limit: 3 });
    const second = await client.students.list({ limit: 3 });
    assert.deepEqual(second, first);
    assert.deepEqual(events.map((e) => e.status), [200, 304]);
    // After an import, the answer has changed: a 200 with the new data.
    const changed = await importData(t.store.db, w.b.id, {
      students: [{ id: 's1', full_name: 'Изменено', phone: '+79990000001', email: 's1@example.ru', category: 'B', status: 'graduated', group_id: 'g1', branch_id: 'br1', created_at: '2026-01-10T09:00:00Z' }],
    });
    assert.ok(changed.ok);
    const third = await client.students.list({ limit: 3 });
    assert.equal(events.at(-1)!.status, 200);
    assert.equal(third.items[0]!.full_name, 'Изменено');
    // Off by default: a plain client never sends If-None-Match.
    const plainEvents: AttemptEvent[] = [];
    const plain = make(w.b.key, { onResponse: (e) => plainEvents.push(e) });
    await plain.students.list({ limit: 3 });
    await plain.students.list({ limit: 3 });
    assert.deepEqual(plainEvents.map((e) => e.status), [200, 200]);
    client.close();
    plain.close();
  });
});
