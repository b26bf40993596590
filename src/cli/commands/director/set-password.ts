import { setDirectorPassword } from '../../../management/directors.js';
import { CliError, refuseIfOutputDiscarded, withStore, type CommandContext } from '../../context.js';
import { generatedPassword, passwordFromStdin, passwordLines } from './add.js';

/** A new password for a director, from stdin or generated (as `director add`); their sessions end. */
export async function directorSetPassword(ctx: CommandContext, opts: { email: string }, stdin: NodeJS.ReadStream = process.stdin): Promise<number> {
  const { password, generated } = await passwordFromStdin(stdin);
  if (generated) refuseIfOutputDiscarded('the generated password');
  const outcome = await withStore(ctx.config, (store) => setDirectorPassword(store.db, opts.email, password));
  if (!outcome.ok) throw new CliError(outcome.reason);
  const d = outcome.value;
  ctx.out.result(generated ? { ...d, password } : d, () =>
    [
      `Set a new password for director ${d.id} <${d.email}>; their open sessions are ended`,
      ...passwordLines(password, generated),
    ].join('\n'),
    generated ? generatedPassword(d.email, 'given a new password (their sessions ended)') : undefined,
  );
  return 0;
}
