/**
 * Stored answers: a 200 answer's body, kept in this process's memory and sent again for the
 * same target of the same school while its data is unchanged. Rules (reasons: docs/operations.md):
 * - an entry is keyed by school, data version, time zone, currency, the target byte for
 *   byte and the key's scopes when it has not all of them: an import makes older ones unreachable;
 * - a school's entries of its earlier data leave as soon as a key's row brings its new data;
 * - memory is bounded (SCHOOL_DATA_RESPONSE_CACHE_MB); room is made by removing a cold entry
 *   (unread for COLD_MS) or a cut page, else by gzipping the oldest compressible one (a hot one
 *   is kept as sent again: `unzipped`), else by removing the larger of two picked at random;
 * - once full, a new answer is stored with probability ADMIT_WHEN_FULL;
 * - a list whose overlapping pages missed RUN_AFTER times is kept whole (`setRun`), its pages cut from it.
 */
import { ALL_SCOPES } from '../domain/scopes.js';
import type { Tenant } from '../domain/tenant.js';
import { gzip, type KeptBody } from '../edge/encoding.js';
import type { Run } from './common/list.js';
import { LIST_TABLES, type ListTable } from './items.js';

export interface StoredResponse extends KeptBody {
  contentType: string;
  /** What identifies the answer's content (its entity tag's first part: common/route.ts). */
  validator: string;
}

interface Entry extends StoredResponse {
  /** Its school's part of the key (`prefixOf`) and its request target: where it is in `byPrefix`. */
  prefix: string;
  target: string;
  /** Where the entry is in `order`, for removal in constant time. */
  slot: number;
  /** Whether it waits in `toCompress` (kept as sent, not yet tried); a removed entry never does. */
  queued: boolean;
  /** When it was stored or read last (ms, the store's clock). */
  readAt: number;
  bytes: number;
  /** Times the gzipped body was unzipped to be sent since `unzipsSince` (ms, the store's clock). */
  unzips: number;
  unzipsSince: number;
  /** A list kept whole (its body is the run's items); undefined for an answer. */
  run: Run | undefined;
  /** Whether it is a page cut from a run waiting in `cutPages` (a removed entry never is). */
  cut: boolean;
  /** For a cut page, the run it was cut from: reading the page is reading the run. */
  source: Entry | undefined;
}

/**
 * Bytes an entry costs besides its body and key: its objects and map slot on V8's heap,
 * and the allocator's records of its body (measured: docs/performance.md, "Memory").
 */
const ENTRY_OVERHEAD = 600;

/** The body of an entry that left. */
const NO_BODY = Buffer.alloc(0);

/** When full, a new answer is stored with this probability: a workload of more answers than fit keeps a stable share. */
const ADMIT_WHEN_FULL = 1 / 8;
/**
 * Bodies larger than this are not stored. A list page (at most 200 items) is well under it;
 * a long page of the changes feed is over it: such a page is read once, by the one client
 * copying that school, and storing it would push out hundreds of small answers.
 */
export const MAX_BODY_BYTES = 128 * 1024;
/** A body is stored gzipped only when that saves at least an eighth of it. */
const WORTH_COMPRESSING = 7 / 8;
/**
 * The share of a body gzipping is counted on to free, deciding whether the store is full:
 * the API's JSON lists gzip to well under half (a card's few hundred bytes are not compressed at all).
 */
const EXPECTED_SAVING = 1 / 2;
/**
 * A gzipped answer unzipped this many times within HOT_WINDOW_MS is hot: unzipping it for
 * every client that takes no compression costs more than keeping it as sent. Answers read
 * less often (a loop of pages larger than the memory) stay gzipped, so keeping one as sent
 * is not paid for again and again.
 */
const HOT_UNZIPS = 8;
const HOT_WINDOW_MS = 1000;
/** Unzipped this many times within HOT_WINDOW_MS, an answer is kept as sent again where free room or cold answers leaving make its room. */
const WARM_UNZIPS = 2;
/** Entries picked at random, at most, to find a cold one when room is needed. */
const COLD_PICKS = 16;
/**
 * An answer no one has read for this long is cold: room is made with it before an answer
 * still read is gzipped (once-read pages of a nightly copy, a closed dashboard's answers).
 * An answer polled less often costs a query a poll only when the store is full.
 */
const COLD_MS = 30_000;
/**
 * A list is kept whole once this many of its pages overlapping others were asked for and
 * not stored, for the same data (common/route.ts counts them): pages at any offset are then
 * all cut from one copy of its items, however many distinct pages clients ask for.
 */
const RUN_AFTER = 16;
/** A run holds at most this share of the store: a longer list is paged by its queries. */
const RUN_SHARE = 1 / 8;
/** The key of a list's run among its school's answers: no request target begins with a line feed. */
const runKey = (list: ListTable) => `\n${list}`;
/** The part of an entry's key that names the school's data (version and stamp). */
const dataOf = (tenant: Tenant) => `${tenant.dataVersion}.${tenant.dataStamp}`;
/**
 * Set for a school's list once its run was asked for: it is not read again for the same data
 * while kept, nor once it failed, was found too long or could not be kept (a store too full to
 * keep it would read it again and again). A run that left unread for COLD_MS counts its pages
 * anew: a scroll that paused is read once more when it resumes, at most once per COLD_MS.
 */
const RUN_ASKED = -1;
/**
 * Counts of missed pages kept at most (a school's leave with its data): a backstop. When it
 * is reached the counts still counting are dropped, the marks of lists asked for kept; when
 * those alone are half of it, everything is dropped (a list not kept may then be read once
 * more). Each drop leaves room for half of it at least: it runs once per that many counts.
 */
const MAX_RUN_COUNTS = 50_000;

export interface ResponseCacheOptions {
  /** Bodies from this size on are gzipped when room is needed (the app passes COMPRESS_FROM_BYTES); none when not given. */
  compressFrom?: number;
  /**
   * At most this many bytes of such bodies are kept as sent, the rest gzipped, the oldest
   * first; by default as many as fit. (0: all gzipped as they are stored.)
   */
  plainBytes?: number;
  /** Picks the entries that make room, and the answers admitted when full (tests seed it). */
  random?: () => number;
  /** The clock of reads and of COLD_MS, in ms (tests move it); performance.now() by default. */
  now?: () => number;
}

/**
 * The body in memory of its own. Node makes a small Buffer (under 4 KiB: a card, a
 * summary) as a slice of a shared 8 KiB slab, and zlib its output as a slice of a 16 KiB
 * chunk; one kept slice keeps the whole of either: stored, such answers would hold many
 * times the bytes counted for them.
 */
function ownMemory(body: Buffer): Buffer {
  if (body.byteOffset === 0 && body.buffer.byteLength === body.length) return body;
  const own = Buffer.allocUnsafeSlow(body.length);
  body.copy(own);
  return own;
}

/**
 * Entries in the order they were queued, from the head on. An entry is in the queue while
 * `isIn` says so: one whose mark the store cleared (it left, or was taken) is passed over,
 * and the slots of those that left are dropped once they are more than the live ones
 * (`left`, `compact`), so a queue that is seldom taken from holds no memory of what left.
 */
class EntryQueue {
  private items: Entry[] = [];
  private head = 0;
  /** Slots from the head on whose entries left. */
  private dead = 0;
  private readonly isIn: (entry: Entry) => boolean;

  constructor(isIn: (entry: Entry) => boolean) {
    this.isIn = isIn;
  }

  /** Slots held (tests read it). */
  get length(): number {
    return this.items.length;
  }

  push(entry: Entry): void {
    this.items.push(entry);
  }

  /** The first entry still in, those that left passed over. */
  first(): Entry | undefined {
    let passed = false;
    while (this.head < this.items.length && !this.isIn(this.items[this.head]!)) {
      this.head += 1;
      this.dead -= 1;
      passed = true;
    }
    if (passed) this.trim();
    return this.items[this.head];
  }

  /** Takes the first entry still in (the caller clears its mark). */
  shift(): Entry | undefined {
    const entry = this.first();
    if (entry !== undefined) {
      this.head += 1;
      this.trim();
    }
    return entry;
  }

  /** Lets go of the slots before the head: all of them at the end, else once they are most. */
  private trim(): void {
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head > this.items.length / 2) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }

  /** One of its entries left (its mark cleared), its slot still held. */
  left(): void {
    this.dead += 1;
  }

  /** Drops the slots of those that left once they are more than the live ones. */
  compact(): void {
    if (this.dead > 1024 && this.dead > this.items.length - this.head - this.dead) {
      this.items = this.items.slice(this.head).filter(this.isIn);
      this.head = 0;
      this.dead = 0;
    }
  }

  /** The entries still in, first to last. */
  *[Symbol.iterator](): Generator<Entry> {
    for (let i = this.head; i < this.items.length; i++) if (this.isIn(this.items[i]!)) yield this.items[i]!;
  }
}

export class ResponseCache {
  /**
   * The entries by their school's part of the key, then by request target: a look-up makes
   * no key of its own, and hashes the target once (a string keeps its hash).
   */
  private readonly byPrefix = new Map<string, Map<string, Entry>>();
  /** Per Tenant object (one for all the requests of a key: src/access/decide.ts), its part of the key. */
  private readonly prefixes = new WeakMap<Tenant, string>();
  /** Per school id, the data (version and stamp) its entries are kept for, and their parts of the key. */
  private readonly schools = new Map<string, { data: string; prefixes: string[] }>();
  private readonly order: Entry[] = [];
  private bytes = 0;
  /** The entries that may yet be gzipped (`queued`), in the order they were stored. */
  private readonly toCompress = new EntryQueue((entry) => entry.queued);
  /** The bodies of those still `queued`, in bytes. */
  private compressibleBytes = 0;
  private hits = 0;
  private misses = 0;
  /** Per school's part of the key and list, the pages missed so far, or RUN_ASKED. */
  private readonly runCounts = new Map<string, number>();
  /** The entries that are lists kept whole: few, each looked at when room is needed. */
  private readonly runs = new Set<Entry>();
  /** The pages cut from runs and stored (`cut`), in the order they were stored, and their bytes: they give their room first. */
  private readonly cutPages = new EntryQueue((entry) => entry.cut);
  private cutBytes = 0;
  private runReadFailures = 0;
  private cuts = 0;
  /** Until when (the store's clock) no cold entry is sought: none was found last time (`removeCold`). */
  private noColdUntil = 0;
  /** Each entry's `unzipped` hook (one function for all). */
  private readonly onUnzip = (kept: KeptBody, plain: Buffer) => this.unzipped(kept as Entry, plain);

  private readonly compressFrom: number;
  private readonly plainBytes: number;
  private readonly random: () => number;
  private readonly now: () => number;

  private readonly maxBytes: number;

  constructor(
    maxBytes: number,
    options: ResponseCacheOptions = {},
  ) {
    this.maxBytes = maxBytes;
    this.compressFrom = options.compressFrom ?? Infinity;
    this.plainBytes = Math.max(0, options.plainBytes ?? Infinity);
    this.random = options.random ?? Math.random;
    this.now = options.now ?? (() => performance.now());
  }

  /** The school's part of an entry's key: what else tells its answers apart (the target is the rest). */
  private prefixOf(tenant: Tenant): string {
    let prefix = this.prefixes.get(tenant);
    if (prefix === undefined) {
      const data = dataOf(tenant);
      const base = `${tenant.id}\n${data}\n${tenant.timezone}\n${tenant.currency}`;
      // A key limited to some scopes gets answers of its own (the changes feed differs by scope).
      prefix = tenant.scopes === ALL_SCOPES ? base : `${base}\n${tenant.scopes}`;
      this.prefixes.set(tenant, prefix);
      this.met(tenant.id, data, prefix);
    }
    return prefix;
  }

  /**
   * A key's row met for the first time: when it brings the school's data other than the
   * data its entries are kept for (an import committed, or a store restored), those entries
   * can never be sent again and leave now, not when making room reaches them. The row read
   * last is taken as the school's data: a row read before an import and met after a newer
   * one (requests in flight across the commit) only costs the newer answers.
   */
  private met(schoolId: string, data: string, prefix: string): void {
    const school = this.schools.get(schoolId);
    if (school === undefined) {
      this.schools.set(schoolId, { data, prefixes: [prefix] });
    } else if (school.data !== data) {
      for (const old of school.prefixes) {
        for (const entry of this.byPrefix.get(old)?.values() ?? []) this.remove(entry);
        for (const list of LIST_TABLES) this.runCounts.delete(`${old}${runKey(list)}`);
      }
      school.data = data;
      school.prefixes = [prefix];
    } else if (!school.prefixes.includes(prefix)) {
      school.prefixes.push(prefix);
    }
  }

  private find(tenant: Tenant, target: string): Entry | undefined {
    return this.byPrefix.get(this.prefixOf(tenant))?.get(target);
  }

  /** The entry found for a request, marked as read now. */
  private read(tenant: Tenant, target: string): Entry | undefined {
    const found = this.find(tenant, target);
    if (found !== undefined) {
      found.readAt = this.now();
      if (found.source !== undefined) found.source.readAt = found.readAt;
    }
    return found;
  }

  get enabled(): boolean {
    return this.maxBytes > 0;
  }

  get(tenant: Tenant, target: string): StoredResponse | undefined {
    if (this.maxBytes === 0) return undefined;
    const found = this.read(tenant, target);
    if (found === undefined) this.misses += 1;
    else this.hits += 1;
    return found;
  }

  /** Counts a miss found by `has` (the front's early read, begun without a stored answer). */
  missed(): void {
    if (this.maxBytes > 0) this.misses += 1;
  }

  /** Whether an answer is stored, nothing counted (the front's early read is begun only without one). */
  has(tenant: Tenant, target: string): boolean {
    return this.maxBytes > 0 && this.find(tenant, target) !== undefined;
  }

  set(tenant: Tenant, target: string, body: Buffer, contentType: string, validator: string): void {
    const prefix = this.prefixOf(tenant);
    // The key's characters as one string would hold them (the school's part is shared now: a bound).
    const bytes = body.length + (prefix.length + 1 + target.length) * 2 + ENTRY_OVERHEAD;
    if (body.length > MAX_BODY_BYTES || bytes > this.maxBytes || !this.current(tenant, prefix) || this.byPrefix.get(prefix)?.has(target)) return;
    // Cold entries are not counted as room (`room`): a loop larger than the memory, slower
    // than COLD_MS, would then replace an answer on every miss.
    if (bytes > this.room && this.random() >= ADMIT_WHEN_FULL) return;
    while (this.bytes + bytes > this.maxBytes && this.order.length > 0) this.makeRoom();
    this.store(prefix, target, body, contentType, validator, bytes, body.length >= this.compressFrom);
  }

  /**
   * Stores a page cut from a run as an answer, where free memory or cold answers make its
   * room: a page asked for again is then sent as stored, and cutting pages never removes an
   * answer still read. It is never gzipped (cutting it again costs less than unzipping it),
   * and it is the first entry to give its room to another.
   */
  setCut(tenant: Tenant, list: ListTable, target: string, body: Buffer, contentType: string, validator: string): void {
    if (this.maxBytes === 0) return;
    const prefix = this.prefixOf(tenant);
    const source = this.byPrefix.get(prefix)?.get(runKey(list));
    if (source === undefined) return;
    const bytes = body.length + (prefix.length + 1 + target.length) * 2 + ENTRY_OVERHEAD;
    if (body.length > MAX_BODY_BYTES || !this.current(tenant, prefix) || this.byPrefix.get(prefix)?.has(target) || !this.roomFromCold(bytes, this.now())) return;
    // Its run may have been the cold entry that made its room.
    if (this.byPrefix.get(prefix)?.get(runKey(list)) !== source) return;
    const entry = this.store(prefix, target, body, contentType, validator, bytes, false);
    entry.cut = true;
    entry.source = source;
    this.cutPages.push(entry);
    this.cutBytes += bytes;
  }

  /**
   * The room an entry may count on without removing one that is read: free memory, what
   * gzipping the queued answers is expected to save, and the cut pages (cut again, each costs
   * what a stored answer costs). Cold entries are not counted (`set` says why).
   */
  private get room(): number {
    return this.maxBytes - this.bytes + this.compressibleBytes * EXPECTED_SAVING + this.cutBytes;
  }

  /** Removes the cut page stored longest ago; false when there is none. */
  private removeCutPage(): boolean {
    const entry = this.cutPages.shift();
    if (entry === undefined) return false;
    this.uncut(entry);
    this.remove(entry);
    return true;
  }

  /** `entry` is no longer a cut page (its slot in `cutPages` is the caller's to account for). */
  private uncut(entry: Entry): void {
    entry.cut = false;
    this.cutBytes -= entry.bytes;
  }

  /**
   * Whether `prefix` is of the school's data met last: a request whose key row was read
   * before an import, answered after a newer row was met, stores nothing that no one would
   * read or remove with that data.
   */
  private current(tenant: Tenant, prefix: string): boolean {
    const school = this.schools.get(tenant.id);
    if (school === undefined) return false;
    if (school.prefixes.includes(prefix)) return true;
    // A row met while the school's data was another (one read before an import, met after a
    // newer row, took the school back a moment): current again once its data is the school's.
    if (school.data !== dataOf(tenant)) return false;
    school.prefixes.push(prefix);
    return true;
  }

  /** Adds an answer whose room is made, queued to be gzipped when `compressible`. */
  private store(prefix: string, target: string, body: Buffer, contentType: string, validator: string, bytes: number, compressible: boolean): Entry {
    const entry: Entry = {
      prefix, target, body: ownMemory(body), gzipped: false, plainLength: body.length, contentType, validator, slot: this.order.length, queued: compressible, readAt: this.now(), bytes, unzips: 0, unzipsSince: 0, unzipped: this.onUnzip, run: undefined, cut: false, source: undefined,
    };
    this.add(entry);
    if (compressible) {
      this.compressibleBytes += body.length;
      this.toCompress.push(entry);
      while (this.compressibleBytes > this.plainBytes) this.compressOldest();
    }
    return entry;
  }

  private add(entry: Entry): void {
    this.order.push(entry);
    if (entry.run !== undefined) this.runs.add(entry);
    // Looked up again: making room may have removed the school's last entry, and its map.
    let school = this.byPrefix.get(entry.prefix);
    if (school === undefined) this.byPrefix.set(entry.prefix, (school = new Map<string, Entry>()));
    school.set(entry.target, entry);
    this.bytes += entry.bytes;
  }

  /** The largest run kept, in bytes (its items and their ends). */
  get maxRunBytes(): number {
    return Math.floor(this.maxBytes * RUN_SHARE);
  }

  /** The run of `list` kept for the tenant's school and data, marked read. */
  run(tenant: Tenant, list: ListTable): Run | undefined {
    if (this.maxBytes === 0) return undefined;
    return this.read(tenant, runKey(list))?.run;
  }

  /** A page cut from a run was written (its answer's writer tells: a request refused after its page was cut counts none). */
  cutWritten(): void {
    this.cuts += 1;
  }

  /** Whether the run of `list` is kept for the tenant's school and data; nothing marked or counted. */
  holdsRun(tenant: Tenant, list: ListTable): boolean {
    return this.maxBytes > 0 && this.find(tenant, runKey(list)) !== undefined;
  }

  /**
   * Counts a page of `list` asked for and not stored (nor cut from a run); true at the
   * RUN_AFTER-th for the school's data, once: its run is to be read now, and kept by
   * `setRun` when it fits.
   */
  wantsRun(tenant: Tenant, list: ListTable): boolean {
    if (this.maxBytes === 0) return false;
    const prefix = this.prefixOf(tenant);
    // A request of a school's older data (met before the last import) has no run to read.
    if (!this.current(tenant, prefix)) return false;
    const key = `${prefix}${runKey(list)}`;
    const count = this.runCounts.get(key) ?? 0;
    if (count === RUN_ASKED) return false;
    if (this.runCounts.size >= MAX_RUN_COUNTS) this.forgetCounts();
    this.runCounts.set(key, count + 1 >= RUN_AFTER ? RUN_ASKED : count + 1);
    return count + 1 >= RUN_AFTER;
  }

  /** Drops the counts of missed pages still counting, and the RUN_ASKED marks too when they are half of MAX_RUN_COUNTS. */
  private forgetCounts(): void {
    for (const [key, count] of this.runCounts) if (count !== RUN_ASKED) this.runCounts.delete(key);
    if (this.runCounts.size >= MAX_RUN_COUNTS / 2) this.runCounts.clear();
  }

  /**
   * Keeps `run` as the tenant's school's list, where free memory, cold entries or gzipping
   * answers make its room (none that is read is removed for it). False, and nothing kept,
   * when it is over maxRunBytes or has no room.
   */
  setRun(tenant: Tenant, list: ListTable, run: Run): boolean {
    const prefix = this.prefixOf(tenant);
    const target = runKey(list);
    const size = run.items.length + run.ends.byteLength;
    if (size > this.maxRunBytes || !this.current(tenant, prefix) || this.byPrefix.get(prefix)?.has(target)) return false;
    const bytes = size + (prefix.length + 1 + target.length) * 2 + ENTRY_OVERHEAD;
    if (!this.roomFromCold(bytes, this.now())) {
      if (bytes > this.room) return false;
      while (this.bytes + bytes > this.maxBytes && this.removeCutPage());
      while (this.bytes + bytes > this.maxBytes && this.nextToCompress() !== undefined) this.compressOldest();
      if (this.bytes + bytes > this.maxBytes) return false;
    }
    this.add({
      prefix, target, body: run.items, gzipped: false, plainLength: run.items.length, contentType: '', validator: '', slot: this.order.length, queued: false, readAt: this.now(), bytes, unzips: 0, unzipsSince: 0, unzipped: this.onUnzip, run, cut: false, source: undefined,
    });
    return true;
  }

  /**
   * Removes a cold entry, or when none is found, the cut page stored longest ago, or gzips
   * the entry stored longest ago of those not yet tried, or when there is none, removes the
   * larger of two entries picked at random (see above), an answer rather than a list kept whole.
   */
  private makeRoom(): void {
    if (this.removeCold(this.now()) || this.removeCutPage()) return;
    if (this.nextToCompress() !== undefined) {
      this.compressOldest();
      return;
    }
    const a = this.order[Math.floor(this.random() * this.order.length)]!;
    const b = this.order[Math.floor(this.random() * this.order.length)]!;
    // A list kept whole answers all its pages: an answer leaves before it.
    if ((a.run === undefined) !== (b.run === undefined)) this.remove(a.run === undefined ? a : b);
    else this.remove(a.bytes >= b.bytes ? a : b);
  }

  /**
   * Removes a cold list kept whole, else the first cold entry of up to COLD_PICKS picked at
   * random. Having found none, it picks again only after HOT_WINDOW_MS: a store where every
   * answer is read does not pay for the picks each time it makes room.
   */
  private removeCold(now: number): boolean {
    const coldSince = now - COLD_MS;
    // A list kept whole and no longer read leaves first: it holds most room, and is found at once.
    for (const run of this.runs) {
      if (run.readAt < coldSince) {
        this.runCounts.delete(run.prefix + run.target);
        this.remove(run);
        return true;
      }
    }
    if (now < this.noColdUntil) return false;
    for (let pick = 0; pick < COLD_PICKS; pick++) {
      const entry = this.order[Math.floor(this.random() * this.order.length)]!;
      if (entry.readAt < coldSince) {
        this.remove(entry);
        return true;
      }
    }
    this.noColdUntil = now + HOT_WINDOW_MS;
    return false;
  }

  /** The entry stored longest ago of those not yet tried. */
  private nextToCompress(): Entry | undefined {
    return this.toCompress.first();
  }

  /** Gzips the entry stored longest ago of those not yet tried (there is one while `compressibleBytes` is above 0). */
  private compressOldest(): void {
    const entry = this.toCompress.shift()!;
    entry.queued = false;
    this.compressibleBytes -= entry.body.length;
    const gzipped = gzip(entry.body);
    if (gzipped.length > entry.body.length * WORTH_COMPRESSING) return;
    const saved = entry.body.length - gzipped.length;
    entry.body = ownMemory(gzipped);
    entry.gzipped = true;
    entry.bytes -= saved;
    this.bytes -= saved;
  }

  /**
   * Counts an unzip of `entry` for a client that takes no compression, and keeps it as sent
   * again (its plain body, just made), at the back of the answers to gzip: at the
   * WARM_UNZIPS-th within HOT_WINDOW_MS when free memory or cold answers leaving make its
   * room, at the HOT_UNZIPS-th when gzipping the older ones does.
   */
  private unzipped(entry: Entry, plain: Buffer): void {
    const now = this.now();
    // Marked read: the entry being unzipped is never taken for a cold one while room is made for it.
    entry.readAt = now;
    if (now - entry.unzipsSince > HOT_WINDOW_MS) {
      entry.unzipsSince = now;
      entry.unzips = 0;
    }
    entry.unzips += 1;
    // Not when it was removed since the hit, nor when no answer may be kept as sent.
    if (entry.unzips < WARM_UNZIPS || this.byPrefix.get(entry.prefix)?.get(entry.target) !== entry || plain.length > this.plainBytes) return;
    const grown = plain.length - entry.body.length;
    // Else only when gzipping others makes its room: nothing that is read is removed for it,
    // and it is not gzipped again at once (which would gzip every answer kept as sent, for nothing).
    if (!this.roomFromCold(grown, now) && (entry.unzips < HOT_UNZIPS || grown > this.room)) return;
    entry.body = ownMemory(plain);
    entry.gzipped = false;
    entry.unzips = 0;
    entry.bytes += grown;
    this.bytes += grown;
    entry.queued = true;
    this.toCompress.push(entry);
    this.compressibleBytes += plain.length;
    while ((this.bytes > this.maxBytes || this.compressibleBytes > this.plainBytes) && this.nextToCompress() !== entry) this.compressOldest();
    // gzip freed less than counted on: room is made as for a new answer.
    while (this.bytes > this.maxBytes && this.order.length > 0) this.makeRoom();
  }

  /** Whether `bytes` fit, after removing cold entries for them. */
  private roomFromCold(bytes: number, now: number): boolean {
    while (this.maxBytes - this.bytes < bytes && this.order.length > 0 && this.removeCold(now));
    return this.maxBytes - this.bytes >= bytes;
  }

  /** Entries and bytes held now (for tests and the metrics). */
  get size(): { entries: number; bytes: number } {
    return { entries: this.order.length, bytes: this.bytes };
  }

  /**
   * Lookups that found a stored answer and that did not, since the start (the metrics):
   * one per request that passed the access check to a route of the API; and the pages cut
   * from a run (each also a miss of its own answer).
   */
  get lookups(): { hits: number; misses: number; cuts: number; runReadFailures: number } {
    return { hits: this.hits, misses: this.misses, cuts: this.cuts, runReadFailures: this.runReadFailures };
  }

  /** A list's read to keep it whole failed (its page was then queried): counted for the metrics. */
  runReadFailed(): void {
    this.runReadFailures += 1;
  }

  private remove(entry: Entry): void {
    const last = this.order.pop()!;
    if (last !== entry) {
      this.order[entry.slot] = last;
      last.slot = entry.slot;
    }
    const school = this.byPrefix.get(entry.prefix)!;
    school.delete(entry.target);
    if (school.size === 0) this.byPrefix.delete(entry.prefix);
    this.bytes -= entry.bytes;
    if (entry.run !== undefined) {
      this.runs.delete(entry);
      this.orphan(entry);
    }
    if (entry.cut) {
      this.uncut(entry);
      this.cutPages.left();
    }
    entry.source = undefined;
    if (entry.queued) {
      entry.queued = false;
      this.compressibleBytes -= entry.body.length;
      this.toCompress.left();
    }
    this.cutPages.compact();
    this.toCompress.compact();
    // Its slot may stay in a queue until the queue is compacted or taken from: what it held
    // goes now, so the memory held is the memory counted.
    entry.body = NO_BODY;
    entry.run = undefined;
  }

  /**
   * The pages cut from `run`, which left: no longer cut again for nothing, they become
   * answers like the others, gzipped when room is needed.
   */
  private orphan(run: Entry): void {
    for (const page of this.cutPages) {
      if (page.source !== run) continue;
      this.uncut(page);
      page.source = undefined;
      this.cutPages.left();
      if (page.body.length >= this.compressFrom) {
        page.queued = true;
        this.toCompress.push(page);
        this.compressibleBytes += page.body.length;
      }
    }
  }
}
