import { listKeys } from '../../../management/keys.js';
import { findSchool } from '../../../management/schools.js';
import { KEY_SCOPES } from '../../../domain/scopes.js';
import { CliError, table, withStore, type CommandContext } from '../../context.js';

export async function keyList(ctx: CommandContext, opts: { school: string }): Promise<number> {
  const keys = await withStore(ctx.config, async (store) => {
    if (!(await findSchool(store.db, opts.school))) throw new CliError(`no school with id "${opts.school}"`);
    return listKeys(store.db, opts.school, { unusedDays: ctx.config.keyUnusedDays });
  });
  ctx.out.result(keys, () =>
    keys.length === 0
      ? `School ${opts.school} has no keys`
      : table(
          ['ID', 'NAME', 'HINT', 'STATUS', 'CREATED', 'LAST USED', 'REQUESTS', 'REVOKED', 'SCOPES', 'EXPIRES', 'ALLOW', 'REVOKED IF UNUSED BY'],
          keys.map((k) => [
            k.id, k.name, k.hint, k.status === 'revoked' && k.revoke_reason !== null ? `revoked (${k.revoke_reason})` : k.status,
            k.created_at, k.last_used_at, k.request_count, k.revoked_at,
            k.scopes.length === KEY_SCOPES.length ? 'all' : k.scopes.join(','), k.expires_at, k.allow === null ? 'any' : k.allow.join(','),
            k.unused_revoke_at,
          ]),
        ),
  );
  return 0;
}
