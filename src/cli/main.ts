/**
 * The operator command line: commander wiring only. Each command lives in
 * commands/ and returns an exit code; errors end as one line on stderr, and a
 * usage error (unknown command or option, missing argument) names the --help to read.
 * Commands are imported when run, so a quick command does not load the server.
 */
import { Command, CommanderError, Option } from 'commander';
import type { Config } from '../config/index.js';
import { PLANS } from '../domain/enums.js';
import { OVERLAPS } from '../domain/overlaps.js';
import { KEY_SCOPES } from '../domain/scopes.js';
import { redactKeys } from '../ops/request-log.js';
import { packageVersion } from '../version.js';
import { CliError, contextFor, createOutput, resultShownOnce, RUN } from './context.js';
import { failureLine, firstLine, printable } from './errors.js';

type Run = (code: number) => void;

/** `done` takes a command's exit code; `opened` is told the configuration a command runs with. */
function buildProgram(done: Run, opened: (config: Config) => void): Command {
  const context: typeof contextFor = (options, overrides) => {
    const ctx = contextFor(options, overrides);
    opened(ctx.config);
    return ctx;
  };
  const program = new Command('school-data')
    .description('Read-only public data API of a driving-school platform: server and operator commands')
    .version(packageVersion(), '-V, --version', 'print the version')
    .showHelpAfterError(false)
    .exitOverride()
    .configureOutput({ writeErr: () => undefined, outputError: () => undefined });

  // Every leaf command takes --json and reports its exit code through `done`.
  const leaf = (parent: Command, name: string, description: string) =>
    parent.command(name).description(description).option('--json', 'machine-readable output: one JSON value on stdout').exitOverride();

  leaf(program, 'serve', 'start the API over HTTPS with the configured stores')
    .option('--host <host>', 'API listener address (HOST)')
    .option('--port <port>', 'API listener port (PORT)')
    .option('--cabinet-port <port>', 'director\'s cabinet listener port (SCHOOL_DATA_CABINET_PORT)')
    .option('--data-dir <dir>', 'data directory (SCHOOL_DATA_DIR)')
    .option('--workers <n>', 'worker processes sharing the port (more than 1 needs REDIS_URL)', '1')
    .action(async (o: { json?: boolean; host?: string; port?: string; cabinetPort?: string; dataDir?: string; workers: string }) =>
      done(await (await import('./commands/serve.js')).serveCommand(context(o, { host: o.host, port: o.port, cabinetPort: o.cabinetPort, dataDir: o.dataDir }), o)),
    );

  leaf(program, 'migrate', 'create or upgrade the schema (idempotent)').action(async (o: { json?: boolean }) => done(await (await import('./commands/migrate.js')).migrateCommand(context(o))));

  const school = program.command('school').description('schools and their plans');
  const plan = new Option('--plan <plan>', 'plan').choices(PLANS).makeOptionMandatory();
  leaf(school, 'create', 'create a school')
    .requiredOption('--name <name>', 'school name')
    .addOption(plan)
    .option('--timezone <tz>', 'IANA time zone', 'Europe/Moscow')
    .option('--currency <code>', 'ISO 4217 currency of the school\'s money', 'RUB')
    .option('--id <id>', 'school id (default: generated)')
    .action(async (o: { json?: boolean; name: string; plan: string; timezone: string; currency: string; id?: string }) => done(await (await import('./commands/school/create.js')).schoolCreate(context(o), o)));
  leaf(school, 'set-plan', 'move a school to another plan')
    .requiredOption('--school <id>', 'school id')
    .addOption(new Option('--plan <plan>', 'plan').choices(PLANS).makeOptionMandatory())
    .action(async (o: { json?: boolean; school: string; plan: string }) => done(await (await import('./commands/school/set-plan.js')).schoolSetPlan(context(o), o)));
  leaf(school, 'list', 'list schools').action(async (o: { json?: boolean }) => done(await (await import('./commands/school/list.js')).schoolList(context(o))));

  const key = program.command('key').description('API keys');
  leaf(key, 'create', 'create a key; its value is shown once')
    .requiredOption('--school <id>', 'school id')
    .requiredOption('--name <name>', 'key name (1-100 characters)')
    .option('--scopes <list>', `comma-separated resources the key may read: ${KEY_SCOPES.join(', ')} (default: all)`)
    .option('--expires <date-time>', 'RFC 3339 date-time with offset, in the future, from which the key is refused (default: never)')
    .option('--allow <list>', 'comma-separated IPv4/IPv6 addresses and CIDR ranges the key may be used from (default: any)')
    .action(async (o: { json?: boolean; school: string; name: string; scopes?: string; expires?: string; allow?: string }) => done(await (await import('./commands/key/create.js')).keyCreate(context(o), o)));
  leaf(key, 'list', 'list a school\'s keys with their usage, options and the date each would be revoked as unused')
    .requiredOption('--school <id>', 'school id')
    .action(async (o: { json?: boolean; school: string }) => done(await (await import('./commands/key/list.js')).keyList(context(o), o)));
  leaf(key, 'revoke', 'revoke a key at once')
    .requiredOption('--key <id>', 'key id (not the key value)')
    .action(async (o: { json?: boolean; key: string }) => done(await (await import('./commands/key/revoke.js')).keyRevoke(context(o), o)));
  leaf(key, 'roll', 'replace a key by a new one with its name, scopes and allowlist (shown once); the old one ends after the overlap')
    .requiredOption('--key <id>', 'key id (not the key value)')
    .addOption(new Option('--overlap <overlap>', 'how long the old key keeps working').choices(Object.keys(OVERLAPS)).makeOptionMandatory())
    .action(async (o: { json?: boolean; key: string; overlap: string }) => done(await (await import('./commands/key/roll.js')).keyRoll(context(o), o)));
  leaf(key, 'allow', 'change the addresses a key may be used from')
    .requiredOption('--key <id>', 'key id (not the key value)')
    .option('--allow <list>', 'comma-separated IPv4/IPv6 addresses and CIDR ranges')
    .addOption(new Option('--any', 'any address').conflicts('allow'))
    .action(async (o: { json?: boolean; key: string; allow?: string; any?: boolean }, command: Command) => {
      // One of the two is needed: a usage error (exit code 2), as a missing option is.
      if (o.allow === undefined && o.any !== true) command.error('give either --allow <addresses> or --any');
      done(await (await import('./commands/key/allow.js')).keyAllow(context(o), o));
    });
  leaf(key, 'log', 'print a key\'s last requests (at most 100, newest first)')
    .requiredOption('--key <id>', 'key id (not the key value)')
    .action(async (o: { json?: boolean; key: string }) => done(await (await import('./commands/key/log.js')).keyLog(context(o), o)));

  const audit = program.command('audit').description('the audit of key events');
  leaf(audit, 'list', 'a school\'s key events, newest first: created, rolled, revoked, expired, revoked as unused, options changed')
    .requiredOption('--school <id>', 'school id')
    .option('--key <id>', 'only this key\'s events')
    .action(async (o: { json?: boolean; school: string; key?: string }) => done(await (await import('./commands/audit/list.js')).auditList(context(o), o)));

  const director = program.command('director').description('directors: who signs in to a school\'s cabinet');
  leaf(director, 'add', 'add a director to a school; the password is read from stdin, or generated and shown once')
    .requiredOption('--school <id>', 'school id')
    .requiredOption('--email <email>', 'the director\'s email, their sign-in name (unique)')
    .action(async (o: { json?: boolean; school: string; email: string }) => done(await (await import('./commands/director/add.js')).directorAdd(context(o), o)));
  leaf(director, 'list', 'list directors, of one school or of all')
    .option('--school <id>', 'school id')
    .action(async (o: { json?: boolean; school?: string }) => done(await (await import('./commands/director/list.js')).directorList(context(o), o)));
  leaf(director, 'set-password', 'set a director\'s password (stdin, or generated and shown once) and end their sessions')
    .requiredOption('--email <email>', 'the director\'s email')
    .action(async (o: { json?: boolean; email: string }) => done(await (await import('./commands/director/set-password.js')).directorSetPassword(context(o), o)));
  leaf(director, 'remove', 'remove a director; their sessions end at once')
    .requiredOption('--email <email>', 'the director\'s email')
    .action(async (o: { json?: boolean; email: string }) => done(await (await import('./commands/director/remove.js')).directorRemove(context(o), o)));

  leaf(program, 'import', 'import a school\'s data from a JSON file (validated whole, one transaction)')
    .requiredOption('--school <id>', 'school id')
    .option('--replace', 'each array in the file is the whole truth: the school\'s records of it that the file leaves out are deleted')
    .option('--progress', 'show the progress line even when stdout is not a terminal')
    .argument('<file>', 'JSON file')
    .action(async (file: string, o: { json?: boolean; school: string; replace?: boolean; progress?: boolean }) =>
      done(await (await import('./commands/import.js')).importCommand(() => context(o), file, o)),
    );

  leaf(program, 'backup', 'copy the SQLite database to a file, while servers run (PostgreSQL: pg_dump)')
    .argument('<file>', 'the new file (never written over)')
    .action(async (file: string, o: { json?: boolean }) => done((await import('./commands/backup.js')).backupCommand(context(o), file)));

  leaf(program, 'demo', 'create demo schools with data and keys, and print the keys')
    .option('--if-empty', 'do nothing when the database already has a school')
    .action(async (o: { json?: boolean; ifEmpty?: boolean }) => done(await (await import('./commands/demo.js')).demoCommand(context(o), o)));

  // Needs neither the configuration nor a database: the document comes from the route schemas.
  leaf(program, 'openapi', 'print the OpenAPI 3.1 document of the public API (JSON)').action(async (o: { json?: boolean }) =>
    done(await (await import('./commands/openapi.js')).openapiCommand(createOutput(Boolean(o.json)))),
  );

  onceEach(program);
  return program;
}

/**
 * An option that takes a value given twice is a usage error, where commander keeps the last
 * silently; and so is one whose value is another of the command's options (`--name $NAME
 * --json` with NAME unset would name a key "--json").
 */
function onceEach(command: Command): void {
  const flags = new Set(['--help', '-h', ...command.options.flatMap((o) => [o.long, o.short]).filter((f) => f !== undefined)]);
  for (const option of command.options) {
    if (!option.required && !option.optional) continue;
    const parse = option.parseArg;
    let given = false;
    option.argParser((value: string, previous: unknown) => {
      if (given) command.error(`option '${option.long ?? option.flags}' is given more than once: give it once`);
      if (flags.has(value)) command.error(`option '${option.long ?? option.flags}' has '${value}' for its value, which is an option: is its value missing?`);
      given = true;
      return parse === undefined ? value : parse(value, previous);
    });
  }
  command.commands.forEach(onceEach);
}

/** The command of `parent` that `word` names (its name or an alias), if any. */
const subcommand = (parent: Command, word: string) => parent.commands.find((c) => c.name() === word || c.aliases().includes(word));

/** The names from the program down to `command` (`key`, `create`). */
function commandPath(program: Command, command: Command): string[] {
  const path: string[] = [];
  for (let c: Command | null = command; c && c !== program; c = c.parent) path.unshift(c.name());
  return path;
}

/** The words of a help request (`help key create`, `key create --help`), or null when `args` ask for none. */
function helpTopic(args: string[]): string[] | null {
  if (args[0] === 'help') return args.slice(1);
  return args.includes('--help') || args.includes('-h') ? args : null;
}

/** The command that `args` name (`key create`), as deep as they go: whose --help to suggest. */
function commandAt(program: Command, args: string[]): Command {
  let current = program;
  for (const arg of args) {
    const next = subcommand(current, arg);
    if (!next) break;
    current = next;
  }
  return current;
}

/** One line for a usage error, ending with the help that lists what the command takes. */
function usageError(program: Command, args: string[], err: CommanderError): string {
  const command = commandAt(program, args);
  const path = commandPath(program, command);
  const help = [RUN, ...path, '--help'].join(' ');
  if (err.code === 'commander.help') {
    // A command that only groups others (`school-data key`), or no command at all.
    const names = command.commands.map((c) => c.name()).filter((n) => n !== 'help');
    return `${path.length > 0 ? `${path.join(' ')} needs` : 'give'} a command: ${names.join(', ')} (see ${help})`;
  }
  // Commander puts its suggestion on a line of its own: said on this one.
  const message = err.message.replace(/^error: /, '').replace(/\n\(Did you mean (.*)\?\)$/, ' (did you mean $1?)');
  return `${message} (see ${help})`;
}

/**
 * The first word of a help request (`help key nope`, `key nope --help`) that names no
 * command, which commander would answer with its parent's help and exit code 0; null if none.
 */
function unknownHelpTopic(program: Command, args: string[]): string | null {
  let current = program;
  for (const word of helpTopic(args) ?? []) {
    if (word.startsWith('-') || (current === program && word === 'help')) break;
    const next = subcommand(current, word);
    if (!next) return current.commands.length > 0 ? word : null;
    current = next;
  }
  return null;
}

/**
 * The help a request with --json asks for (`help key create --json`, `key create --help
 * --json`), as one JSON value: the command, what it does, its options and its commands;
 * null when `args` ask for no help in JSON.
 */
function helpAsJson(program: Command, args: string[]): unknown {
  if (!args.includes('--json')) return null;
  const topic = helpTopic(args);
  if (topic === null) return null;
  const command = commandAt(program, topic.filter((a) => !a.startsWith('-')));
  return {
    command: ['school-data', ...commandPath(program, command)].join(' '),
    description: command.description(),
    usage: command.usage(),
    options: command.options.map((o) => ({
      flags: o.flags,
      description: o.description,
      required: o.mandatory,
      choices: o.argChoices ?? null,
      default: o.defaultValue === undefined ? null : (o.defaultValue as unknown),
    })),
    commands: command.commands.map((c) => ({ name: c.name(), description: c.description() })),
  };
}

/** `help key create` is `key create --help`: commander's own help command looks one level down only. */
function helpAsOption(args: string[]): string[] {
  return args[0] === 'help' && args.length > 1 ? [...args.slice(1), '--help'] : args;
}

/**
 * Standard output failed (its reader left, a full disk): ends the process. A reader that
 * stopped early (`school-data openapi | head`) is no error, unless what it missed was shown
 * only once (a new key, a password): then one line says what was made and what to do.
 */
export function outputFailed(err: NodeJS.ErrnoException): never {
  const why = err.code ?? firstLine(err.message);
  const lost = resultShownOnce();
  if (lost === null && err.code === 'EPIPE') process.exit(0);
  const line = lost === null ? `standard output could not be written (${why})` : `${lost.made}, but standard output could not take it (${why}): ${lost.remedy}`;
  process.stderr.write(`school-data: ${redactKeys(line)}\n`);
  process.exit(1);
}

/** Runs the command line; resolves with the process exit code. */
export async function main(argv: string[]): Promise<number> {
  let code = 0;
  // Where a full disk is looked for when the command fails (failureLine).
  let dataDir: string | undefined;
  const program = buildProgram(
    (c) => {
      code = c;
    },
    (config) => {
      dataDir = config.dataDir;
    },
  );
  const unknown = unknownHelpTopic(program, argv.slice(2));
  if (unknown !== null) {
    process.stderr.write(`school-data: ${redactKeys(printable(`unknown command '${unknown}' (see ${RUN} --help)`))}\n`);
    return 2;
  }
  const jsonHelp = helpAsJson(program, argv.slice(2));
  if (jsonHelp !== null) {
    createOutput(true).result(jsonHelp, '');
    return 0;
  }
  const args = helpAsOption(argv.slice(2));
  try {
    await program.parseAsync([...argv.slice(0, 2), ...args]);
    return code;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here too, with exit code 0.
      if (err.exitCode === 0) return 0;
      // Commander echoes what it refused (an option, extra arguments): made one printable line.
      process.stderr.write(`school-data: ${redactKeys(printable(usageError(program, args, err)))}\n`);
      return 2;
    }
    // A key pasted where an id or a name was asked for is not echoed to the terminal (or a job's log).
    process.stderr.write(`school-data: ${failureLine(err, dataDir)}\n`);
    return err instanceof CliError ? err.exitCode : 1;
  }
}
