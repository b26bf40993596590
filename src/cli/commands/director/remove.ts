import { removeDirector } from '../../../management/directors.js';
import { CliError, withStore, type CommandContext } from '../../context.js';

export async function directorRemove(ctx: CommandContext, opts: { email: string }): Promise<number> {
  const outcome = await withStore(ctx.config, (store) => removeDirector(store.db, opts.email));
  if (!outcome.ok) throw new CliError(outcome.reason);
  const d = outcome.value;
  ctx.out.result(d, `Removed director ${d.id} <${d.email}> of school ${d.school_id}; their sessions are ended`);
  return 0;
}
