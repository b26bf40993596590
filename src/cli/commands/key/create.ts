import { createKey } from '../../../management/keys.js';
import { CliError, withStore, type CommandContext } from '../../context.js';

export async function keyCreate(ctx: CommandContext, opts: { school: string; name: string }): Promise<number> {
  const outcome = await withStore(ctx.config, (store) => createKey(store.db, opts.school, opts.name));
  if (!outcome.ok) throw new CliError(outcome.reason);
  const k = outcome.value;
  ctx.out.result(
    k,
    `Created key ${k.id} "${k.name}" for school ${opts.school}:\n\n  ${k.key}\n\nCopy it now: it is shown only this once and cannot be recovered.`,
  );
  return 0;
}
