import { setPlan } from '../../../management/schools.js';
import { CliError, withStore, type CommandContext } from '../../context.js';

export async function schoolSetPlan(ctx: CommandContext, opts: { school: string; plan: string }): Promise<number> {
  const outcome = await withStore(ctx.config, (store) => setPlan(store.db, opts.school, opts.plan));
  if (!outcome.ok) throw new CliError(outcome.reason);
  ctx.out.result(outcome.value, `School ${outcome.value.id} is now on plan ${outcome.value.plan}`);
  return 0;
}
