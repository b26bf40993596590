import { listKeys } from '../../../management/keys.js';
import { findSchool } from '../../../management/schools.js';
import { KEY_SCOPES } from '../../../domain/scopes.js';
import { CliError, operatorKeyPolicy, table, withStore, type CommandContext } from '../../context.js';

/** A key's status as the table shows it: why it was revoked, and when a rolled key stops. */
function statusText(k: { status: string; revoke_reason: string | null; retires_at: string | null }): string {
  if (k.status === 'revoked' && k.revoke_reason !== null) return `revoked (${k.revoke_reason})`;
  if (k.status === 'active' && k.retires_at !== null) return `active until ${k.retires_at} (rolled)`;
  return k.status;
}

export async function keyList(ctx: CommandContext, opts: { school: string }): Promise<number> {
  const keys = await withStore(ctx.config, async (store) => {
    if (!(await findSchool(store.db, opts.school))) throw new CliError(`no school with id "${opts.school}"`);
    return listKeys(store.db, opts.school, operatorKeyPolicy(ctx.config));
  });
  ctx.out.result(keys, () =>
    keys.length === 0
      ? `School ${opts.school} has no keys`
      : table(
          ['ID', 'NAME', 'HINT', 'STATUS', 'CREATED', 'LAST USED', 'REQUESTS', 'REVOKED', 'SCOPES', 'EXPIRES', 'ALLOW', 'REVOKED IF UNUSED BY'],
          keys.map((k) => [
            k.id, k.name, k.hint, statusText(k),
            k.created_at, k.last_used_at, k.request_count, k.revoked_at,
            k.scopes.length === KEY_SCOPES.length ? 'all' : k.scopes.join(','), k.expires_at, k.allow === null ? 'any' : k.allow.join(','),
            k.unused_revoke_at,
          ]),
        ),
  );
  return 0;
}
