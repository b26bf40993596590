import { parseAllowlist } from '../../../domain/addresses.js';
import { setAllowlist } from '../../../management/keys.js';
import { CliError, operatorKeyPolicy, withStore, type CommandContext } from '../../context.js';

export async function keyAllow(ctx: CommandContext, opts: { key: string; allow?: string; any?: boolean }): Promise<number> {
  let allow: string[] | null = null;
  if (opts.allow !== undefined) {
    const parsed = parseAllowlist(opts.allow);
    if (!parsed.ok) throw new CliError(parsed.reason);
    allow = parsed.entries;
  }
  const outcome = await withStore(ctx.config, (store) => setAllowlist(store.db, opts.key, allow, 'operator', operatorKeyPolicy(ctx.config)));
  if (!outcome.ok) throw new CliError(outcome.reason);
  const k = outcome.value;
  ctx.out.result(k, `Key ${k.id} "${k.name}" may now be used from ${k.allow === null ? 'any address' : k.allow.join(', ')}`);
  return 0;
}
