import fs from 'node:fs';
import { importData, type ImportError } from '../../importer/index.js';
import { CliError, withStore, type CommandContext } from '../context.js';

const MAX_FILE_BYTES = 1024 * 1024 * 1024;

function where(e: ImportError): string {
  const at = e.array === null ? '' : e.index === null ? e.array : `${e.array}[${e.index}]`;
  const field = e.field === null ? '' : `${at ? '.' : ''}${e.field}`;
  return at || field ? `${at}${field}: ` : '';
}

function readJson(file: string): unknown {
  let stat;
  try {
    stat = fs.statSync(file);
  } catch {
    throw new CliError(`cannot read ${file}: no such file`);
  }
  if (!stat.isFile()) throw new CliError(`cannot read ${file}: not a file`);
  if (stat.size > MAX_FILE_BYTES) throw new CliError(`${file} is larger than 1 GiB; split it into several imports`);
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as unknown;
  } catch (err) {
    throw new CliError(`${file} is not valid JSON: ${(err as Error).message}`);
  }
}

export async function importCommand(ctx: CommandContext, file: string, opts: { school: string }): Promise<number> {
  const input = readJson(file);
  const result = await withStore(ctx.config, (store) => importData(store.db, opts.school, input));
  if (!result.ok) {
    if (ctx.out.json) ctx.out.result({ ok: false, errors: result.errors }, '');
    const first = result.errors[0];
    const more = result.errors.length > 1 ? ` (and ${result.errors.length - 1} more${ctx.out.json ? '' : '; --json lists them all'})` : '';
    throw new CliError(`import refused, nothing written: ${first ? where(first) + first.reason : 'invalid file'}${more}`);
  }
  const summary = Object.entries(result.counts)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${n} ${k}`)
    .join(', ');
  ctx.out.result({ ok: true, school: opts.school, counts: result.counts }, `Imported into school ${opts.school}: ${summary || 'nothing (empty file)'}`);
  return 0;
}
