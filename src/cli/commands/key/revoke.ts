import { revokeKey } from '../../../management/keys.js';
import { CliError, operatorKeyPolicy, withStore, type CommandContext } from '../../context.js';

export async function keyRevoke(ctx: CommandContext, opts: { key: string }): Promise<number> {
  const outcome = await withStore(ctx.config, (store) => revokeKey(store.db, opts.key, undefined, 'operator', operatorKeyPolicy(ctx.config)));
  if (!outcome.ok) throw new CliError(outcome.reason);
  const card = outcome.value;
  const state = card.status === 'expired' ? 'expired' : card.revoke_reason === 'revoked' ? 'is revoked' : `was revoked (${card.revoke_reason})`;
  ctx.out.result(card, `Key ${card.id} "${card.name}" ${state} (since ${card.revoked_at}); requests with it get 401`);
  return 0;
}
