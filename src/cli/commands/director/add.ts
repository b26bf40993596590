import { addDirector, generatePassword, PASSWORD_MAX_LENGTH } from '../../../management/directors.js';
import { CliError, withStore, type CommandContext } from '../../context.js';

/** More than the longest password allowed can take in UTF-8 with its line end. */
const STDIN_MAX_BYTES = PASSWORD_MAX_LENGTH * 4 + 2;

/**
 * The new director's password: the first line of stdin when something is piped in, or
 * a generated one when stdin is a terminal or empty (`< /dev/null`). An empty first
 * line is refused rather than replaced: it is most likely an unset variable.
 * Reading stops at the first line end (or once the line is too long to be a password),
 * so a writer that never ends (`yes |`, a pipe left open) does not hold the command.
 */
export async function passwordFromStdin(stdin: NodeJS.ReadStream): Promise<{ password: string; generated: boolean }> {
  if (stdin.isTTY) return { password: generatePassword(), generated: true };
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stdin) {
    chunks.push(chunk as Buffer);
    size += (chunk as Buffer).length;
    if ((chunk as Buffer).includes(0x0a) || size > STDIN_MAX_BYTES) break;
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.length === 0) return { password: generatePassword(), generated: true };
  const line = text.split(/\r?\n/, 1)[0] ?? '';
  if (line.length === 0) throw new CliError('the password on stdin is empty; pipe in the password, or nothing at all to have one generated');
  return { password: line, generated: false };
}

/** What the human-readable output says of the password: a generated one is shown here, once. */
export function passwordLines(password: string, generated: boolean): string[] {
  return generated
    ? ['', `  password: ${password}`, '', 'Hand it over securely: it is shown only this once and only its hash is stored.']
    : ['The password is the one given on stdin.'];
}

export async function directorAdd(ctx: CommandContext, opts: { school: string; email: string }, stdin: NodeJS.ReadStream = process.stdin): Promise<number> {
  const { password, generated } = await passwordFromStdin(stdin);
  const outcome = await withStore(ctx.config, (store) => addDirector(store.db, { schoolId: opts.school, email: opts.email, password }));
  if (!outcome.ok) throw new CliError(outcome.reason);
  const d = outcome.value;
  const host = ctx.config.host.includes(':') ? `[${ctx.config.host}]` : ctx.config.host;
  const signIn = `https://${host}:${ctx.config.cabinetPort}/login`;
  ctx.out.result(generated ? { ...d, password } : d, () =>
    [
      `Added director ${d.id} <${d.email}> for school ${d.school_id}; they sign in at ${signIn}`,
      ...passwordLines(password, generated),
    ].join('\n'),
  );
  return 0;
}
