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

const LINE = /\s(\d+) ms: pause=([\d.]+) .*?\bgc=(\w+)\b/;
const field = (line: string, name: string): number => Number(new RegExp(`\\b${name}=([\\d.]+)`).exec(line)?.[1] ?? 0);

/** The collections of a trace, by slices of `seconds`; slices without a young collection are left out. */
export function gcSlices(text: string, seconds: number): GcSlice[] {
  const slices = new Map<number, GcSlice & { survivedSum: number }>();
  for (const line of text.split('\n')) {
    const m = LINE.exec(line);
    if (!m) continue;
    const index = Math.floor(Number(m[1]) / 1000 / seconds);
    let slice = slices.get(index);
    if (slice === undefined) {
      slice = { from: index * seconds, scavenges: 0, survivedPercent: 0, survivedSum: 0, fullCollections: 0, pauseMs: 0, allocatedBytes: 0, promotedBytes: 0 };
      slices.set(index, slice);
    }
    slice.pauseMs += Number(m[2]);
    if (m[3] === 's') {
      slice.scavenges += 1;
      slice.survivedSum += field(line, 'new_space_survive_rate_');
      slice.allocatedBytes += field(line, 'allocated');
      slice.promotedBytes += field(line, 'promoted');
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
