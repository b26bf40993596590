/**
 * Lists kept whole (src/resources/cache.ts, `setRun`; common/list.ts, `cutPage`): once
 * 16 overlapping pages of a list were missed for the same data, the list is read whole and
 * any page of it, at any offset, is cut from that run, to the bytes and headers its query
 * gives, and stored where there is room; a page narrowed by anything but the school is still
 * queried, and an import's new data is read anew.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { generateSchoolData } from '../../src/demo/generate.js';
import { ALL_SCOPES } from '../../src/domain/scopes.js';
import { importData } from '../../src/importer/index.js';
import { createKey } from '../../src/management/keys.js';
import { createSchool } from '../../src/management/schools.js';
import { ApiMetrics } from '../../src/ops/metrics.js';
import { ResponseCache } from '../../src/resources/cache.js';
import type { Reader } from '../../src/db/reader.js';
import { readRun, type Run } from '../../src/resources/common/list.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { pipelinedStatuses } from '../helpers/fuzz.js';
import { stableHeaders, type TestResponse } from '../helpers/http.js';
import { REDIS_ONLY } from '../helpers/redis.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

const API = '/api/public/v1';
const LISTS = ['students', 'instructors', 'vehicles', 'lessons', 'contracts', 'payments', 'leads'] as const;
/** Misses of a list's pages that make it kept whole (cache.ts RUN_AFTER). */
const RUN_AFTER = 16;

/** The school's data, made again alike for each import. */
const data = () => generateSchoolData({ seed: 5, students: 60, now: new Date('2026-06-01T00:00:00Z'), timezone: 'Europe/Moscow' });

/** A series' value in `from`'s exposition (its name and labels as written there). */
const seriesValue = async (from: ApiMetrics, series: string) => {
  const line = (await from.exposition()).split('\n').find((l) => l.startsWith(`${series} `));
  return Number(line?.slice(series.length + 1) ?? NaN);
};

const comparable = (res: TestResponse) => ({ status: res.status, headers: stableHeaders(res), text: res.text });
/** A problem's body names its request: left out where two requests' answers are compared. */
const withoutId = (answer: ReturnType<typeof comparable>) => ({ ...answer, text: answer.text.replace(/"request_id":"[^"]*"/, '') });

describe('lists kept whole', () => {
  let store: TestStore;
  let metrics: ApiMetrics;
  let kept: TestApp;
  let queried: TestApp;
  let key: string;
  let schoolId: string;
  const totals = new Map<string, number>();
  const hits = () => seriesValue(metrics, 'school_data_stored_answer_lookups_total{result="hit"}');
  const cuts = () => seriesValue(metrics, 'school_data_stored_list_cuts_total');

  before(async () => {
    store = await createTestStore();
    metrics = new ApiMetrics();
    kept = await startTestApp({ store, metrics, config: { rateLimitVip: 100_000 } });
    // Every answer queried: what each page must be.
    queried = await startTestApp({ store, config: { rateLimitVip: 100_000, responseCacheMb: 0 } });
    const school = await createSchool(store.db, { name: 'Runs', plan: 'VIP', timezone: 'Europe/Moscow', id: `t_runs_${randomBytes(5).toString('hex')}` });
    assert.ok(school.ok);
    schoolId = school.value.id;
    const imported = await importData(store.db, schoolId, data());
    assert.ok(imported.ok, JSON.stringify(imported));
    const created = await createKey(store.db, schoolId, 'runs');
    assert.ok(created.ok);
    key = created.value.key;
    for (const list of LISTS) {
      const res = await queried.request(`${API}/${list}?limit=1`, { key });
      totals.set(list, (res.json() as { meta: { total: number } }).meta.total);
    }
  });
  after(async () => {
    await kept.close();
    await queried.close();
    await store.close();
  });

  it('cuts every page of every list from its run once 16 of its overlapping pages were missed, to the bytes and headers its query gives', async () => {
    for (const list of LISTS) {
      const total = totals.get(list)!;
      assert.ok(total >= 8, `${list}: ${total} records`);
      // Before the 16th miss nothing is cut; the 16th reads the run and is cut from it.
      const before = await cuts();
      // Pages one after the other are not counted: a loader's are each stored.
      for (let i = 0; i < RUN_AFTER + 4; i++) assert.equal((await kept.request(`${API}/${list}?limit=2&offset=${2 * i}`, { key })).status, 200);
      assert.equal(await cuts(), before, `${list}: pages one after the other do not make a run`);
      // Pages that overlap others are.
      for (let i = 0; i < RUN_AFTER - 1; i++) assert.equal((await kept.request(`${API}/${list}?limit=${3 + i}&offset=${i + 1}`, { key })).status, 200);
      assert.equal(await cuts(), before, `${list}: nothing cut before the run was read`);
      assert.equal((await kept.request(`${API}/${list}?limit=40&offset=1`, { key })).status, 200);
      assert.equal(await cuts(), before + 1, `${list}: the 16th miss is cut from the run it read`);

      const pages = [
        '', '?limit=1', '?offset=0&limit=200', '?limit=7&offset=2', `?offset=${total - 5}&limit=13`, `?offset=${total - 1}`,
        `?offset=${total}`, `?offset=${total + 100}&limit=5`, '?offset=1000000&limit=200', `?limit=${Math.min(total, 200)}&offset=0`,
      ];
      const cutBefore = await cuts();
      for (const page of pages) {
        const path = `${API}/${list}${page}`;
        const cut = await kept.request(path, { key });
        const made = await queried.request(path, { key });
        assert.equal(cut.status, 200, `${path}: ${cut.text}`);
        assert.deepEqual(comparable(cut), comparable(made), path);
        const head = await kept.request(path, { key, method: 'HEAD' });
        assert.equal(head.headers['content-length'], made.headers['content-length'], `${path}: HEAD`);
        assert.equal(head.headers.etag, made.headers.etag, `${path}: HEAD`);
      }
      // Other spellings go through the query's decoder, and are answered alike (a page only, cut).
      let odd200 = 0;
      for (const odd of ['?limit=05&offset=3', '?offset=3&limit=5&', '?limit=5&limit=6', '?limit=0', '?offset=-1', '?limit=5&offset=3&status=', '?LIMIT=5']) {
        const path = `${API}/${list}${odd}`;
        const answer = comparable(await kept.request(path, { key }));
        assert.deepEqual(withoutId(answer), withoutId(comparable(await queried.request(path, { key }))), path);
        if (answer.status === 200) odd200 += 1;
      }
      assert.ok(odd200 >= 1, list);
      // Each page cut once, and stored while the store has room: its HEAD and a second GET are hits.
      const cutAll = await cuts();
      assert.equal(cutAll, cutBefore + pages.length + odd200, list);
      const hitsBefore = await hits();
      assert.equal((await kept.request(`${API}/${list}?limit=7&offset=2`, { key })).status, 200);
      assert.equal(await cuts(), cutAll, list);
      assert.equal(await hits(), hitsBefore + 1, `${list}: a page cut is stored where there is room`);
    }
  });

  it('gives a client that takes gzip the cut page gzipped, and answers 304 to its entity tag without cutting it', async () => {
    const path = `${API}/students?limit=30&offset=11`;
    const made = await queried.request(path, { key });
    const zipped = await kept.request(path, { key, headers: { 'accept-encoding': 'gzip' } });
    assert.equal(zipped.headers['content-encoding'], 'gzip');
    assert.equal(gunzipSync(zipped.body).toString(), made.text);
    const again = await kept.request(path, { key, headers: { 'if-none-match': made.headers.etag as string } });
    assert.equal(again.status, 304);
    // A page not stored, asked for with its current tag: 304, and nothing cut.
    const other = `${API}/students?limit=29&offset=12`;
    const tag = (await queried.request(other, { key })).headers.etag as string;
    const before = await cuts();
    assert.equal((await kept.request(other, { key, headers: { 'if-none-match': tag } })).status, 304);
    assert.equal(await cuts(), before, 'nothing cut for a client that holds the page');
    assert.equal((await kept.request(other, { key })).status, 200);
    assert.equal(await cuts(), before + 1);
  });

  it('counts no cut for a page whose GET body the parser refused: its 400 is the one answer', async () => {
    const head = (target: string) => `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nTransfer-Encoding: chunked\r\n\r\n`;
    const before = await cuts();
    // Cut at once from the run the earlier tests kept, then held to the turn's end, when the parser has refused the body.
    assert.deepEqual(await pipelinedStatuses(kept.origin, kept.ca, `${head(`${API}/students?limit=7&offset=13`)}zz\r\nabc\r\n0\r\n\r\n`), [400]);
    assert.equal(await cuts(), before, 'a page that was not written is no cut');
    assert.equal((await kept.request(`${API}/students?limit=7&offset=14`, { key })).status, 200);
    assert.equal(await cuts(), before + 1, 'the next page, written, is one');
  });

  it('queries a page narrowed by anything but the school, as before', async () => {
    const before = await cuts();
    for (const path of [`${API}/students?status=enrolled&limit=5`, `${API}/lessons?period_from=2026-03-01&period_to=2026-03-31&limit=5`, `${API}/instructors?is_active=true`]) {
      const res = await kept.request(path, { key });
      assert.deepEqual(comparable(res), comparable(await queried.request(path, { key })), path);
    }
    assert.equal(await cuts(), before);
  });

  it('reads the list again for the data an import brings, and never cuts the new data\'s pages from the old run', async () => {
    const path = `${API}/students?limit=3&offset=0`;
    const first = (await kept.request(path, { key })).json() as { items: { id: string; full_name: string }[] };
    const changed = data();
    const student = changed.students!.find((s) => s.id === first.items[0]!.id)!;
    student.full_name = 'Другое имя';
    const imported = await importData(store.db, schoolId, changed);
    assert.ok(imported.ok, JSON.stringify(imported));
    const before = await cuts();
    const now = await kept.request(path, { key });
    assert.equal((now.json() as typeof first).items[0]!.full_name, 'Другое имя');
    assert.deepEqual(comparable(now), comparable(await queried.request(path, { key })));
    assert.equal(await cuts(), before, 'the new data\'s page was queried');
  });

  /**
   * The store's reader, each statement run through `change` (its text, and its rows when asked
   * for); everything else of the reader as it is (the key lookup uses more of SQLite's).
   */
  const readsThrough = (change: (sql: string, rows: () => unknown[] | Promise<unknown[]>) => unknown[] | Promise<unknown[]>): Reader => {
    const real = store.reads;
    const run = (sql: string, parameters: readonly unknown[]) => change(sql, () => real.run<unknown>(sql, parameters));
    return new Proxy(real, {
      get(target, name) {
        if (name === 'run') return run;
        const value: unknown = Reflect.get(target, name, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  };

  it('leaves a page to its own query when its list cannot be read whole, counts the failure, and does not read the list again for the same data', async () => {
    // Once `failing` is set, any statement the pages' queries never ran fails: the list's whole read.
    const seen = new Set<string>();
    let failing = false;
    const reads = readsThrough((sql, rows) => {
      if (failing && !seen.has(sql)) throw new Error('the store is down');
      seen.add(sql);
      return rows();
    });
    const failed = new ApiMetrics();
    const app = await startTestApp({ store: { ...store, reads }, metrics: failed, config: { rateLimitVip: 100_000 } });
    const counted = (name: string) => seriesValue(failed, name);
    // Overlapping pages of one shape (limit 3, offsets not multiples of 3).
    const offsets = Array.from({ length: 3 * RUN_AFTER }, (_, i) => i).filter((i) => i % 3 !== 0);
    const page = async (offset: number) => {
      const path = `${API}/vehicles?limit=3&offset=${offset}`;
      assert.deepEqual(comparable(await app.request(path, { key })), comparable(await queried.request(path, { key })), path);
    };
    try {
      for (const offset of offsets.slice(0, RUN_AFTER - 1)) await page(offset);
      failing = true;
      await page(offsets[RUN_AFTER - 1]!);
      assert.equal(await counted('school_data_stored_list_read_failures_total'), 1);
      failing = false;
      for (const offset of offsets.slice(RUN_AFTER)) await page(offset);
      assert.equal(await counted('school_data_stored_list_cuts_total'), 0, 'not read again for the same data: every page queried');
      assert.equal(await counted('school_data_stored_list_read_failures_total'), 1);
    } finally {
      await app.close();
    }
  });

  it('keeps a list\'s items in their order when its rows come back in another (a batch of PostgreSQL\'s reads has none of its own)', async () => {
    const reversed = readsThrough((_sql, rows) => {
      const reverse = (got: unknown[]) => (got.length > 1 && typeof got[0] === 'object' && got[0] !== null && 'pos' in got[0] ? [...got].reverse() : got);
      const got = rows();
      return Array.isArray(got) ? reverse(got) : got.then(reverse);
    });
    for (const list of ['students', 'lessons'] as const) {
      const inOrder = await readRun(store.reads, list, schoolId, 10_000, 1 << 24);
      assert.ok(inOrder !== null && inOrder.ends.length === totals.get(list), list);
      const read = await readRun(reversed, list, schoolId, 10_000, 1 << 24);
      assert.ok(read !== null && read.items.equals(inOrder.items), `${list}: its items in their order`);
      assert.deepEqual([...read.ends], [...inOrder.ends], list);
    }
  });

  it('keeps no list longer than its share of the store, by its length or its bytes: its pages are all queried', async () => {
    // 64 KiB: a run of 8 KiB at most, so of 128 items at most.
    const cache = new ResponseCache(64 * 1024);
    const small = await startTestApp({ store, cache, config: { rateLimitVip: 100_000 } });
    const pages = async (list: string) => {
      const before = cache.lookups.cuts;
      for (let i = 0; i < 2 * RUN_AFTER; i++) {
        const path = `${API}/${list}?limit=2&offset=${2 * i + 1}`;
        assert.deepEqual(comparable(await small.request(path, { key })), comparable(await queried.request(path, { key })), path);
      }
      return cache.lookups.cuts - before;
    };
    try {
      assert.ok(totals.get('lessons')! > 128 && totals.get('students')! <= 128, JSON.stringify([...totals]));
      assert.equal(await pages('instructors'), RUN_AFTER + 1, 'kept whole: the 16th page and the ones after it cut');
      assert.equal(await pages('lessons'), 0, 'too long');
      assert.equal(await pages('students'), 0, 'too many bytes');
    } finally {
      await small.close();
    }
  });
});

describe('ResponseCache runs', () => {
  const tenant = (dataVersion = 1) => ({ id: 's', timezone: 'Europe/Moscow', currency: 'RUB', dataVersion, dataStamp: 'AAAAAAAA', scopes: ALL_SCOPES });
  const run = (items: string[]): Run => {
    const joined = Buffer.from(items.join(','));
    let at = -1;
    return { items: joined, ends: Uint32Array.from(items, (item) => (at += item.length + 1)) };
  };

  it('asks for a list\'s run once, at its 16th missed page for the same data', () => {
    const cache = new ResponseCache(1 << 20);
    for (let i = 1; i < RUN_AFTER; i++) assert.equal(cache.wantsRun(tenant(), 'students'), false, `miss ${i}`);
    assert.equal(cache.wantsRun(tenant(), 'lessons'), false, 'each list counts its own');
    assert.equal(cache.wantsRun(tenant(), 'students'), true);
    assert.equal(cache.wantsRun(tenant(), 'students'), false, 'asked for once');
    for (let i = 1; i < RUN_AFTER; i++) cache.wantsRun(tenant(2), 'students');
    assert.equal(cache.wantsRun(tenant(2), 'students'), true, 'new data counts anew');
    assert.equal(new ResponseCache(0).wantsRun(tenant(), 'students'), false, 'no memory, no run');
  });

  it('keeps the marks of lists asked for when its counts reach their bound (50,000), until those marks are half of it', () => {
    const cache = new ResponseCache(1 << 20);
    const schools = new Map<string, ReturnType<typeof tenant>>();
    const of = (id: string) => schools.get(id) ?? schools.set(id, { ...tenant(), id }).get(id)!;
    const miss = (n: number) => cache.wantsRun(of(`s${Math.floor(n / LISTS.length)}`), LISTS[n % LISTS.length]!);
    const ask = (n: number) => Array.from({ length: RUN_AFTER }, () => miss(n)).lastIndexOf(true);
    const counts = (cache as unknown as { runCounts: Map<string, number> }).runCounts;
    assert.equal(ask(0), RUN_AFTER - 1);
    // Lists missed once each, to the bound: the next count drops them, not the list asked for.
    let n = 1;
    const toBound = () => {
      while (counts.size < 50_000 && n < 1_000_000) miss(n++);
      assert.equal(counts.size, 50_000, 'the bound is 50,000 counts');
      miss(n++);
    };
    toBound();
    assert.equal(counts.size, 2);
    assert.equal(ask(0), -1, 'asked for once, still');
    // Marks of lists asked for, half the bound: the next drop takes them too.
    for (let asked = 1; asked < 25_000; asked++) ask(n++);
    toBound();
    assert.equal(counts.size, 1);
    assert.equal(ask(0), RUN_AFTER - 1, 'dropped: asked for again');
  });

  it('keeps a run for its school\'s data, counted in its bytes, and lets it go with that data', () => {
    const cache = new ResponseCache(1 << 20);
    const kept = run(['{"id":"a"}', '{"id":"b"}']);
    assert.equal(cache.setRun(tenant(), 'students', kept), true);
    assert.equal(cache.run(tenant(), 'students'), kept);
    assert.equal(cache.run(tenant(), 'lessons'), undefined);
    assert.ok(cache.size.bytes > kept.items.length + kept.ends.byteLength, `${cache.size.bytes} bytes`);
    assert.equal(cache.lookups.cuts, 0, 'a cut is counted when its answer is written');
    cache.cutWritten();
    assert.equal(cache.lookups.cuts, 1);
    // A request bringing the school's new data: the run of the old data leaves.
    assert.equal(cache.run(tenant(2), 'students'), undefined);
    assert.equal(cache.size.entries, 0);
    assert.equal(cache.size.bytes, 0);
  });

  it('reads a list whole once for the same data while it stays or when it could not be kept, and again once it left unread', () => {
    let now = 0;
    // random 0: the entry stored first (the run) is the one picked when room is needed.
    const cache = new ResponseCache(300_000, { now: () => now, random: () => 0 });
    const asked = (list: 'students' | 'lessons', dataVersion = 1) => Array.from({ length: RUN_AFTER }, () => cache.wantsRun(tenant(dataVersion), list)).lastIndexOf(true);
    assert.equal(asked('students'), RUN_AFTER - 1);
    assert.equal(cache.setRun(tenant(), 'students', run(['{"id":"a"}'])), true);
    assert.equal(asked('lessons'), RUN_AFTER - 1);
    // 31 s later the run is cold, and leaves when room is needed.
    now += 31_000;
    for (const path of ['/a', '/b', '/c']) cache.set(tenant(), path, Buffer.alloc(100_000, 120), 'application/json', 'v');
    assert.equal(cache.run(tenant(), 'students'), undefined);
    assert.equal(asked('lessons'), -1, 'never kept: not read again for the same data');
    assert.equal(asked('students'), RUN_AFTER - 1, 'left unread: read again at its 16th missed page');
    // Kept again, then removed while read (the larger of two random picks): not read again.
    assert.equal(cache.setRun(tenant(), 'students', run(['{"id":"a"}'])), true);
    cache.set(tenant(), '/d', Buffer.alloc(100_000, 120), 'application/json', 'v');
    assert.ok(cache.run(tenant(), 'students'), 'read');
    for (const path of ['/e', '/f']) cache.set(tenant(), path, Buffer.alloc(100_000, 120), 'application/json', 'v');
    assert.equal(cache.run(tenant(), 'students'), undefined);
    assert.equal(asked('students'), -1, 'removed while read: not read again for the same data');
    assert.equal(asked('students', 2), RUN_AFTER - 1, 'read for new data');
  });

  it('keeps a run only where free memory, cold entries or gzipping make its room, and lets a cold run go first', () => {
    let now = 0;
    // Picks the entry in the middle of the store; admits an answer when full only when set to 0.
    let r = 0.5;
    const cache = new ResponseCache(100_000, { now: () => now, compressFrom: 1024, random: () => r });
    // Full of answers that gzip cannot shrink, all read: no room for the run.
    for (const path of ['/a', '/b', '/c', '/d']) cache.set(tenant(), path, randomBytes(22_000), 'application/json', 'v');
    const list = run(Array.from({ length: 400 }, () => '{"id":"abcdefghij"}'));
    assert.equal(cache.setRun(tenant(), 'students', list), false);
    assert.equal(cache.size.entries, 4, 'nothing removed for it');
    // /c cold (the entry picked): the run takes its room.
    now += 31_000;
    for (const path of ['/a', '/b', '/d']) cache.get(tenant(), path);
    assert.equal(cache.setRun(tenant(), 'students', list), true);
    assert.equal(cache.get(tenant(), '/c'), undefined);
    // 31 s on, the run unread: room for a new answer is made with it first.
    now += 31_000;
    for (const path of ['/a', '/b', '/d']) cache.get(tenant(), path);
    r = 0;
    cache.set(tenant(), '/e', randomBytes(22_000), 'application/json', 'v');
    assert.equal(cache.run(tenant(), 'students'), undefined);
    for (const path of ['/a', '/b', '/d', '/e']) assert.ok(cache.get(tenant(), path), path);
  });

  it('keeps no run or page for a school\'s data older than the data met last', () => {
    const cache = new ResponseCache(1 << 20);
    const old = tenant(1);
    assert.equal(cache.get(old, '/x'), undefined);
    // A request bringing new data is met while one with the old data is still answered.
    assert.equal(cache.get(tenant(2), '/x'), undefined);
    assert.equal(cache.setRun(old, 'students', run(['{"id":"a"}'])), false);
    cache.setCut(old, 'students', '/p', Buffer.from('{}'), 'application/json', 'v');
    assert.equal(cache.wantsRun(old, 'lessons'), false, 'no run read for it either');
    cache.set(old, '/q', Buffer.from('{}'), 'application/json', 'v');
    assert.equal(cache.size.entries, 0);
    assert.equal(cache.setRun(tenant(2), 'students', run(['{"id":"a"}'])), true);
  });

  it('removes an answer rather than a list kept whole when it must remove one of two picked at random', () => {
    let seed = 3;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const cache = new ResponseCache(200_000, { random });
    assert.equal(cache.setRun(tenant(), 'students', run(Array.from({ length: 1000 }, () => '{"id":"abc"}'))), true);
    // Answers that cannot be gzipped, never cold, more than fit: room is made by removals only.
    for (let i = 0; i < 400; i++) cache.set(tenant(), `/p${i}`, randomBytes(2000), 'application/json', 'v');
    assert.ok(cache.run(tenant(), 'students'), 'the run is still kept');
  });

  it('stores a cut page where free memory or cold answers make its room, and never gzips or removes a read answer for it', () => {
    let now = 0;
    let seed = 7;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const cache = new ResponseCache(20_000, { compressFrom: 1024, now: () => now, random });
    const page = (n: number) => Buffer.from(JSON.stringify({ items: Array.from({ length: n }, (_, i) => ({ id: `s${i}`, status: 'enrolled' })) }));
    const list = run(['{"id":"a"}']);
    cache.setCut(tenant(), 'students', '/cut0', page(200), 'application/json', 'c0');
    assert.equal(cache.get(tenant(), '/cut0'), undefined, 'no run kept: nothing to cut again, not stored as a cut page');
    assert.equal(cache.setRun(tenant(), 'students', list), true);
    cache.setCut(tenant(), 'students', '/cut1', page(200), 'application/json', 'c1');
    assert.equal(cache.get(tenant(), '/cut1')?.validator, 'c1', 'stored in free memory');
    // The answers' room is made with the cut page first, before any answer is gzipped.
    for (const path of ['/a', '/b']) cache.set(tenant(), path, page(200), 'application/json', path);
    assert.equal(cache.get(tenant(), '/cut1'), undefined);
    assert.equal(cache.get(tenant(), '/a')?.gzipped, false);
    const full = cache.size;
    cache.setCut(tenant(), 'students', '/cut2', page(200), 'application/json', 'c2');
    assert.equal(cache.get(tenant(), '/cut2'), undefined, 'no room: not stored');
    assert.deepEqual(cache.size, full, 'nothing removed or gzipped for it');
    assert.equal(cache.get(tenant(), '/b')?.gzipped, false);
    // 31 s later, only /b and the run read since: the others are cold, and make the cut page's room.
    now += 31_000;
    assert.ok(cache.get(tenant(), '/b'));
    assert.ok(cache.run(tenant(), 'students'));
    cache.setCut(tenant(), 'students', '/cut2', page(200), 'application/json', 'c2');
    assert.equal(cache.get(tenant(), '/cut2')?.validator, 'c2', 'stored in cold answers\' room');
    assert.equal(cache.get(tenant(), '/b')?.gzipped, false, 'the read answer kept as it was');
  });

  it('gives a cut page\'s room first to an answer: counted as room when full, removed before anything is gzipped', () => {
    const cache = new ResponseCache(40_000, { compressFrom: 1024, random: () => 0.5 });
    const page = () => Buffer.from(JSON.stringify({ items: Array.from({ length: 200 }, (_, i) => ({ id: `s${i}`, status: 'enrolled' })) }));
    assert.equal(cache.setRun(tenant(), 'students', run(['{"id":"a"}'])), true);
    for (let i = 0; i < 5; i++) cache.setCut(tenant(), 'students', `/cut${i}`, page(), 'application/json', 'c');
    const cutOnly = cache.size;
    assert.ok(cutOnly.bytes > 30_000, `${cutOnly.bytes} bytes of cut pages`);
    // Full of cut pages: an answer is admitted all the same (random 0.5 would refuse it), and takes their room.
    for (const path of ['/a', '/b', '/c', '/d']) cache.set(tenant(), path, page(), 'application/json', path);
    for (const path of ['/a', '/b', '/c', '/d']) assert.equal(cache.get(tenant(), path)?.gzipped, false, path);
    assert.ok(cache.size.entries < cutOnly.entries + 4, 'cut pages removed');
  });

  it('keeps a run read while its stored pages are, and makes its pages answers like any when it leaves', () => {
    let now = 0;
    const cache = new ResponseCache(20_000, { now: () => now, compressFrom: 1024 });
    assert.equal(cache.setRun(tenant(), 'students', run(['{"id":"a"}'])), true);
    cache.setCut(tenant(), 'students', '/cut', Buffer.alloc(5000, 120), 'application/json', 'c');
    // 20 s twice, the stored page read each time: the run is not cold.
    for (let i = 0; i < 2; i++) {
      now += 20_000;
      assert.ok(cache.get(tenant(), '/cut'));
    }
    // Room sought from cold entries: none is.
    cache.setCut(tenant(), 'students', '/cut2', Buffer.alloc(14_000, 120), 'application/json', 'c');
    assert.ok(cache.run(tenant(), 'students'), 'kept: its page was read');
    assert.equal(cache.get(tenant(), '/cut2'), undefined);
    // 40 s unread, the run is the first to leave when room is needed; its page is no longer
    // counted as a cut page (nothing to cut it again from), but as an answer to gzip.
    cache.set(tenant(), '/p', Buffer.alloc(12_000, 120), 'application/json', 'p');
    now += 40_000;
    const counts = cache as unknown as { cutBytes: number };
    assert.ok(counts.cutBytes > 5000);
    assert.equal(cache.setRun(tenant(), 'lessons', run(Array.from({ length: 100 }, () => '{"id":"abcdefghij"}'))), true);
    assert.equal(cache.run(tenant(), 'students'), undefined);
    assert.equal(counts.cutBytes, 0);
    const page = cache.get(tenant(), '/cut') as unknown as { queued: boolean; cut: boolean } | undefined;
    assert.ok(page === undefined || (page.queued && !page.cut), 'the page, if kept, is queued to gzip');
    // A new school data: the run and its page leave.
    assert.equal(cache.get(tenant(2), '/cut'), undefined);
    assert.equal(cache.size.entries, 0);
  });

  it('lets go of the entries that left, in the queues of cut pages and answers to gzip', () => {
    const cache = new ResponseCache(64 << 20, { compressFrom: 1024 });
    assert.equal(cache.setRun(tenant(), 'students', run(['{"id":"a"}'])), true);
    for (let i = 0; i < 3000; i++) {
      cache.setCut(tenant(), 'students', `/cut${i}`, Buffer.alloc(2000, 120), 'application/json', 'c');
      cache.set(tenant(), `/p${i}`, Buffer.alloc(2000, 120), 'application/json', 'v');
    }
    // New data for the school: every entry leaves, and the queues do not keep them.
    assert.equal(cache.get(tenant(2), '/p0'), undefined);
    assert.equal(cache.size.entries, 0);
    const queues = cache as unknown as { cutPages: unknown[]; toCompress: unknown[] };
    assert.ok(queues.cutPages.length < 1100 && queues.toCompress.length < 1100, `${queues.cutPages.length} and ${queues.toCompress.length} slots held`);
  });

  it('refuses a run over an eighth of the store, and makes room for one that fits', () => {
    const cache = new ResponseCache(80_000, { random: () => 0, compressFrom: 1024 });
    assert.equal(cache.maxRunBytes, 10_000);
    assert.equal(cache.setRun(tenant(), 'students', run(Array.from({ length: 600 }, () => '{"id":"abcdefghij"}'))), false);
    assert.equal(cache.size.entries, 0);
    // Full of answers that gzip shrinks: gzipping them makes the room.
    for (let i = 0; i < 30; i++) cache.set(tenant(), `/p${i}`, Buffer.alloc(2000, 120), 'application/json', 'v');
    assert.ok(cache.size.bytes > 70_000, `${cache.size.bytes} bytes`);
    assert.equal(cache.setRun(tenant(), 'students', run(Array.from({ length: 300 }, () => '{"id":"abcdefghij"}'))), true);
    assert.ok(cache.size.bytes <= 80_000, `${cache.size.bytes} bytes`);
    assert.equal(cache.size.entries, 31, 'none removed');
  });
});

describe('a list kept whole, with the limit counted in Redis', { skip: REDIS_ONLY }, () => {
  let store: TestStore;
  let metrics: ApiMetrics;
  let t: TestApp;
  let key: string;
  const cuts = () => seriesValue(metrics, 'school_data_stored_list_cuts_total');

  before(async () => {
    store = await createTestStore();
    metrics = new ApiMetrics();
    t = await startTestApp({ store, metrics, config: { rateLimitProfi: 20 } });
    const school = await createSchool(store.db, { name: 'Runs in Redis', plan: 'Profi', timezone: 'Europe/Moscow', id: `t_runs_${randomBytes(5).toString('hex')}` });
    assert.ok(school.ok);
    assert.ok((await importData(store.db, school.value.id, data())).ok);
    const created = await createKey(store.db, school.value.id, 'runs');
    assert.ok(created.ok);
    key = created.value.key;
  });
  after(async () => {
    await t.close();
    await store.close();
  });

  it('counts a page cut only when its answer is written: a request refused after its page was begun counts none', async () => {
    for (let i = 0; i < RUN_AFTER; i++) assert.equal((await t.request(`${API}/students?limit=${3 + i}&offset=${i + 1}`, { key })).status, 200);
    assert.equal(await cuts(), 1, 'the list was read whole at the 16th page, and that page cut');
    // Written so the front leaves them to the endpoint, which begins them while Redis decides (the limit is 20 a minute).
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await t.request(`${API}/students?limit=05&offset=${i + 1}`, { key })).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429, 429, 429]);
    assert.equal(await cuts(), 1 + 4);
  });
});
