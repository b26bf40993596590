/**
 * Stored API responses: the body of a 200 answer, kept in this process's memory and
 * served again for the same request to the same school while the school's data has not
 * changed. Dashboards that poll the same pages, a loader's retries and several tools
 * reading the same school get an answer without the database work.
 *
 * Correctness rests on the key:
 * - the school's data version (schools.data_version, raised by every import in its
 *   transaction) is read with the key on every request (src/access/lookup.ts), so once
 *   an import has committed no instance serves an answer stored before it;
 * - the school's time zone and currency (periods and money depend on them) and the
 *   request target as sent (path and query, byte for byte: a differently spelled query
 *   is another entry, never a wrong one).
 * Access is decided before any stored answer is looked at, so a revoked key, a plan
 * change or a used-up limit are answered as always; usage is counted as always.
 *
 * Memory is bounded (SCHOOL_DATA_RESPONSE_CACHE_MB). An answer is stored as it is sent.
 * When room is needed, the answer stored longest ago of those the app would compress
 * (from COMPRESS_FROM_BYTES, src/resources/encoding.ts; all are JSON) and not yet gzipped
 * is gzipped; when none is left, the larger of two entries picked at random is removed.
 * - Gzipped first: JSON lists shrink five- to ninefold at zlib's fastest level (a month of
 *   lessons, 14 KB, to 2 KB), so the same memory holds several times the answers. Sending
 *   one costs more than a plain one, so answers are compressed only as room is needed:
 *   a client that would get gzip gets the stored bytes as they are, any other has them
 *   unzipped (15-18 us for 12 KB, against 100-400 us for the query) or, for br and deflate,
 *   unzipped and compressed by the app as always. On the benchmark's lessons and mixed
 *   workloads, 32 MiB then holds all of their answers instead of about half, and on
 *   PostgreSQL their p99 went from 41 and 49 ms to 22 and 21 at most (docs/performance.md,
 *   "Machine F", with what it costs the scenarios that fitted before). Gzipping every
 *   answer as it is stored did as well there, but also the answers that fit as sent: an
 *   answer asked for again and again (the deep offset) went out at half the rate.
 * - At random, because unlike least-recently-used that keeps serving hits to a client that
 *   walks a loop of pages larger than the store (a nightly export, the benchmark's request
 *   lists): LRU evicts each page just before its turn comes again and never hits at all.
 * - The larger of two, because a stored answer's worth is the requests it answers, and a
 *   small one (a student's card) answers as many as a large one (a page of 200) for a
 *   twentieth of the memory. On the benchmark's mixed workload this answered 40 % of the
 *   requests from 32 MiB where a plain random choice answered 29 % (before the admission below).
 * Entries of old data versions are never asked for again and leave the same way.
 *
 * Once full (what gzipping the entries not yet gzipped would free counted as room), a new
 * answer is stored with probability ADMIT_WHEN_FULL (one in eight). A
 * workload of more distinct answers than fit (the benchmark's mixed one: 12,000 answers)
 * otherwise replaces a stored answer on every miss, and each lives just long enough for
 * V8 to move it to the old generation before it dies: 2-3 full collections a second where
 * the same workload without stored answers has 0.3-0.6. Admitting one in eight: 0.8 a
 * second, and 72 % of its requests answered from the store instead of 56 %, since what
 * is stored stays long enough to be asked for again (docs/performance.md). The store
 * still turns over: a client's new pages and a school's new data version get stored
 * after a few misses each, and the entries they replace leave as they come in.
 */
import type { IncomingMessage } from 'node:http';
import { constants, gunzipSync, gzipSync } from 'node:zlib';
import type { Tenant } from '../access/index.js';

export interface StoredResponse {
  /** The body as stored: gzipped when `gzipped`, else as sent (see plainBody). */
  body: Buffer;
  gzipped: boolean;
  /** The length of the body as sent without compression. */
  plainLength: number;
  contentType: string;
}

/** The body of a stored answer as sent without compression. */
export function plainBody(stored: StoredResponse): Buffer {
  // Sized to the body, zlib makes it in one buffer instead of 16 KiB pieces joined.
  return stored.gzipped ? gunzipSync(stored.body, { chunkSize: stored.plainLength + 64 }) : stored.body;
}

interface Entry extends StoredResponse {
  key: string;
  /** Where the entry is in `order`, for removal in constant time. */
  slot: number;
  bytes: number;
}

/**
 * Bytes an entry costs besides its body and key: its objects and map slot on V8's heap,
 * and the allocator's records of its body. Measured (heap used per stored answer, with
 * V8's collector run before and after): about 650 bytes with a key of 70 characters, the
 * same for a body of 461 bytes or of 12 KB, plus about 100 bytes outside the heap. It
 * was 160 here before, which let answers of a few hundred bytes (cards, finance
 * summaries) take half as much memory again as the configured size.
 */
const ENTRY_OVERHEAD = 600;
/** When full, a new answer is stored with this probability (see above). */
const ADMIT_WHEN_FULL = 1 / 8;
/** Bodies larger than this are not stored: the largest API answer (200 list items) is far smaller. */
const MAX_BODY_BYTES = 512 * 1024;
/** A body is stored gzipped only when that saves at least an eighth of it. */
const WORTH_COMPRESSING = 7 / 8;
/**
 * The share of a body gzipping is counted on to free, deciding whether the store is full:
 * the API's JSON loses 75-90 % (a card's 600 bytes are not compressed at all).
 */
const EXPECTED_SAVING = 1 / 2;

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
}

const LOOKED_UP = Symbol('school-data.stored-lookup');
type Noted = IncomingMessage & { [LOOKED_UP]?: StoredResponse | null };

/**
 * Leaves the access gate's lookup of a request (what it found, or null) for the app,
 * which then does not look again: a request is one lookup, and one hit or miss.
 */
export function noteLookup(raw: IncomingMessage, found: StoredResponse | undefined): void {
  (raw as Noted)[LOOKED_UP] = found ?? null;
}

/** The gate's lookup of this request: what it found, null for nothing, undefined if it did not look. */
export function notedLookup(raw: IncomingMessage): StoredResponse | null | undefined {
  return (raw as Noted)[LOOKED_UP];
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

export class ResponseCache {
  private readonly entries = new Map<string, Entry>();
  private readonly order: Entry[] = [];
  private bytes = 0;
  /**
   * The entries that may yet be gzipped, in the order they were stored, from
   * `toCompressHead` on. Entries are removed only when it is empty, so none of them is
   * one that was removed.
   */
  private toCompress: Entry[] = [];
  private toCompressHead = 0;
  /** Their bodies, in bytes. */
  private compressibleBytes = 0;
  private hits = 0;
  private misses = 0;

  private readonly compressFrom: number;
  private readonly plainBytes: number;
  private readonly random: () => number;

  constructor(
    private readonly maxBytes: number,
    options: ResponseCacheOptions = {},
  ) {
    this.compressFrom = options.compressFrom ?? Infinity;
    this.plainBytes = Math.max(0, options.plainBytes ?? Infinity);
    this.random = options.random ?? Math.random;
  }

  static key(tenant: Tenant, target: string): string {
    return `${tenant.id}\n${tenant.dataVersion}\n${tenant.timezone}\n${tenant.currency}\n${target}`;
  }

  get enabled(): boolean {
    return this.maxBytes > 0;
  }

  get(tenant: Tenant, target: string): StoredResponse | undefined {
    if (this.maxBytes === 0) return undefined;
    const found = this.entries.get(ResponseCache.key(tenant, target));
    if (found === undefined) this.misses += 1;
    else this.hits += 1;
    return found;
  }

  set(tenant: Tenant, target: string, body: Buffer, contentType: string): void {
    const key = ResponseCache.key(tenant, target);
    const bytes = body.length + key.length * 2 + ENTRY_OVERHEAD;
    if (body.length > MAX_BODY_BYTES || bytes > this.maxBytes || this.entries.has(key)) return;
    const room = this.maxBytes - this.bytes + this.compressibleBytes * EXPECTED_SAVING;
    if (bytes > room && this.random() >= ADMIT_WHEN_FULL) return;
    while (this.bytes + bytes > this.maxBytes && this.order.length > 0) this.makeRoom();
    const compressible = body.length >= this.compressFrom;
    const entry: Entry = { key, body: ownMemory(body), gzipped: false, plainLength: body.length, contentType, slot: this.order.length, bytes };
    this.order.push(entry);
    this.entries.set(key, entry);
    this.bytes += bytes;
    if (compressible) {
      this.compressibleBytes += body.length;
      this.toCompress.push(entry);
      while (this.compressibleBytes > this.plainBytes) this.compressOldest();
    }
  }

  /**
   * Gzips the entry stored longest ago of those not yet tried, or when there is none,
   * removes the larger of two entries picked at random (see above).
   */
  private makeRoom(): void {
    if (this.toCompressHead < this.toCompress.length) {
      this.compressOldest();
      return;
    }
    const a = this.order[Math.floor(this.random() * this.order.length)]!;
    const b = this.order[Math.floor(this.random() * this.order.length)]!;
    this.remove(a.bytes >= b.bytes ? a : b);
  }

  /** Gzips the entry stored longest ago of those not yet tried (there is one). */
  private compressOldest(): void {
    const entry = this.toCompress[this.toCompressHead]!;
    this.toCompressHead += 1;
    if (this.toCompressHead === this.toCompress.length) {
      this.toCompress = [];
      this.toCompressHead = 0;
    } else if (this.toCompressHead > 1024 && this.toCompressHead > this.toCompress.length / 2) {
      this.toCompress = this.toCompress.slice(this.toCompressHead);
      this.toCompressHead = 0;
    }
    this.compressibleBytes -= entry.body.length;
    const gzipped = gzipSync(entry.body, { level: constants.Z_BEST_SPEED });
    if (gzipped.length > entry.body.length * WORTH_COMPRESSING) return;
    const saved = entry.body.length - gzipped.length;
    entry.body = ownMemory(gzipped);
    entry.gzipped = true;
    entry.bytes -= saved;
    this.bytes -= saved;
  }

  /** Entries and bytes held now (for tests and the metrics). */
  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.bytes };
  }

  /**
   * Lookups that found a stored answer and that did not, since the start (the metrics):
   * one per request that passed the access check (see noteLookup).
   */
  get lookups(): { hits: number; misses: number } {
    return { hits: this.hits, misses: this.misses };
  }

  private remove(entry: Entry): void {
    const last = this.order.pop()!;
    if (last !== entry) {
      this.order[entry.slot] = last;
      last.slot = entry.slot;
    }
    this.entries.delete(entry.key);
    this.bytes -= entry.bytes;
  }
}
