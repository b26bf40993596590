import { keyRequests } from '../../../management/key-activity.js';
import { findKey } from '../../../management/keys.js';
import { CliError, table, withStore, type CommandContext } from '../../context.js';

export async function keyLog(ctx: CommandContext, opts: { key: string }): Promise<number> {
  const entries = await withStore(ctx.config, async (store) => {
    const key = await findKey(store.db, opts.key);
    if (!key) throw new CliError(`no key with id "${opts.key}"`);
    return keyRequests(store.db, key.school_id, key.id);
  });
  ctx.out.result(entries, () =>
    entries.length === 0
      ? `Key ${opts.key} has no requests recorded`
      : table(
          ['AT', 'METHOD', 'TARGET', 'STATUS', 'MS', 'ADDRESS', 'REQUEST ID'],
          entries.map((e) => [e.at, e.method, e.target, e.status, e.duration_ms, e.address, e.request_id]),
        ),
  );
  return 0;
}
