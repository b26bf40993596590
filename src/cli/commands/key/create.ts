import { createKey, parseKeyOptions } from '../../../management/keys.js';
import { CliError, operatorKeyPolicy, refuseIfOutputDiscarded, RUN, withStore, type CommandContext } from '../../context.js';

export interface KeyCreateOptions {
  school: string;
  name: string;
  scopes?: string;
  expires?: string;
  allow?: string;
}

/** An option given empty: a script's unset variable, never read as "no limit" on the command line. */
function emptyOption(opts: KeyCreateOptions): string | null {
  for (const name of ['scopes', 'expires', 'allow'] as const) {
    if (opts[name] !== undefined && opts[name].trim() === '') return `--${name} is empty: leave the option out for no limit`;
  }
  return null;
}

export async function keyCreate(ctx: CommandContext, opts: KeyCreateOptions): Promise<number> {
  // Checked before the store is opened: a bad value writes nothing.
  const empty = emptyOption(opts);
  if (empty !== null) throw new CliError(empty);
  const options = parseKeyOptions(opts);
  if (!options.ok) throw new CliError(options.reason);
  refuseIfOutputDiscarded('the new key');
  const outcome = await withStore(ctx.config, (store) => createKey(store.db, opts.school, opts.name, options.value, 'operator', operatorKeyPolicy(ctx.config)));
  if (!outcome.ok) throw new CliError(outcome.reason);
  const k = outcome.value;
  const limits = [
    k.scopes.length < 8 ? `scopes ${k.scopes.join(',')}` : null,
    k.expires_at === null ? null : `expires ${k.expires_at}`,
    k.allow === null ? null : `only from ${k.allow.join(', ')}`,
  ].filter((l) => l !== null);
  ctx.out.result(
    k,
    `Created key ${k.id} "${k.name}" for school ${opts.school}${limits.length > 0 ? ` (${limits.join('; ')})` : ''}:\n\n  ${k.key}\n\nCopy it now: it is shown only this once and cannot be recovered.`,
    { made: `the key ${k.id} "${k.name}" was made for school ${opts.school}`, remedy: `revoke it (${RUN} key revoke --key ${k.id}) and create another` },
  );
  return 0;
}
