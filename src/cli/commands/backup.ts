/**
 * `backup FILE`: a copy of the SQLite store, taken while servers run and imports write
 * (`VACUUM INTO`: one read snapshot, free pages left out). Each run writes a file of its
 * own beside FILE, readable by its owner alone (the store holds the keys' and directors'
 * password hashes), and gives it FILE's name only when it is whole, never over an existing
 * file: a FILE that exists is a whole copy. On PostgreSQL a backup is pg_dump's
 * (docs/operations.md, "Backups").
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { sqlitePath } from '../../db/index.js';
import { CliError, type CommandContext } from '../context.js';
import { firstLine } from '../errors.js';

/**
 * Failures of writing the copy (its directory, its disk), told apart from those of reading the
 * store; an I/O error is taken as the copy's (it is written as the store is read).
 */
const WRITE_FAILURES = /^SQLITE_(CANTOPEN|FULL|IOERR|READONLY)/;
/** File systems that have no hard links (vfat, many network shares) answer a link so. */
const NO_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

export function backupCommand({ config, out }: CommandContext, file: string): number {
  if (config.databaseUrl) throw new CliError('the data is on PostgreSQL (DATABASE_URL): take its backup with pg_dump (docs/operations.md, "Backups")');
  const source = sqlitePath(config);
  const target = path.resolve(file);
  if (/[/\\]$/.test(file)) throw new CliError(`${file} names a directory: name the new file in it`);
  if (target === path.resolve(source)) throw new CliError(`${file} is the database itself: name a file elsewhere`);
  if (fs.existsSync(target)) throw new CliError(`${file} exists already: name a new file (a backup never writes over one)`);
  if (!fs.existsSync(source)) throw new CliError(`there is no database in ${config.dataDir} to copy (SCHOOL_DATA_DIR)`);
  // Opened and read first: a failure here is the store's, said as any command says it.
  const database = new SQLite(source, { readonly: true, fileMustExist: true, timeout: config.dbTimeoutMs });
  const partial = `${target}.${process.pid}-${randomBytes(4).toString('hex')}.partial`;
  let made = false;
  try {
    database.prepare('select count(*) from sqlite_master').get();
    try {
      fs.closeSync(fs.openSync(partial, 'wx', 0o600));
      made = true;
      database.prepare('vacuum into ?').run(partial);
      sync(partial);
      name(partial, target);
    } catch (err) {
      if (err instanceof CliError) throw err;
      const code = (err as { code?: unknown }).code;
      if (typeof code === 'string' && code.startsWith('SQLITE_') && !WRITE_FAILURES.test(code)) throw err;
      // A system call's failure names the directory, not the copy's passing name.
      const why = typeof code === 'string' && !code.startsWith('SQLITE_') ? `${code} in ${path.dirname(target)}` : firstLine((err as Error).message);
      throw new CliError(`cannot write the backup ${file} (${why}): nothing of it is left`);
    }
  } finally {
    database.close();
    if (made) fs.rmSync(partial, { force: true });
  }
  const bytes = fs.statSync(target).size;
  out.result({ file: target, bytes }, `Copied ${source} to ${target} (${bytes} bytes); to restore it, see docs/operations.md, "Backups"`);
  return 0;
}

/**
 * Gives the whole copy FILE's name: a link, which fails rather than replace a file made
 * meanwhile under it; where the file system has none, a rename once FILE is still absent.
 */
function name(partial: string, target: string): void {
  try {
    fs.linkSync(partial, target);
  } catch (err) {
    if (!NO_LINKS.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
    if (fs.existsSync(target)) throw new CliError(`${target} was made while the copy was written: name a new file`);
    fs.renameSync(partial, target);
  }
  // The new name made durable, where the file system can: some (network, FUSE) refuse to sync
  // a directory, and the copy is whole and named by then, so their refusal is no failure of it.
  try {
    sync(path.dirname(target));
  } catch {
    // Not durable on such a file system until it writes its metadata; nothing to undo.
  }
}

/** Writes what the system holds of a file or a directory to its disk. */
function sync(file: string): void {
  const fd = fs.openSync(file, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
