import { endedKeyCounts } from '../../../management/keys.js';
import { listSchools } from '../../../management/schools.js';
import { operatorKeyPolicy, RUN, table, withStore, type CommandContext } from '../../context.js';

export async function schoolList(ctx: CommandContext): Promise<number> {
  const schools = await withStore(ctx.config, async (store) => {
    // Keys that have ended (expired, overlap over, unused) but are not marked so yet are not
    // active; counted, not marked: a list changes nothing (a sweep by this shell's settings could
    // revoke keys the servers, set otherwise, keep).
    const ended = await endedKeyCounts(store.db, operatorKeyPolicy(ctx.config));
    return (await listSchools(store.db)).map((s) => ({ ...s, active_keys: s.active_keys - (ended.get(s.id) ?? 0) }));
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
