import { listKeys } from '../../../management/keys.js';
import { findSchool } from '../../../management/schools.js';
import { CliError, table, withStore, type CommandContext } from '../../context.js';

export async function keyList(ctx: CommandContext, opts: { school: string }): Promise<number> {
  const keys = await withStore(ctx.config, async (store) => {
    if (!(await findSchool(store.db, opts.school))) throw new CliError(`no school with id "${opts.school}"`);
    return listKeys(store.db, opts.school);
  });
  ctx.out.result(keys, () =>
    keys.length === 0
      ? `School ${opts.school} has no keys`
      : table(
          ['ID', 'NAME', 'HINT', 'CREATED', 'LAST USED', 'REQUESTS', 'REVOKED'],
          keys.map((k) => [k.id, k.name, k.hint, k.created_at, k.last_used_at, k.request_count, k.revoked_at]),
        ),
  );
  return 0;
}
