import { revokeKey } from '../../../management/keys.js';
import { CliError, withStore, type CommandContext } from '../../context.js';

export async function keyRevoke(ctx: CommandContext, opts: { key: string }): Promise<number> {
  const outcome = await withStore(ctx.config, (store) => revokeKey(store.db, opts.key, undefined, 'operator', { unusedDays: ctx.config.keyUnusedDays }));
  if (!outcome.ok) throw new CliError(outcome.reason);
  ctx.out.result(outcome.value, `Key ${outcome.value.id} "${outcome.value.name}" is revoked (since ${outcome.value.revoked_at}); requests with it get 401`);
  return 0;
}
