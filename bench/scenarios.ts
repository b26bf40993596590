/**
 * The scenarios: what the load asks for, what each answer must be, and the targets.
 * Each scenario is a list of requests (key + path) that wrk walks round-robin; lists
 * are made from the data set's shape with a fixed seed, so every run sends the same.
 *
 * Single-endpoint scenarios spread over the keyed ordinary schools (the large school
 * has its own scenario); the mixed workload spreads over every key, the large school's
 * included, as a platform's traffic would.
 */
import { randomBytes } from 'node:crypto';
import { KEY_PREFIX } from '../src/access/keys.js';
import { Random } from '../src/demo/random.js';
import type { BenchKey, DatasetShape, SchoolShape } from './dataset/shape.js';

export interface BenchRequest {
  key: string;
  path: string;
  /** Sent as If-None-Match. */
  ifNoneMatch?: string;
  /** The records its answer holds, where the scenario reports records a second. */
  records?: number;
}

/** Sends one request to the server under test and gives what it answered. */
export type Fetch = (r: BenchRequest) => Promise<{ status: number; etag: string | undefined; body: Buffer }>;

type PerStore = { sqlite: number; postgres: number };

export interface Targets {
  /** Minimum req/s as a fraction of the bare baseline, per store, with stored answers on; null: no ratio target. */
  ratio: PerStore | null;
  /** The same with stored answers off (--response-cache-mb 0): the database path. */
  ratioUncached?: PerStore;
  /** Maximum p99 latency, milliseconds. */
  p99Ms: number;
}

export interface Scenario {
  name: string;
  title: string;
  /** The status every answer must have (the 429 flood lets a window's first requests pass). */
  expect: 200 | 304 | 401 | 429;
  targets: Targets;
  /** Keep-alive connections, when not the run's (--connections). */
  connections?: number;
  requests(shape: DatasetShape): BenchRequest[];
  /** Makes the final list from the server's own answers (entity tags, cursors), once per run. */
  prepare?(requests: BenchRequest[], fetch: Fetch): Promise<BenchRequest[]>;
}

/** A scenario's ratio target for a store, with stored answers on or off (`responseCacheMb` 0). */
export function ratioTarget(targets: Targets, store: keyof PerStore, responseCacheMb: number): number | undefined {
  return (responseCacheMb === 0 ? (targets.ratioUncached ?? targets.ratio) : targets.ratio)?.[store];
}

/** The "peak RSS <= 200 MB", read as 200 MiB, the unit of ps, top and the reports. */
export const MAX_RSS_BYTES = 200 * 1024 * 1024;

const API = '/api/public/v1';
const LIST_SIZE = 4000;
const READS: Targets = { ratio: { sqlite: 0.15, postgres: 0.08 }, ratioUncached: { sqlite: 0.15, postgres: 0.15 }, p99Ms: 25 };
const FLOOD: Targets = { ratio: { sqlite: 0.6, postgres: 0.6 }, p99Ms: 25 };

type Keyed = { school: SchoolShape; key: BenchKey };

/** The keyed schools other than the large one (all of them when it is the only one). */
function ordinary(shape: DatasetShape): Keyed[] {
  const rest = shape.keyed.filter((k) => k.school.index !== shape.large.index);
  return rest.length > 0 ? rest : shape.keyed;
}

/** `count` requests, each for a random key of `keys`, with the path `pathFor` makes for its school. */
function spread(keys: Keyed[], seed: number, pathFor: (school: SchoolShape, random: Random) => string, count = LIST_SIZE): BenchRequest[] {
  const random = new Random(seed);
  return Array.from({ length: count }, () => {
    const k = random.pick(keys);
    return { key: k.key.key, path: pathFor(k.school, random) };
  });
}

/** A page of `limit` somewhere in a list of `total` records. */
const pageOffset = (random: Random, total: number, limit: number) => limit * random.int(0, Math.max(0, Math.ceil(total / limit) - 1));

/** A calendar month of the data (2025-2026) as an inclusive period. */
function month(random: Random): string {
  const year = random.pick([2025, 2026]);
  const m = random.int(1, 12);
  const last = new Date(Date.UTC(year, m, 0)).getUTCDate();
  const mm = String(m).padStart(2, '0');
  return `period_from=${year}-${mm}-01&period_to=${year}-${mm}-${last}`;
}

const studentsPage = (s: SchoolShape, r: Random) => `${API}/students?limit=50&offset=${pageOffset(r, s.students, 50)}`;
const studentsFiltered = (_s: SchoolShape, r: Random) =>
  `${API}/students?status=${r.weighted({ learning_practice: 5, learning_theory: 3, graduated: 2 })}&category=${r.weighted({ B: 8, A: 1, C: 1 })}&limit=200`;
const studentCard = (s: SchoolShape, r: Random) => `${API}/students/st-${r.int(0, s.students - 1)}`;
const lessonsMonth = (_s: SchoolShape, r: Random) => `${API}/lessons?${month(r)}`;
const paymentsMonth = (_s: SchoolShape, r: Random) => `${API}/payments?${month(r)}`;
const financeYear = (_s: SchoolShape, r: Random) => {
  const year = r.pick([2025, 2026]);
  return `${API}/reports/finance-summary?period_from=${year}-01-01&period_to=${year}-12-31`;
};

/** The mixed workload's paths: a platform's integrations and BI loaders, by weight. */
const MIXED: { weight: number; path: (s: SchoolShape, r: Random) => string }[] = [
  { weight: 25, path: studentsPage },
  { weight: 10, path: studentsFiltered },
  { weight: 20, path: studentCard },
  { weight: 10, path: lessonsMonth },
  { weight: 5, path: (s, r) => `${API}/lessons?${month(r)}&instructor_id=in-${r.int(0, s.instructors - 1)}` },
  { weight: 10, path: paymentsMonth },
  { weight: 5, path: (s, r) => `${API}/contracts?limit=100&offset=${pageOffset(r, s.students, 100)}` },
  { weight: 3, path: () => `${API}/instructors?is_active=true` },
  { weight: 2, path: () => `${API}/vehicles` },
  { weight: 5, path: (s, r) => `${API}/leads?status=new&${month(r)}` },
  { weight: 5, path: financeYear },
];

function mixedPath(school: SchoolShape, random: Random): string {
  let roll = random.next() * MIXED.reduce((sum, m) => sum + m.weight, 0);
  for (const m of MIXED) {
    roll -= m.weight;
    if (roll < 0) return m.path(school, random);
  }
  return MIXED[0]!.path(school, random);
}

/** Rows before the deep page: the brief's 99,800 at full size, the same 200 from the end at any scale. */
export const deepOffset = (shape: DatasetShape): number => Math.max(0, shape.large.students - 200);

export const MIXED_SCENARIO: Scenario = {
  name: 'mixed',
  title: 'mixed workload (all keys, 11 kinds of request)',
  expect: 200,
  targets: { ratio: null, p99Ms: 25 },
  requests: (s) => spread(s.keyed, 7, mixedPath, 3 * LIST_SIZE),
};

/** The large school's key. */
const largeKey = (shape: DatasetShape): string => shape.keyed.find((k) => k.school.index === shape.large.index)!.key.key;

/** The large school's key and a page 200 rows from the end of its students. */
function deepPage(shape: DatasetShape): BenchRequest[] {
  return [{ key: largeKey(shape), path: `${API}/students?limit=50&offset=${deepOffset(shape)}` }];
}

/** Each request with the entity tag the server gives its answer now: every one is then a 304. */
async function withCurrentTags(requests: BenchRequest[], fetch: Fetch): Promise<BenchRequest[]> {
  const tagged: BenchRequest[] = [];
  for (const r of requests) {
    const answer = await fetch(r);
    if (answer.status !== 200 || !answer.etag) throw new Error(`${r.path}: ${answer.status} without an entity tag`);
    tagged.push({ ...r, ifNoneMatch: answer.etag });
  }
  return tagged;
}

const FEED_PAGE = 1000;
const FEED_PAGES_PER_SCHOOL = 5;

/** The feed's first pages of each school, followed by their cursors: a first full copy being read. */
async function feedPages(firstPages: BenchRequest[], fetch: Fetch): Promise<BenchRequest[]> {
  const pages: BenchRequest[] = [];
  for (const first of firstPages) {
    let page = first;
    for (let n = 0; n < FEED_PAGES_PER_SCHOOL; n++) {
      const answer = await fetch(page);
      if (answer.status !== 200) throw new Error(`${page.path}: ${answer.status}`);
      pages.push(page);
      const meta = (JSON.parse(answer.body.toString('utf8')) as { meta: { next_cursor: string; has_more: boolean } }).meta;
      if (!meta.has_more) break;
      page = { key: first.key, path: `${API}/changes?limit=${FEED_PAGE}&after=${meta.next_cursor}` };
    }
  }
  return pages;
}

const LOADER_SCHOOLS = 50;
const LOADER_PAGE = 200;
const LOADER_LISTS = ['students', 'instructors', 'vehicles', 'lessons', 'contracts', 'payments', 'leads'];

/** Every page of every list of up to 50 schools, each once, in the order a nightly loader reads them. */
async function everyPage(firstPages: BenchRequest[], fetch: Fetch): Promise<BenchRequest[]> {
  const pages: BenchRequest[] = [];
  for (const first of firstPages) {
    const answer = await fetch(first);
    if (answer.status !== 200) throw new Error(`${first.path}: ${answer.status}`);
    const total = (JSON.parse(answer.body.toString('utf8')) as { meta: { total: number } }).meta.total;
    const base = first.path.replace(/&offset=0$/, '');
    for (let offset = 0; offset < Math.max(total, 1); offset += LOADER_PAGE) {
      pages.push({ key: first.key, path: `${base}&offset=${offset}`, records: Math.min(LOADER_PAGE, total - offset) });
    }
  }
  return pages;
}

/** The first page of every list of up to 50 ordinary schools. */
function loaderStarts(shape: DatasetShape): BenchRequest[] {
  return ordinary(shape)
    .slice(0, LOADER_SCHOOLS)
    .flatMap((k) => LOADER_LISTS.map((list) => ({ key: k.key.key, path: `${API}/${list}?limit=${LOADER_PAGE}&offset=0` })));
}

/** One first feed page for each of up to `count` ordinary schools. */
function feedStarts(shape: DatasetShape, count: number): BenchRequest[] {
  return ordinary(shape)
    .slice(0, count)
    .map((k) => ({ key: k.key.key, path: `${API}/changes?limit=${FEED_PAGE}` }));
}

export const SCENARIOS: Scenario[] = [
  { name: 'students-page', title: 'students page (limit 50)', expect: 200, targets: { ratio: { sqlite: 0.8, postgres: 0.7 }, ratioUncached: { sqlite: 0.4, postgres: 0.2 }, p99Ms: 25 }, requests: (s) => spread(ordinary(s), 1, studentsPage) },
  {
    // The issue's own check: one page of the large school (10,000 students at scale 0.1), asked
    // again and again by every connection.
    name: 'students-fixed',
    title: 'students page of the large school, limit=50&offset=100',
    expect: 200,
    targets: { ratio: { sqlite: 0.8, postgres: 0.7 }, ratioUncached: { sqlite: 0.4, postgres: 0.2 }, p99Ms: 25 },
    requests: (s) => [{ key: largeKey(s), path: `${API}/students?limit=50&offset=100` }],
  },
  {
    // The same school's pages at random: with stored answers off, every one a query.
    name: 'students-random',
    title: 'students pages of the large school at random offsets, limit 50',
    expect: 200,
    targets: { ratio: { sqlite: 0.8, postgres: 0.7 }, ratioUncached: { sqlite: 0.4, postgres: 0.2 }, p99Ms: 25 },
    requests: (s) => {
      const random = new Random(11);
      return Array.from({ length: LIST_SIZE }, () => ({ key: largeKey(s), path: `${API}/students?limit=50&offset=${random.int(0, s.large.students - 50)}` }));
    },
  },
  { name: 'students-filtered', title: 'students filtered (status+category, limit 200)', expect: 200, targets: READS, requests: (s) => spread(ordinary(s), 2, studentsFiltered) },
  { name: 'student-card', title: 'student card', expect: 200, targets: READS, requests: (s) => spread(ordinary(s), 3, studentCard) },
  { name: 'lessons-month', title: 'lessons for one month', expect: 200, targets: READS, requests: (s) => spread(ordinary(s), 4, lessonsMonth) },
  { name: 'payments-month', title: 'payments for one month', expect: 200, targets: READS, requests: (s) => spread(ordinary(s), 5, paymentsMonth) },
  { name: 'finance-year', title: 'finance summary for a year', expect: 200, targets: READS, requests: (s) => spread(ordinary(s), 6, financeYear) },
  {
    name: 'deep-offset',
    title: 'deep offset on the large school',
    expect: 200,
    targets: { ratio: null, p99Ms: 50 },
    requests: deepPage,
  },
  {
    // The same request from one client at a time: a nightly loader paging through the large
    // school. Under 50 connections a page this deep is a throughput question (latency is
    // connections / throughput); this is the latency one loader sees.
    name: 'deep-offset-loader',
    title: 'deep offset on the large school, one loader (1 connection)',
    expect: 200,
    targets: { ratio: null, p99Ms: 50 },
    connections: 1,
    requests: deepPage,
  },
  {
    name: 'unauthorized-flood',
    title: '401 flood (well-formed unknown keys)',
    expect: 401,
    targets: FLOOD,
    requests: () => Array.from({ length: LIST_SIZE }, () => ({ key: KEY_PREFIX + randomBytes(16).toString('hex'), path: `${API}/students?limit=50` })),
  },
  {
    name: 'rate-limited-flood',
    title: '429 flood (one school over its limit)',
    expect: 429,
    targets: FLOOD,
    requests: (s) => [{ key: s.limitedKey.key, path: `${API}/students?limit=50` }],
  },
  {
    // A consumer in conditional mode asking again for pages it already holds: each answer is a
    // 304 with no body, which should cost no more than a 401.
    name: 'not-modified',
    title: '304 (students pages asked again with their current ETag)',
    expect: 304,
    targets: FLOOD,
    requests: (s) => spread(ordinary(s), 8, studentsPage, 400),
    prepare: withCurrentTags,
  },
  {
    name: 'changes-feed',
    title: 'changes feed, pages of 1,000 (a first full copy)',
    expect: 200,
    targets: { ratio: null, p99Ms: 250 },
    requests: (s) => feedStarts(s, 40),
    prepare: feedPages,
  },
  {
    // A BI or accounting loader copying 50 schools overnight: one client, every page once. A run
    // that outlasts the list starts it again, and those repeats can be stored answers (the report's
    // share says how many): with --response-cache-mb 0 every page is queried, as a nightly loader's.
    name: 'bi-loader',
    title: 'BI loader (1 connection, every list of 50 schools, limit 200)',
    expect: 200,
    targets: { ratio: null, p99Ms: 50 },
    connections: 1,
    requests: loaderStarts,
    prepare: everyPage,
  },
  MIXED_SCENARIO,
];
