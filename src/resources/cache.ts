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
 * Memory is bounded (SCHOOL_DATA_RESPONSE_CACHE_MB). When full, the larger of two entries
 * picked at random makes room:
 * - at random, because unlike least-recently-used that keeps serving hits to a client that
 *   walks a loop of pages larger than the store (a nightly export, the benchmark's request
 *   lists): LRU evicts each page just before its turn comes again and never hits at all;
 * - the larger of two, because a stored answer's worth is the requests it answers, and a
 *   small one (a student's card) answers as many as a large one (a page of 200) for a
 *   twentieth of the memory. On the benchmark's mixed workload this answered 40 % of the
 *   requests from 32 MiB where a plain random choice answered 29 % (before the admission below).
 * Entries of old data versions are never asked for again and leave the same way.
 *
 * Once full, a new answer is stored with probability ADMIT_WHEN_FULL (one in eight). A
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
import type { Tenant } from '../access/index.js';

export interface StoredResponse {
  body: Buffer;
  contentType: string;
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
 * summary) as a slice of a shared 8 KiB slab, and one kept slice keeps its whole slab:
 * stored, such answers would hold many times the bytes counted for them.
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
  private hits = 0;
  private misses = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly random: () => number = Math.random,
  ) {}

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
    if (this.bytes + bytes > this.maxBytes && this.random() >= ADMIT_WHEN_FULL) return;
    while (this.bytes + bytes > this.maxBytes) {
      const a = this.order[Math.floor(this.random() * this.order.length)]!;
      const b = this.order[Math.floor(this.random() * this.order.length)]!;
      this.remove(a.bytes >= b.bytes ? a : b);
    }
    const entry: Entry = { key, body: ownMemory(body), contentType, slot: this.order.length, bytes };
    this.order.push(entry);
    this.entries.set(key, entry);
    this.bytes += bytes;
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
