/**
 * `import`: streams a JSON file into a school (src/importer/). On a terminal a progress
 * line is redrawn at most a few times a second on stderr and ends with the summary; with
 * --json or when stdout is not a terminal there is none, unless --progress asks for it.
 */
import fs from 'node:fs';
import v8 from 'node:v8';
import { importFile, MAX_ERRORS, type ImportError, type ImportProgress, type ImportResult, type ImportSummary } from '../../importer/index.js';
import { CliError, createOutput, withStore, type CommandContext, type Output } from '../context.js';
import { failureLine } from '../errors.js';

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

/** Why a file cannot be read, as a person says it, by the system's error code. */
const UNREADABLE: Record<string, string> = {
  ENOENT: 'no such file',
  ENOTDIR: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'not a file',
  ELOOP: 'too many symbolic links',
  ENAMETOOLONG: 'the name is too long',
};

/** Refuses a path that is no file this process can read, before the store is opened. */
function checkFile(file: string): void {
  let why: string | null = null;
  try {
    if (!fs.statSync(file).isFile()) why = 'not a file';
    else fs.closeSync(fs.openSync(file, 'r'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    why = UNREADABLE[code] ?? (code || 'unreadable');
  }
  if (why !== null) throw new CliError(`cannot read ${file}: ${why}`);
}

/** Redraws of the progress line, at most. */
const REDRAWS_PER_SECOND = 4;

const count = (n: number) => n.toLocaleString('en-US');

/**
 * The progress line: with the reading as the file is read, at most REDRAWS_PER_SECOND
 * times a second, then at each step of the merge, and between steps as the time passes
 * (on PostgreSQL; SQLite's statements hold the thread while they run).
 */
class ProgressLine {
  private readonly started = Date.now();
  private lastDraw = 0;
  private shown = '';
  private latest: ImportProgress | null = null;
  private ticking: NodeJS.Timeout | null = null;

  private readonly stream: NodeJS.WriteStream;

  constructor(stream: NodeJS.WriteStream) {
    this.stream = stream;
  }

  update(p: ImportProgress): void {
    const stepChanged = p.phase === 'merge' && (this.latest?.phase !== 'merge' || this.latest.step !== p.step);
    this.latest = p;
    if (p.phase === 'merge' && !this.ticking) this.ticking = setInterval(() => this.draw(), 1000 / REDRAWS_PER_SECOND).unref();
    // A new step of the merge is shown at once (they are few); the reading a few times a second.
    if (stepChanged || Date.now() - this.lastDraw >= 1000 / REDRAWS_PER_SECOND) this.draw();
  }

  private draw(): void {
    const p = this.latest;
    if (!p) return;
    const now = Date.now();
    this.lastDraw = now;
    const seconds = (now - this.started) / 1000;
    const rate = `${count(Math.round(p.records / Math.max(seconds, 0.001)))} records/s`;
    const what =
      p.phase === 'read'
        ? `read and staged ${count(p.records)} records${p.totalBytes ? ` (${Math.floor((100 * p.bytes) / Math.max(1, p.totalBytes))} % of the file)` : ''}${p.written > 0 ? `, ${count(p.written)} written` : ''}`
        : `all ${count(p.records)} records read; writing them: ${p.step}, ${count(p.written)} written`;
    const line = `${what}, ${rate}, ${seconds.toFixed(0)} s`;
    if (line === this.shown) return;
    this.stream.write(`\r${line}\x1b[K`);
    this.shown = line;
  }

  end(): void {
    if (this.ticking) clearInterval(this.ticking);
    if (this.shown) this.stream.write('\r\x1b[K');
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
  const read = counts ? `read ${counts}` : deleted ? 'read no records' : 'the file has no records';
  if (result.seq === null) return `${read}; nothing changed, nothing written`;
  return `${read}; ${result.changes} ${result.changes === 1 ? 'change' : 'changes'}${deleted ? ` (deleted ${deleted})` : ''}, change seq ${result.seq}`;
}

/**
 * An import makes garbage at the rate it reads, nearly all of it dead at once: V8's
 * memory-saving mode collects it before the heap and the buffers grow far past what is
 * live, which keeps an import of any size under its memory bound (docs/performance.md,
 * "Imports"). Set at run time, where V8 reads it; the young generation's size would not
 * take (V8 fixes it at start).
 */
const IMPORT_V8_FLAGS = '--optimize-for-size';

/**
 * Reads `file` into the school, with the progress line when one is shown; `done` is told the
 * importer's answer as soon as it has one (a store that then fails to close changes no data).
 */
async function readInto(ctx: CommandContext, file: string, opts: ImportCommandOptions, done: (result: ImportResult) => void): Promise<ImportResult> {
  const show = opts.progress === true || (!ctx.out.json && Boolean(process.stdout.isTTY));
  const line = show ? new ProgressLine(process.stderr) : null;
  return withStore(ctx.config, async (store) => {
    const result = await importFile(store.db, opts.school, file, {
      replace: opts.replace === true,
      tombstoneDays: ctx.config.tombstoneDays,
      ...(line ? { onProgress: (p: ImportProgress) => line.update(p) } : {}),
    });
    done(result);
    return result;
  }).finally(() => line?.end());
}

/** The --json answer of an import that `err` stopped before the importer gave one. */
function stopped(out: Output, err: unknown, dataDir?: string): void {
  out.result({ ok: false, errors: [{ array: null, index: null, field: null, reason: failureLine(err, dataDir) }] }, '');
}

/**
 * `open` gives the command's context, reading the configuration: with --json, a configuration
 * that cannot be read is answered on stdout as any other failure is.
 */
export async function importCommand(open: () => CommandContext, file: string, opts: ImportCommandOptions & { json?: boolean }): Promise<number> {
  let ctx: CommandContext;
  try {
    ctx = open();
  } catch (err) {
    if (opts.json === true) stopped(createOutput(true), err);
    throw err;
  }
  let answered: ImportResult | null = null;
  let result: ImportResult;
  try {
    checkFile(file);
    v8.setFlagsFromString(IMPORT_V8_FLAGS);
    result = await readInto(ctx, file, opts, (r) => (answered = r));
  } catch (err) {
    // The importer's answer, once given, is the command's: a store that then fails to close
    // changes nothing of it (an import committed is imported, said with what failed).
    const given = answered as ImportResult | null;
    if (given === null) {
      // With --json, stdout holds the answer whatever went wrong before the importer gave one: a file not there, a store down.
      if (ctx.out.json) stopped(ctx.out, err, ctx.config.dataDir);
      throw err;
    }
    result = given.ok ? { ...given, afterCommit: given.afterCommit ?? `the data store did not close cleanly: ${failureLine(err, ctx.config.dataDir)}` } : given;
  }
  if (!result.ok) {
    if (ctx.out.json) ctx.out.result({ ok: false, errors: result.errors }, '');
    const first = result.errors[0];
    // The importer stops looking at MAX_ERRORS: past that, more may follow.
    const count = result.errors.length;
    const atLeast = count >= MAX_ERRORS ? 'at least ' : '';
    const list = ctx.out.json ? '' : count >= MAX_ERRORS ? `; --json lists the first ${count}` : '; --json lists them all';
    const more = count > 1 ? ` (and ${atLeast}${count - 1} more${list})` : '';
    throw new CliError(`import refused, nothing written: ${first ? where(first) + first.reason : 'invalid file'}${more}`);
  }
  // Committed: what failed after it is a note, not a failure (the import is done).
  if (result.afterCommit !== undefined) ctx.out.note(`school-data: warning: the import was committed, but ${result.afterCommit}`);
  ctx.out.result(
    { ok: true, school: opts.school, counts: result.counts, deleted: result.deleted, changes: result.changes, seq: result.seq, ...(result.afterCommit === undefined ? {} : { after_commit: result.afterCommit }) },
    `Imported into school ${opts.school}: ${describe(result)}`,
  );
  return 0;
}
