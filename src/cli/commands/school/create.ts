import { createSchool } from '../../../management/schools.js';
import { CliError, withStore, type CommandContext } from '../../context.js';

export async function schoolCreate(ctx: CommandContext, opts: { name: string; plan: string; timezone?: string; currency?: string; id?: string }): Promise<number> {
  const outcome = await withStore(ctx.config, (store) => createSchool(store.db, opts));
  if (!outcome.ok) throw new CliError(outcome.reason);
  const s = outcome.value;
  ctx.out.result(s, `Created school ${s.id} "${s.name}" (plan ${s.plan}, time zone ${s.timezone}, currency ${s.currency})`);
  return 0;
}
