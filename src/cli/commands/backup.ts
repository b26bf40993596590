/**
 * `backup FILE`: a copy of the SQLite store, taken while servers run and imports write
 * (`VACUUM INTO`: one read snapshot, free pages left out). It is written to `FILE.partial`
 * and given FILE's name only when whole, never over an existing file: a FILE that exists is
 * a whole copy. On PostgreSQL a backup is pg_dump's (docs/operations.md, "Backups").
 */
import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { sqlitePath } from '../../db/index.js';
import { CliError, type CommandContext } from '../context.js';
import { firstLine } from '../errors.js';

export function backupCommand({ config, out }: CommandContext, file: string): number {
  if (config.databaseUrl) throw new CliError('the data is on PostgreSQL (DATABASE_URL): take its backup with pg_dump (docs/operations.md, "Backups")');
  const source = sqlitePath(config);
  const target = path.resolve(file);
  if (target === path.resolve(source)) throw new CliError(`${file} is the database itself: name a file elsewhere`);
  if (fs.existsSync(target)) throw new CliError(`${file} exists already: name a new file (a backup never writes over one)`);
  if (!fs.existsSync(source)) throw new CliError(`there is no database in ${config.dataDir} to copy (SCHOOL_DATA_DIR)`);
  const partial = `${target}.partial`;
  // Left by a backup that was stopped; VACUUM INTO writes only a file that is not there.
  fs.rmSync(partial, { force: true });
  const database = new SQLite(source, { readonly: true, fileMustExist: true, timeout: config.dbTimeoutMs });
  try {
    database.prepare('vacuum into ?').run(partial);
    const fd = fs.openSync(partial, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    // A link, not a rename: it fails rather than replace a file made meanwhile under the name.
    fs.linkSync(partial, target);
  } catch (err) {
    throw new CliError(`cannot write the backup ${file} (${firstLine((err as Error).message)}): nothing of it is left`);
  } finally {
    database.close();
    fs.rmSync(partial, { force: true });
  }
  const bytes = fs.statSync(target).size;
  out.result({ file: target, bytes }, `Copied ${source} to ${target} (${bytes} bytes); to restore it, see docs/operations.md, "Backups"`);
  return 0;
}
