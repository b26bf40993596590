import { sweepKeys } from '../../../management/keys.js';
import { listSchools } from '../../../management/schools.js';
import { RUN, table, withStore, type CommandContext } from '../../context.js';

export async function schoolList(ctx: CommandContext): Promise<number> {
  const schools = await withStore(ctx.config, async (store) => {
    // Keys that have ended (expired, overlap over, unused) are marked so first, as `key list` does: they are not active.
    await sweepKeys(store.db, { unusedDays: ctx.config.keyUnusedDays });
    return listSchools(store.db);
  });
  ctx.out.result(schools, () =>
    schools.length === 0
      ? `No schools yet (${RUN} school create --name NAME --plan PLAN)`
      : table(
          ['ID', 'NAME', 'PLAN', 'TIME ZONE', 'CURRENCY', 'ACTIVE KEYS', 'CREATED'],
          schools.map((s) => [s.id, s.name, s.plan, s.timezone, s.currency, s.active_keys, s.created_at]),
        ),
  );
  return 0;
}
