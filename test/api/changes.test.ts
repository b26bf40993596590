/**
 * The changes feed (GET /changes): read from the beginning it is a full copy of the
 * school's lists, record for record; read from a saved cursor it gives every change since,
 * deletions as tombstones, each record once at its latest place; a reader paging while
 * imports commit ends with a copy equal to the lists; cursors are opaque, checked, and
 * expire with the tombstones they would need; and the feed is an endpoint like the others.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { announceKeyChanges } from '../../src/db/index.js';
import { importData } from '../../src/importer/index.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { seedWorld, type World } from '../helpers/world.js';

const RESOURCES = ['students', 'instructors', 'vehicles', 'lessons', 'contracts', 'payments', 'leads'] as const;
type Resource = (typeof RESOURCES)[number];

interface Change {
  resource: Resource;
  id: string;
  change: 'upsert' | 'delete';
  changed_at: string;
  record: { id: string } | null;
}
interface Feed {
  items: Change[];
  meta: { next_cursor: string; has_more: boolean; limit: number };
}

/** resource -> id -> the record's JSON. */
type Copy = Map<Resource, Map<string, string>>;

const emptyCopy = (): Copy => new Map(RESOURCES.map((r) => [r, new Map<string, string>()]));

function apply(copy: Copy, changes: Change[]): void {
  for (const c of changes) {
    if (c.change === 'delete') copy.get(c.resource)!.delete(c.id);
    else copy.get(c.resource)!.set(c.id, JSON.stringify(c.record));
  }
}

describe('the changes feed', () => {
  let t: TestApp;
  let w: World;

  before(async () => {
    t = await startTestApp({ config: { rateLimitVip: 100_000, rateLimitProfi: 100_000 } });
    w = await seedWorld(t.store.db);
  });
  after(() => t.close());

  async function page(key: string, query: string): Promise<Feed> {
    const res = await t.request(`/api/public/v1/changes${query}`, { key });
    assert.equal(res.status, 200, `${query}: ${res.text}`);
    return res.json() as Feed;
  }

  /** Every page from `after` until the feed has no more; the changes and the cursor to save. */
  async function readAll(key: string, from?: string, limit = 1000, between?: () => Promise<void>): Promise<{ changes: Change[]; cursor: string }> {
    let cursor = from;
    const changes: Change[] = [];
    for (;;) {
      const feed = await page(key, `?limit=${limit}${cursor === undefined ? '' : `&after=${cursor}`}`);
      changes.push(...feed.items);
      cursor = feed.meta.next_cursor;
      if (!feed.meta.has_more) return { changes, cursor };
      await between?.();
    }
  }

  /** The school's lists, read through their endpoints, as a copy. */
  async function lists(key: string): Promise<Copy> {
    const copy = emptyCopy();
    for (const r of RESOURCES) {
      for (let offset = 0; ; offset += 200) {
        const res = await t.request(`/api/public/v1/${r}?limit=200&offset=${offset}`, { key });
        const body = res.json() as { items: { id: string }[]; meta: { total: number } };
        for (const item of body.items) copy.get(r)!.set(item.id, JSON.stringify(item));
        if (offset + 200 >= body.meta.total) break;
      }
    }
    return copy;
  }

  const student = (id: string, name: string) => ({
    id, full_name: name, phone: '+79990000001', email: `${id}@example.ru`, category: 'B', status: 'learning_theory', group_id: 'g1', branch_id: 'br1', created_at: '2026-01-10T09:00:00Z',
  });

  it('read from the beginning, is a full copy of the lists, each record once, in the change order', async () => {
    const { changes } = await readAll(w.a.key);
    assert.ok(changes.every((c) => c.change === 'upsert'));
    const keys = changes.map((c) => `${c.resource}/${c.id}`);
    assert.equal(new Set(keys).size, keys.length, 'a record twice');
    const copy = emptyCopy();
    apply(copy, changes);
    assert.deepEqual(copy, await lists(w.a.key));
    assert.match(changes[0]!.changed_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    // Pages of any size give the same changes in the same order.
    const paged = await readAll(w.a.key, undefined, 3);
    assert.deepEqual(paged.changes, changes);
  });

  it('from a saved cursor, gives what changed since: upserts, deletions and contracts whose balance moved', async () => {
    const start = await readAll(w.a.key);
    const none = await page(w.a.key, `?after=${start.cursor}`);
    assert.deepEqual(none.items, []);
    assert.equal(none.meta.next_cursor, start.cursor, 'no change: the cursor given back');
    assert.equal(none.meta.has_more, false);

    // A delta: a student renamed twice (one change, at its latest place), a payment deleted
    // (a tombstone, and its contract's paid and debt moved), a new lead.
    for (const name of ['Первое имя', 'Второе имя']) {
      const renamed = await importData(t.store.db, w.a.id, { students: [student('s2', name)] });
      assert.ok(renamed.ok, JSON.stringify(renamed));
    }
    const delta = await importData(t.store.db, w.a.id, {
      leads: [{ id: 'l-new', full_name: 'Новый', phone: '+79990000042', email: null, category: 'B', source: 'website', status: 'new', student_id: null, created_at: '2026-03-05T10:00:00Z' }],
      deleted: { payments: ['p1'] },
    });
    assert.ok(delta.ok, JSON.stringify(delta));
    const since = await readAll(w.a.key, start.cursor);
    const seen = since.changes.map((c) => `${c.change} ${c.resource}/${c.id}`).sort();
    assert.deepEqual(seen, ['delete payments/p1', 'upsert contracts/c1', 'upsert leads/l-new', 'upsert students/s2']);
    const renamed = since.changes.find((c) => c.id === 's2')!;
    assert.equal((renamed.record as unknown as { full_name: string }).full_name, 'Второе имя');
    assert.equal(since.changes.find((c) => c.id === 'p1')!.record, null);

    const copy = emptyCopy();
    apply(copy, start.changes);
    apply(copy, since.changes);
    assert.deepEqual(copy, await lists(w.a.key));

    // An import that changes nothing adds nothing.
    const same = await importData(t.store.db, w.a.id, { students: [student('s2', 'Второе имя')] });
    assert.ok(same.ok && same.seq === null, JSON.stringify(same));
    const after = await page(w.a.key, `?after=${since.cursor}`);
    assert.deepEqual(after.items, []);
  });

  it('a reader paging while imports commit never skips or repeats a change', async () => {
    const copy = emptyCopy();
    let round = 0;
    // Between pages, an import changes records spread over the lists, and deletes one.
    const landing = async () => {
      // Six imports, then the reader catches up (each one adds more than a page of 2 holds).
      if (round === 6) return;
      round += 1;
      const result = await importData(t.store.db, w.b.id, {
        students: [student('s1', `Имя ${round}`), student(`s-extra-${round}`, `Новый ${round}`)],
        deleted: round > 1 ? { students: [`s-extra-${round - 1}`] } : {},
      });
      assert.ok(result.ok, JSON.stringify(result));
    };
    const first = await readAll(w.b.key, undefined, 2, landing);
    apply(copy, first.changes);
    const rest = await readAll(w.b.key, first.cursor);
    apply(copy, rest.changes);
    assert.equal(round, 6, `only ${round} imports landed while the reader paged`);
    assert.deepEqual(copy, await lists(w.b.key));
  });

  it('narrows to the resources asked for', async () => {
    const { changes } = await readAll(w.a.key);
    const feed = await page(w.a.key, '?resources=payments,students&limit=1000');
    assert.deepEqual(feed.items, changes.filter((c) => c.resource === 'payments' || c.resource === 'students'));
    for (const bad of ['payment', 'students,students', 'students,', 'finance', 'Students']) {
      const res = await t.request(`/api/public/v1/changes?resources=${bad}`, { key: w.a.key });
      assert.equal(res.status, 400, bad);
      assert.deepEqual((res.json() as { invalid_params: { name: string }[] }).invalid_params.map((p) => p.name), ['resources'], bad);
    }
  });

  it('gives the place after the page\'s last item as the cursor: read with other resources, it gives their changes after that place', async () => {
    const lead = { id: 'l-b-late', full_name: 'Поздний', phone: '+79990000043', email: null, category: 'B', source: 'website', status: 'new', student_id: null, created_at: '2026-03-06T10:00:00Z' };
    const early = { ...lead, id: 'l-b-early', phone: '+79990000044' };
    assert.ok((await importData(t.store.db, w.b.id, { leads: [early] })).ok);
    assert.ok((await importData(t.store.db, w.b.id, { students: [student('s-b-mid', 'Средний')] })).ok);
    const imported = await importData(t.store.db, w.b.id, { leads: [lead] });
    assert.ok(imported.ok && imported.seq !== null, JSON.stringify(imported));
    const students = await page(w.b.key, '?resources=students&limit=1000');
    assert.equal(students.meta.has_more, false);
    const last = students.items.at(-1)!;
    assert.deepEqual(Buffer.from(students.meta.next_cursor, 'base64url').toString('latin1').split('.').slice(5), [last.resource, last.id]);
    const leads = await page(w.b.key, `?resources=leads&after=${students.meta.next_cursor}`);
    assert.ok(leads.items.some((c) => c.id === 'l-b-late'), 'the lead imported after the last student is after the cursor');
    // One imported before the last student is before it: a resource not read yet is read from the beginning.
    assert.ok(!leads.items.some((c) => c.id === 'l-b-early'), 'the lead imported before the last student is not after the cursor');
    // No item: the cursor given back.
    const none = await page(w.b.key, `?resources=students&after=${students.meta.next_cursor}`);
    assert.deepEqual([none.items, none.meta.next_cursor], [[], students.meta.next_cursor]);
  });

  it('refuses a cursor it did not give out, or another school\'s, as a bad parameter', async () => {
    const { cursor } = await readAll(w.b.key);
    // A's own cursor, made up to name a resource the feed does not have.
    const [version, tag, seq, stamp, pruned] = Buffer.from((await readAll(w.a.key)).cursor, 'base64url').toString('latin1').split('.');
    const madeUp = [
      ...['aaa', 'zz', 'branches'].map((resource) => `${version}.${tag}.${seq}.${stamp}.${pruned}.${resource}.x`),
      // A seq written with a leading zero, the start (seq 0) with a batch's stamp, no pruned seq, and version 2's parts in version 3.
      `${version}.${tag}.0${seq}.${stamp}.${pruned}`,
      `${version}.${tag}.0.${stamp}.${pruned}`,
      `${version}.${tag}.${seq}.${stamp}.`,
      `${version}.${tag}.${seq}.${stamp}`,
    ].map((text) => Buffer.from(text).toString('base64url'));
    for (const bad of ['nope', 'MS4xLjE', Buffer.from('2.x.1').toString('base64url'), cursor, ...madeUp]) {
      const res = await t.request(`/api/public/v1/changes?after=${bad}`, { key: w.a.key });
      assert.equal(res.status, 400, bad);
      // B's cursor is answered as a made-up one: nothing says it is another school's.
      assert.deepEqual((res.json() as { invalid_params: unknown[] }).invalid_params, [{ name: 'after', reason: 'is not a cursor of this feed' }], bad);
    }
    for (const limit of ['0', '1001', 'x']) assert.equal((await t.request(`/api/public/v1/changes?limit=${limit}`, { key: w.a.key })).status, 400);
  });

  it('reports a bad resources list and a bad cursor together, as one 400', async () => {
    const res = await t.request('/api/public/v1/changes?resources=bogus&after=nope', { key: w.a.key });
    assert.equal(res.status, 400, res.text);
    assert.deepEqual((res.json() as { invalid_params: { name: string }[] }).invalid_params.map((p) => p.name).sort(), ['after', 'resources']);
  });

  it('answers 410 to a cursor older than the deletions it still keeps, and to one from ahead of the school', async () => {
    const saved = (await readAll(w.lone.key)).cursor;
    // An empty first page gives the beginning, which no pruning makes too old.
    const empty = await page(w.lone.key, '?resources=leads');
    assert.deepEqual(empty.items, []);
    const deleted = await importData(t.store.db, w.lone.id, { deleted: { students: ['only-here'] } });
    assert.ok(deleted.ok && deleted.seq !== null);
    // That deletion is from long ago now: the next import prunes its tombstone.
    await sql`update change_batches set committed_at = '2000-01-01T00:00:00Z' where school_id = ${w.lone.id} and seq = ${deleted.seq}`.execute(t.store.db);
    const later = await importData(t.store.db, w.lone.id, { students: [{ ...student('back', 'Снова'), group_id: 'g9', branch_id: null }] }, { tombstoneDays: 90 });
    assert.ok(later.ok, JSON.stringify(later));
    const res = await t.request(`/api/public/v1/changes?after=${saved}`, { key: w.lone.key });
    assert.equal(res.status, 410, res.text);
    assert.equal((res.json() as { code: string }).code, 'cursor_expired');
    assert.equal((await t.request(`/api/public/v1/changes?after=${empty.meta.next_cursor}`, { key: w.lone.key })).status, 200);
    // Starting again from the beginning works, and gives what is there now.
    const fresh = await readAll(w.lone.key);
    assert.deepEqual(fresh.changes.map((c) => `${c.change} ${c.id}`), ['upsert back']);
    const ahead = Buffer.from(`${Buffer.from(fresh.cursor, 'base64url').toString().split('.').slice(0, 2).join('.')}.999999..0`).toString('base64url');
    assert.equal((await t.request(`/api/public/v1/changes?after=${ahead}`, { key: w.lone.key })).status, 410);
  });

  it('takes a cursor that had read past every deletion since pruned, even one inside that import; 410 to one that had not', async () => {
    const lone = (id: string) => ({ ...student(id, 'Ушедший'), group_id: 'g9', branch_id: null });
    assert.ok((await importData(t.store.db, w.lone.id, { students: [lone('gone-a'), lone('gone-b')] })).ok);
    const before = (await readAll(w.lone.key)).cursor;
    const deleted = await importData(t.store.db, w.lone.id, { deleted: { students: ['gone-a', 'gone-b'] } });
    assert.ok(deleted.ok && deleted.seq !== null);
    // One reader stopped between the two deletions; the other read both (its cursor is the last one's place).
    const inside = await page(w.lone.key, `?limit=1&after=${before}`);
    assert.deepEqual(inside.items.map((c) => `${c.change} ${c.id}`), ['delete gone-a']);
    const past = await readAll(w.lone.key, before);
    assert.deepEqual(past.changes.map((c) => `${c.change} ${c.id}`), ['delete gone-a', 'delete gone-b']);
    await sql`update change_batches set committed_at = '2000-01-01T00:00:00Z' where school_id = ${w.lone.id} and seq <= ${deleted.seq}`.execute(t.store.db);
    const later = await importData(t.store.db, w.lone.id, { students: [lone('after-pruning')] }, { tombstoneDays: 90 });
    assert.ok(later.ok, JSON.stringify(later));
    assert.deepEqual((await readAll(w.lone.key, past.cursor)).changes.map((c) => `${c.change} ${c.id}`), ['upsert after-pruning']);
    assert.equal((await t.request(`/api/public/v1/changes?after=${inside.meta.next_cursor}`, { key: w.lone.key })).status, 410);
    // A cursor of version 2 (no pruned seq) past every deletion is still taken.
    const [, tag, seq, stamp, , resource, id] = Buffer.from(past.cursor, 'base64url').toString('latin1').split('.');
    assert.equal((await t.request(`/api/public/v1/changes?after=${Buffer.from(`2.${tag}.${seq}.${stamp}.${resource}.${id}`).toString('base64url')}`, { key: w.lone.key })).status, 200);
  });

  it('gives a whole copy from the beginning after deletions were pruned: a cursor given out since is not too old for them', async () => {
    const lone = (id: string) => ({ ...student(id, 'Давний'), group_id: 'g9', branch_id: null });
    assert.ok((await importData(t.store.db, w.lone.id, { students: [lone('old-1'), lone('old-2'), lone('old-3')] })).ok);
    const deleted = await importData(t.store.db, w.lone.id, { deleted: { students: ['old-3'] } });
    assert.ok(deleted.ok && deleted.seq !== null);
    await sql`update change_batches set committed_at = '2000-01-01T00:00:00Z' where school_id = ${w.lone.id} and seq <= ${deleted.seq}`.execute(t.store.db);
    const later = await importData(t.store.db, w.lone.id, { students: [lone('new-1')] }, { tombstoneDays: 90 });
    assert.ok(later.ok && later.seq !== null, JSON.stringify(later));
    // Pages of one: most of them end before the pruned tombstone's place.
    const copy = await readAll(w.lone.key, undefined, 1);
    const ids = copy.changes.map((c) => `${c.change} ${c.id}`);
    assert.ok(ids.includes('upsert old-1') && ids.includes('upsert new-1') && !ids.some((c) => c.endsWith('old-3')), ids.join(', '));
    const listed = (await t.request('/api/public/v1/students?limit=200', { key: w.lone.key })).json() as { meta: { total: number } };
    assert.equal(copy.changes.filter((c) => c.resource === 'students').length, listed.meta.total);
    // Pruned again after a cursor was given out, before its place: 410.
    const midway = await page(w.lone.key, '?limit=1');
    const gone = await importData(t.store.db, w.lone.id, { deleted: { students: ['new-1'] } });
    assert.ok(gone.ok && gone.seq !== null);
    await sql`update change_batches set committed_at = '2000-01-01T00:00:00Z' where school_id = ${w.lone.id} and seq <= ${gone.seq}`.execute(t.store.db);
    assert.ok((await importData(t.store.db, w.lone.id, { students: [lone('new-2')] }, { tombstoneDays: 90 })).ok);
    assert.equal((await t.request(`/api/public/v1/changes?after=${midway.meta.next_cursor}`, { key: w.lone.key })).status, 410);
  });

  it('after the data is restored from an older copy and imported into, takes neither a cursor nor an ETag of the lost data for the new', async () => {
    const one = await importData(t.store.db, w.lone.id, { students: [{ ...student('restored-1', 'Первый'), group_id: 'g9', branch_id: null }] });
    assert.ok(one.ok && one.seq !== null, JSON.stringify(one));
    const before = await readAll(w.lone.key);
    const lost = await importData(t.store.db, w.lone.id, { students: [{ ...student('lost', 'Потерянный'), group_id: 'g9', branch_id: null }] });
    assert.ok(lost.ok && lost.seq !== null, JSON.stringify(lost));
    const seen = await readAll(w.lone.key, before.cursor);
    assert.deepEqual(seen.changes.map((c) => c.id), ['lost']);
    const listed = await t.request('/api/public/v1/students', { key: w.lone.key });
    const tag = String(listed.headers.etag);
    // The copy was made before the second import: its batch and its sequence number are gone.
    const { stamp } = (await t.store.db.selectFrom('change_batches').select('stamp').where('school_id', '=', w.lone.id).where('seq', '=', one.seq).executeTakeFirstOrThrow());
    await t.store.db.deleteFrom('change_batches').where('school_id', '=', w.lone.id).where('seq', '=', lost.seq).execute();
    await t.store.db.deleteFrom('students').where('school_id', '=', w.lone.id).where('id', '=', 'lost').execute();
    await t.store.db.updateTable('schools').set({ data_version: one.seq, data_stamp: stamp }).where('id', '=', w.lone.id).execute();
    await announceKeyChanges(t.store.db);
    // Another import takes the lost one's number.
    const again = await importData(t.store.db, w.lone.id, { students: [{ ...student('instead', 'Вместо'), group_id: 'g9', branch_id: null }] });
    assert.ok(again.ok && again.seq === lost.seq, JSON.stringify(again));
    const expired = await t.request(`/api/public/v1/changes?after=${seen.cursor}`, { key: w.lone.key });
    assert.equal(expired.status, 410, expired.text);
    assert.equal((await t.request('/api/public/v1/students', { key: w.lone.key, headers: { 'if-none-match': tag } })).status, 200);
    // The cursor saved before the lost import names a batch that is still there: it gives the new import.
    assert.deepEqual((await readAll(w.lone.key, before.cursor)).changes.map((c) => c.id), ['instead']);
  });

  it('checks a cursor again when deletions were pruned between its check and its page: 410, not a page without them', async () => {
    const lone = (id: string) => ({ ...student(id, 'Между'), group_id: 'g9', branch_id: null });
    assert.ok((await importData(t.store.db, w.lone.id, { students: [lone('mid-a')] })).ok);
    const saved = (await readAll(w.lone.key)).cursor;
    const deleted = await importData(t.store.db, w.lone.id, { deleted: { students: ['mid-a'] } });
    assert.ok(deleted.ok && deleted.seq !== null);
    await sql`update change_batches set committed_at = '2000-01-01T00:00:00Z' where school_id = ${w.lone.id} and seq <= ${deleted.seq}`.execute(t.store.db);
    // The import that prunes that deletion's tombstone commits right after the cursor's check has
    // read the store, before the page is read (on PostgreSQL, two statements and two snapshots).
    const reads = t.store.reads;
    const run = reads.run.bind(reads);
    /** The reader's own method again: the hook is a property of the instance. */
    const unhook = () => delete (reads as { run?: unknown }).run;
    let pruned = false;
    reads.run = <R>(text: string, values: readonly unknown[]): R[] | Promise<R[]> => {
      const rows = run<R>(text, values);
      if (!text.includes('tombstones_dropped_resource')) return rows;
      unhook();
      return (async () => {
        const checked = await rows;
        const later = await importData(t.store.db, w.lone.id, { students: [lone('mid-b')] }, { tombstoneDays: 90 });
        assert.ok(later.ok, JSON.stringify(later));
        pruned = true;
        // On SQLite the page would otherwise be read in the check's own turn, and so its snapshot.
        await new Promise((resolve) => setImmediate(resolve));
        return checked;
      })();
    };
    try {
      const res = await t.request(`/api/public/v1/changes?after=${saved}&limit=7`, { key: w.lone.key });
      assert.ok(pruned, 'the pruning import ran between the check and the page');
      assert.equal(res.status, 410, res.text);
    } finally {
      unhook();
    }
  });

  it('still reads a cursor of version 1, which has no stamp', async () => {
    const { cursor } = await readAll(w.a.key);
    const [, tag, seq] = Buffer.from(cursor, 'base64url').toString('latin1').split('.');
    const v1 = Buffer.from(`1.${tag}.${seq}`).toString('base64url');
    assert.deepEqual((await page(w.a.key, `?after=${v1}`)).items, []);
  });

  it('is an endpoint like the others: a key, an ETag, a 304', async () => {
    assert.equal((await t.request('/api/public/v1/changes', { key: null })).status, 401);
    assert.equal((await t.request('/api/public/v1/changes', { key: w.downgradedKey })).status, 402);
    const first = await t.request('/api/public/v1/changes?limit=5', { key: w.a.key });
    const tag = String(first.headers.etag);
    assert.equal((await t.request('/api/public/v1/changes?limit=5', { key: w.a.key, headers: { 'if-none-match': tag } })).status, 304);
  });

  it('gives a page of hundreds of changes whole and in order, deletions among them, as pages of any size give them', async () => {
    const start = await readAll(w.b.key);
    const leads = Array.from({ length: 260 }, (_, i) => ({
      id: `l-many-${String(i).padStart(3, '0')}`, full_name: `Лид ${i}`, phone: '+79990000044', email: null, category: 'B', source: 'website', status: 'new', student_id: null, created_at: '2026-03-07T10:00:00Z',
    }));
    const added = await importData(t.store.db, w.b.id, { leads });
    assert.ok(added.ok, JSON.stringify(added));
    const gone = leads.filter((_, i) => i % 7 === 0).map((l) => l.id);
    const dropped = await importData(t.store.db, w.b.id, { deleted: { leads: gone } });
    assert.ok(dropped.ok, JSON.stringify(dropped));

    const whole = await page(w.b.key, `?limit=1000&after=${start.cursor}`);
    assert.equal(whole.items.length, 260);
    assert.equal(whole.items.filter((c) => c.change === 'delete').length, gone.length);
    assert.equal(whole.meta.has_more, false);
    assert.deepEqual(whole.items, (await readAll(w.b.key, start.cursor, 7)).changes);
    // Pages at the parts' edges (100, 200) with more after them, and pages read in one turn
    // (on PostgreSQL, one batched statement).
    for (const limit of [100, 200]) {
      const first = await page(w.b.key, `?limit=${limit}&after=${start.cursor}`);
      assert.equal(first.meta.has_more, true);
      assert.deepEqual(first.items, whole.items.slice(0, limit));
      assert.deepEqual((await readAll(w.b.key, start.cursor, limit)).changes, whole.items);
    }
    const together = await Promise.all([1000, 200, 150, 99].map((limit) => page(w.b.key, `?limit=${limit}&after=${start.cursor}`)));
    for (const [i, limit] of [1000, 200, 150, 99].entries()) assert.deepEqual(together[i]!.items, whole.items.slice(0, limit));
    // From the beginning too: one page of up to 1,000 and pages of 3 agree.
    assert.deepEqual((await readAll(w.b.key)).changes, (await readAll(w.b.key, undefined, 3)).changes);
  });

  /** The statement (text and values) the feed runs for `query`, as the service's reader is given it. */
  async function feedStatement(query: string): Promise<{ text: string; values: readonly unknown[] }> {
    const reads = t.store.reads as unknown as { run: (text: string, values: readonly unknown[]) => unknown };
    const run = reads.run;
    let seen: { text: string; values: readonly unknown[] } | null = null;
    reads.run = function (this: unknown, text, values) {
      if (text.includes('list_changes')) seen = { text, values };
      return run.call(this, text, values);
    };
    try {
      await page(w.a.key, query);
    } finally {
      reads.run = run;
    }
    // Assigned in the stand-in above, which the compiler does not follow.
    const statement = seen as { text: string; values: readonly unknown[] } | null;
    assert.ok(statement, 'the feed ran no statement');
    return statement;
  }

  it('on SQLite, merges the lists\' places as their index gives them, sorts nothing, and seeks each change\'s record and batch', { skip: process.env.DATABASE_URL ? 'SQLite only: PostgreSQL plans by its own statistics' : false }, async () => {
    // The plan, not the time: read from the statement the feed runs. Planned freely, SQLite
    // read every record of the school's lists to find a page's, and sorted the page's changes.
    const { text, values } = await feedStatement('?limit=11');
    const rows = await t.store.db.executeQuery<{ detail: string }>(CompiledQuery.raw(`explain query plan ${text}`, [...values]));
    const plan = rows.rows.map((r) => r.detail);
    assert.ok(plan.includes('MERGE (UNION ALL)'), plan.join('\n'));
    assert.equal(plan.filter((d) => /^SEARCH list_changes USING PRIMARY KEY \(school_id=\? AND resource=\? AND \(change_seq,id\)>\(\?,\?\)\)$/.test(d)).length, RESOURCES.length, plan.join('\n'));
    for (const resource of RESOURCES) assert.ok(plan.includes(`SEARCH r USING INDEX sqlite_autoindex_${resource}_1 (school_id=? AND id=?)`), `${resource}:\n${plan.join('\n')}`);
    assert.ok(plan.some((d) => /^SEARCH b USING .*\(school_id=\? AND seq=\?\)$/.test(d)), plan.join('\n'));
    // No sort: the merge gives the page's order, and the changes are made in it.
    assert.equal(plan.filter((d) => d.startsWith('USE TEMP B-TREE')).length, 0, plan.join('\n'));
  });

  it('on PostgreSQL, reads the whole feed\'s places as one range of the marks\' index in the change order, and compares no place\'s text in a sort', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' }, async () => {
    // The plan, not the time, of the statement the feed runs, as PostgreSQL plans it where a
    // school is too large for its tables to be read whole (a test's tables are tiny; which
    // index a feed of some lists reads is left to the statistics).
    const { text, values } = await feedStatement('?limit=11');
    // Its generic plan, as the service runs it (src/db/index.ts), not one for these values.
    const nodes = await t.store.db.transaction().execute(async (trx) => {
      await sql`set local enable_seqscan = off`.execute(trx);
      await sql`set local plan_cache_mode = force_generic_plan`.execute(trx);
      await trx.executeQuery(CompiledQuery.raw(`prepare feed_plan as ${text}`));
      // EXPLAIN takes no bound values: the statement's (numbers and ids) go in as literals.
      const literal = (v: unknown) => (typeof v === 'number' ? String(v) : `'${String(v).replaceAll("'", "''")}'`);
      const rows = await trx.executeQuery<{ 'QUERY PLAN': unknown }>(CompiledQuery.raw(`explain (format json) execute feed_plan(${values.map(literal).join(', ')})`));
      await trx.executeQuery(CompiledQuery.raw('deallocate feed_plan'));
      const all: Record<string, unknown>[] = [];
      const walk = (node: Record<string, unknown>) => {
        all.push(node);
        for (const child of (node['Plans'] as Record<string, unknown>[] | undefined) ?? []) walk(child);
      };
      walk((rows.rows[0]!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
      return all;
    });
    const marks = nodes.filter((n) => n['Relation Name'] === 'list_changes');
    assert.deepEqual(marks.map((n) => [n['Node Type'], n['Index Name']]), [['Index Only Scan', 'list_changes_feed']], JSON.stringify(marks));
    // No sort compares the places' text: the marks' range and the tombstones' index give the
    // order they are numbered in; the parts and the last place are found by that number.
    const textSorts = nodes.filter((n) => n['Node Type'] === 'Sort' && (n['Sort Key'] as string[]).some((k) => /resource|\bid\b/.test(k)));
    assert.deepEqual(textSorts, []);
  });
});

describe('the changes feed on a server that has not heard of an import yet', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only: on SQLite every turn reads the data version' }, () => {
  let store: TestStore;
  let t: TestApp;
  let w: World;
  /** While set, the announcements of key changes in this store's schema wait here instead of reaching the server. */
  let held: (() => void)[] | null = null;

  before(async () => {
    store = await createTestStore();
    const watchKeys = store.watchKeys.bind(store);
    (store as { watchKeys: TestStore['watchKeys'] }).watchKeys = (options) => {
      const watch = watchKeys(options);
      if (watch !== null) {
        // Other test files announce in schemas of their own on the same channel: theirs pass.
        const own = watch as unknown as { schema: string; announced: (client: unknown, message: { payload?: string }, lost: unknown) => void };
        const announced = own.announced.bind(watch);
        own.announced = (client, message, lost) => {
          if (held === null || (message.payload ?? '').split(' ')[0] !== own.schema) announced(client, message, lost);
          else held.push(() => announced(client, message, lost));
        };
      }
      return watch;
    };
    t = await startTestApp({ store, config: { rateLimitVip: 100_000 } });
    w = await seedWorld(store.db);
  });
  after(async () => {
    await t.close();
    await store.close();
  });

  it('takes the cursor of a page it gave out of that import', async () => {
    const first = (await t.request('/api/public/v1/changes?limit=1000', { key: w.lone.key })).json() as Feed;
    // Read again: the server keeps the key's row, and with it the school's data version.
    assert.equal((await t.request(`/api/public/v1/changes?after=${first.meta.next_cursor}`, { key: w.lone.key })).status, 200);
    held = [];
    const importing = importData(store.db, w.lone.id, { students: [{ id: 'heard-late', full_name: 'Поздно', phone: '+79990000001', email: 'heard-late@example.ru', category: 'B', status: 'learning_theory', group_id: 'g9', branch_id: null, created_at: '2026-01-10T09:00:00Z' }] });
    try {
      // An announcement comes after the import's commit (it is held back from the server); a
      // failed import ends the wait too, and the page below says so.
      let settled = false;
      void importing.finally(() => (settled = true));
      while (held.length === 0 && !settled) await new Promise((resolve) => setTimeout(resolve, 2));
      // Committed; the server has not heard. A page read now has the import's change (another target than the read above, so not a stored answer).
      const res = await t.request(`/api/public/v1/changes?after=${first.meta.next_cursor}&limit=7`, { key: w.lone.key });
      const page = res.json() as Feed;
      assert.deepEqual(page.items.map((c) => c.id), ['heard-late'], res.text);
      const next = await t.request(`/api/public/v1/changes?after=${page.meta.next_cursor}`, { key: w.lone.key });
      assert.equal(next.status, 200, next.text);
    } finally {
      const release = held;
      held = null;
      for (const announce of release) announce();
    }
    const imported = await importing;
    assert.ok(imported.ok, JSON.stringify(imported));
  });
});
