/**
 * `import`: streams a JSON file into a school (src/importer/). On a terminal a progress
 * line is redrawn at most a few times a second on stderr and ends with the summary; with
 * --json or when stdout is not a terminal there is none, unless --progress asks for it.
 */
import fs from 'node:fs';
import v8 from 'node:v8';
import { importFile, type ImportError, type ImportSummary, type Progress } from '../../importer/index.js';
import { CliError, withStore, type CommandContext } from '../context.js';

export interface ImportCommandOptions {
  school: string;
  replace?: boolean;
  progress?: boolean;
}

function where(e: ImportError): string {
  const at = e.array === null ? '' : e.index === null ? e.array : `${e.array}[${e.index}]`;
  const field = e.field === null ? '' : `${at ? '.' : ''}${e.field}`;
  return at || field ? `${at}${field}: ` : '';
}

function checkFile(file: string): void {
  let stat;
  try {
    stat = fs.statSync(file);
  } catch {
    throw new CliError(`cannot read ${file}: no such file`);
  }
  if (!stat.isFile()) throw new CliError(`cannot read ${file}: not a file`);
}

/** Redraws of the progress line, at most. */
const REDRAWS_PER_SECOND = 4;

class ProgressLine {
  private readonly started = Date.now();
  private lastDraw = 0;
  private drawn = false;

  constructor(private readonly stream: NodeJS.WriteStream) {}

  update(p: Progress & { phase: 'read' | 'merge' }): void {
    const now = Date.now();
    if (p.phase === 'read' && now - this.lastDraw < 1000 / REDRAWS_PER_SECOND) return;
    this.lastDraw = now;
    const seconds = (now - this.started) / 1000;
    const share = p.totalBytes ? ` (${Math.floor((100 * p.bytes) / Math.max(1, p.totalBytes))} % of the file)` : '';
    const rate = `${Math.round(p.records / Math.max(seconds, 0.001)).toLocaleString('en-US')} records/s`;
    const what = p.phase === 'read' ? `read and staged ${p.records.toLocaleString('en-US')} records${share}` : `all ${p.records.toLocaleString('en-US')} records read; writing them`;
    this.stream.write(`\r${what}, ${rate}, ${seconds.toFixed(0)} s\x1b[K`);
    this.drawn = true;
  }

  end(): void {
    if (this.drawn) this.stream.write('\r\x1b[K');
  }
}

function describe(result: ImportSummary): string {
  const counts = Object.entries(result.counts)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${n} ${k}`)
    .join(', ');
  const deleted = Object.entries(result.deleted)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${n} ${k}`)
    .join(', ');
  const read = counts ? `read ${counts}` : 'the file has no records';
  if (result.seq === null) return `${read}; nothing changed, nothing written`;
  return `${read}; ${result.changes} changes${deleted ? ` (deleted ${deleted})` : ''}, change seq ${result.seq}`;
}

/**
 * An import makes garbage at the rate it reads, nearly all of it dead at once: a small
 * young generation collects it there, and V8's memory-saving mode collects the old one
 * before it grows far past what is live (docs/performance.md, "Imports").
 */
const IMPORT_V8_FLAGS = '--max-semi-space-size=2 --optimize-for-size';

export async function importCommand(ctx: CommandContext, file: string, opts: ImportCommandOptions): Promise<number> {
  checkFile(file);
  v8.setFlagsFromString(IMPORT_V8_FLAGS);
  const show = opts.progress === true || (!ctx.out.json && Boolean(process.stdout.isTTY));
  const line = show ? new ProgressLine(process.stderr) : null;
  const result = await withStore(ctx.config, (store) =>
    importFile(store.db, opts.school, file, {
      replace: opts.replace === true,
      tombstoneDays: ctx.config.tombstoneDays,
      ...(line ? { onProgress: (p: Progress & { phase: 'read' | 'merge' }) => line.update(p) } : {}),
    }),
  ).finally(() => line?.end());
  if (!result.ok) {
    if (ctx.out.json) ctx.out.result({ ok: false, errors: result.errors }, '');
    const first = result.errors[0];
    const more = result.errors.length > 1 ? ` (and ${result.errors.length - 1} more${ctx.out.json ? '' : '; --json lists them all'})` : '';
    throw new CliError(`import refused, nothing written: ${first ? where(first) + first.reason : 'invalid file'}${more}`);
  }
  ctx.out.result(
    { ok: true, school: opts.school, counts: result.counts, deleted: result.deleted, changes: result.changes, seq: result.seq },
    `Imported into school ${opts.school}: ${describe(result)}`,
  );
  return 0;
}
