import { listDirectors } from '../../../management/directors.js';
import { findSchool } from '../../../management/schools.js';
import { CliError, table, withStore, type CommandContext } from '../../context.js';

export async function directorList(ctx: CommandContext, opts: { school?: string }): Promise<number> {
  const directors = await withStore(ctx.config, async (store) => {
    if (opts.school !== undefined && !(await findSchool(store.db, opts.school))) throw new CliError(`no school with id "${opts.school}"`);
    return listDirectors(store.db, opts.school);
  });
  ctx.out.result(directors, () =>
    directors.length === 0
      ? opts.school === undefined ? 'No directors' : `School ${opts.school} has no directors`
      : table(['ID', 'SCHOOL', 'EMAIL', 'CREATED'], directors.map((d) => [d.id, d.school_id, d.email, d.created_at])),
  );
  return 0;
}
