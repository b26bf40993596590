import { isWildcardHost, localUrlHost } from '../../../config/index.js';
import { addDirector, generatePassword, PASSWORD_MAX_LENGTH } from '../../../management/directors.js';
import { CliError, refuseIfOutputDiscarded, RUN, withStore, type CommandContext } from '../../context.js';

/** More than the longest password allowed can take in UTF-8 with its line end. */
const STDIN_MAX_BYTES = PASSWORD_MAX_LENGTH * 4 + 2;

/** How long stdin may stay open with nothing more on it before the command gives up waiting. */
const STDIN_SILENCE_MS = 60_000;

/**
 * The new director's password: the first line of stdin when something is piped in, or
 * a generated one when stdin is a terminal or empty (`< /dev/null`). An empty first
 * line is refused rather than replaced: it is most likely an unset variable.
 * Reading stops at the first line end, at the end of stdin, or once the line is too long
 * to be a password, so a writer that never ends (`yes |`) does not hold the command; nor
 * does a pipe left open (a CI runner's), with nothing on it or with a line not ended:
 * refused once nothing more has come for `waitMs`.
 */
export async function passwordFromStdin(stdin: NodeJS.ReadStream, waitMs = STDIN_SILENCE_MS): Promise<{ password: string; generated: boolean }> {
  if (stdin.isTTY) return { password: generatePassword(), generated: true };
  const chunks: Buffer[] = [];
  let size = 0;
  const reading = stdin[Symbol.asyncIterator]();
  let timer: NodeJS.Timeout | undefined;
  const silence = () =>
    new Promise<'silent'>((resolve) => {
      clearTimeout(timer);
      timer = setTimeout(() => resolve('silent'), waitMs);
    });
  try {
    for (;;) {
      const next = await Promise.race([reading.next(), silence()]);
      if (next === 'silent') {
        // Its read is still pending: ending the iteration would wait for it.
        stdin.destroy();
        throw new CliError(
          size === 0
            ? `nothing came on stdin in ${waitMs / 1000} s: pipe in the password, or give < /dev/null to have one generated`
            : `the password on stdin has no line end, and nothing more came in ${waitMs / 1000} s: end it with a line break, or close stdin`,
        );
      }
      if (next.done === true) break;
      const chunk = next.value as Buffer;
      chunks.push(chunk);
      size += chunk.length;
      if (chunk.includes(0x0a) || size > STDIN_MAX_BYTES) break;
    }
  } finally {
    clearTimeout(timer);
    if (!stdin.destroyed) await reading.return?.();
  }
  const bytes = Buffer.concat(chunks);
  if (bytes.length === 0) return { password: generatePassword(), generated: true };
  const end = bytes.indexOf(0x0a);
  const line = firstLine(end === -1 ? bytes : bytes.subarray(0, end), end === -1 && size > STDIN_MAX_BYTES);
  if (line.length === 0) throw new CliError('the password on stdin is empty; pipe in the password, or nothing at all to have one generated');
  return { password: line, generated: false };
}

/**
 * The password line's text: UTF-8, without its carriage return or a byte order mark an editor
 * put before it (neither can be typed at the sign-in). Bytes that are no UTF-8 (a file saved in
 * another encoding) are refused: decoded as replacement characters, the password could never be
 * typed. A line cut at the read's limit is too long anyway (its length is refused after).
 */
function firstLine(bytes: Buffer, cut: boolean): string {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: !cut }).decode(bytes);
  } catch {
    throw new CliError('the password on stdin is not UTF-8 text; save it as UTF-8 (or pipe in nothing to have one generated)');
  }
  return text.replace(/\r$/, '');
}

/** What the human-readable output says of the password: a generated one is shown here, once. */
export function passwordLines(password: string, generated: boolean): string[] {
  return generated
    ? ['', `  password: ${password}`, '', 'Hand it over securely: it is shown only this once and only its hash is stored.']
    : ['The password is the one given on stdin.'];
}

/**
 * Where the director signs in: the cabinet's sign-in URL on the configured host, or, when the
 * cabinet listens on every address, that URL with the server's name left for the operator to put in.
 */
export function signInAddress(host: string, cabinetPort: number): string {
  if (isWildcardHost(host)) return `https://<this server's name>:${cabinetPort}/login (HOST is ${host}: the cabinet listens on every address of this server)`;
  return `https://${localUrlHost(host)}:${cabinetPort}/login`;
}

export async function directorAdd(ctx: CommandContext, opts: { school: string; email: string }, stdin: NodeJS.ReadStream = process.stdin): Promise<number> {
  const { password, generated } = await passwordFromStdin(stdin);
  if (generated) refuseIfOutputDiscarded('the generated password');
  const outcome = await withStore(ctx.config, (store) => addDirector(store.db, { schoolId: opts.school, email: opts.email, password }));
  if (!outcome.ok) throw new CliError(outcome.reason);
  const d = outcome.value;
  const signIn = signInAddress(ctx.config.host, ctx.config.cabinetPort);
  ctx.out.result(generated ? { ...d, password } : d, () =>
    [
      `Added director ${d.id} <${d.email}> for school ${d.school_id}; they sign in at ${signIn}`,
      ...passwordLines(password, generated),
    ].join('\n'),
    generated ? generatedPassword(d.email, 'added') : undefined,
  );
  return 0;
}

/** What a generated password's loss says: the director, and how to give them another. */
export function generatedPassword(email: string, done: string) {
  return { made: `director ${email} was ${done} with a generated password`, remedy: `set another with ${RUN} director set-password --email ${email}` };
}
