/**
 * Reads a server's `--trace-gc-nvp` output (bench:compare --node-args=--trace-gc-nvp --logs DIR)
 * and prints, per slice of time, what its garbage collector did: young collections and the
 * share of the young generation each kept on average, full collections, pauses, bytes
 * allocated and promoted. A young collection that keeps a fifth or more, with a full
 * collection every second or so, is the "high" state of docs/performance.md.
 *
 *   node --import ./scripts/ts-resolve.mjs bench/gc-log.ts FILE [SECONDS_PER_SLICE]
 */
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface GcSlice {
  /** Seconds since the process started, at the slice's start. */
  from: number;
  scavenges: number;
  /** Mean over the slice's young collections of the share of the young generation kept, in %. */
  survivedPercent: number;
  fullCollections: number;
  pauseMs: number;
  allocatedBytes: number;
  promotedBytes: number;
}

/** A collection's line: name=value pairs up to Node.js 24 (V8 13), one JSON object from Node.js 26 (V8 14). */
const LINE = /\s(\d+) ms: (?:GC: (\{.*\})|(pause=.*?))\s*$/;

/** One collection: its time, kind (`s` young, else full), pause, survival %, bytes allocated and promoted. */
interface Collection {
  atMs: number;
  gc: string;
  pause: number;
  survived: number;
  allocated: number;
  promoted: number;
}

function readCollection(line: string): Collection | null {
  const m = LINE.exec(line);
  if (!m) return null;
  const atMs = Number(m[1]);
  if (m[2] !== undefined) {
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(m[2]) as Record<string, unknown>;
    } catch {
      return null;
    }
    const num = (name: string) => Number(o[name] ?? 0);
    if (typeof o.gc !== 'string') return null;
    return { atMs, gc: o.gc, pause: num('pause'), survived: num('new_space_survive_rate'), allocated: num('allocated'), promoted: num('promoted') };
  }
  const pairs = m[3]!;
  const field = (name: string): number => Number(new RegExp(`\\b${name}=([\\d.]+)`).exec(pairs)?.[1] ?? 0);
  const gc = /\bgc=(\w+)\b/.exec(pairs)?.[1];
  if (gc === undefined) return null;
  return { atMs, gc, pause: field('pause'), survived: field('new_space_survive_rate_'), allocated: field('allocated'), promoted: field('promoted') };
}

/** The collections of a trace, by slices of `seconds`; slices without a young collection are left out. */
export function gcSlices(text: string, seconds: number): GcSlice[] {
  const slices = new Map<number, GcSlice & { survivedSum: number }>();
  for (const line of text.split(/\r?\n/)) {
    const c = readCollection(line);
    if (c === null) continue;
    const index = Math.floor(c.atMs / 1000 / seconds);
    let slice = slices.get(index);
    if (slice === undefined) {
      slice = { from: index * seconds, scavenges: 0, survivedPercent: 0, survivedSum: 0, fullCollections: 0, pauseMs: 0, allocatedBytes: 0, promotedBytes: 0 };
      slices.set(index, slice);
    }
    slice.pauseMs += c.pause;
    if (c.gc === 's') {
      slice.scavenges += 1;
      slice.survivedSum += c.survived;
      slice.allocatedBytes += c.allocated;
      slice.promotedBytes += c.promoted;
    } else {
      slice.fullCollections += 1;
    }
  }
  return [...slices.values()]
    .filter((s) => s.scavenges > 0)
    .sort((a, b) => a.from - b.from)
    .map(({ survivedSum, ...s }) => ({ ...s, survivedPercent: survivedSum / s.scavenges }));
}

function main(): void {
  const [file, every] = process.argv.slice(2);
  if (file === undefined) {
    process.stderr.write('usage: node --import ./scripts/ts-resolve.mjs bench/gc-log.ts FILE [SECONDS_PER_SLICE]\n');
    process.exit(2);
  }
  const seconds = every === undefined ? 10 : Number(every);
  if (!(seconds > 0)) {
    process.stderr.write(`not a number of seconds: ${every}\n`);
    process.exit(2);
  }
  // A reader that stops early (head) is not an error.
  process.stdout.on('error', () => process.exit(0));
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    process.stderr.write(`cannot read ${file}: ${(error as Error).message}\n`);
    process.exit(2);
  }
  process.stdout.write('from s  young  kept %  full  pause ms  allocated MB  promoted MB\n');
  for (const s of gcSlices(text, seconds)) {
    process.stdout.write(
      `${String(s.from).padStart(6)}  ${String(s.scavenges).padStart(5)}  ${s.survivedPercent.toFixed(1).padStart(6)}  ${String(s.fullCollections).padStart(4)}  ` +
        `${s.pauseMs.toFixed(0).padStart(8)}  ${(s.allocatedBytes / 1e6).toFixed(0).padStart(12)}  ${(s.promotedBytes / 1e6).toFixed(1).padStart(11)}\n`,
    );
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
