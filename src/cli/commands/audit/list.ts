import { findKey, keyEvents } from '../../../management/keys.js';
import { findSchool } from '../../../management/schools.js';
import { CliError, table, withStore, type CommandContext } from '../../context.js';

export async function auditList(ctx: CommandContext, opts: { school: string; key?: string }): Promise<number> {
  const events = await withStore(ctx.config, async (store) => {
    if (!(await findSchool(store.db, opts.school))) throw new CliError(`no school with id "${opts.school}"`);
    if (opts.key !== undefined && !(await findKey(store.db, opts.key, undefined, opts.school))) throw new CliError(`school ${opts.school} has no key with id "${opts.key}"`);
    return keyEvents(store.db, opts.school, opts.key === undefined ? {} : { keyId: opts.key });
  });
  ctx.out.result(events, () =>
    events.length === 0
      ? `School ${opts.school} has no key events`
      : table(
          ['AT', 'EVENT', 'KEY', 'NAME', 'ACTOR', 'DETAIL'],
          events.map((e) => [e.at, e.event, e.key_id, e.key_name, e.actor, e.detail === null ? null : JSON.stringify(e.detail)]),
        ),
  );
  return 0;
}
