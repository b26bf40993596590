import { isOverlap, OVERLAPS } from '../../../domain/overlaps.js';
import { rollKey } from '../../../management/keys.js';
import { CliError, operatorKeyPolicy, refuseIfOutputDiscarded, RUN, withStore, type CommandContext } from '../../context.js';

export async function keyRoll(ctx: CommandContext, opts: { key: string; overlap: string }): Promise<number> {
  if (!isOverlap(opts.overlap)) throw new CliError(`overlap must be one of: ${Object.keys(OVERLAPS).join(', ')}`);
  const overlap = opts.overlap;
  refuseIfOutputDiscarded('the new key');
  const outcome = await withStore(ctx.config, (store) => rollKey(store.db, opts.key, overlap, 'operator', operatorKeyPolicy(ctx.config)));
  if (!outcome.ok) throw new CliError(outcome.reason);
  const { created, old } = outcome.value;
  const ends = overlap === 'now' ? 'is revoked now' : `keeps working until ${old.retires_at}`;
  ctx.out.result(
    { ...created, old_key: { id: old.id, status: old.status, retires_at: old.retires_at, revoked_at: old.revoked_at } },
    `Rolled key ${old.id} "${old.name}": the old key ${ends}. The new key ${created.id}:\n\n  ${created.key}\n\nCopy it now: it is shown only this once and cannot be recovered.`,
    {
      made: `key ${old.id} was rolled: its old key ${ends}, and the new key ${created.id} was made`,
      remedy: `revoke the new key (${RUN} key revoke --key ${created.id}) and create another with ${RUN} key create`,
    },
  );
  return 0;
}
