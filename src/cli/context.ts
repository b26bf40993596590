/**
 * What every command needs: the configuration, an output that is either human text
 * or one JSON value, and a store opened (and migrated) only when the command uses it.
 */
import fs from 'node:fs';
import os from 'node:os';
import { flagFor, loadConfig, settings, type Config, type ConfigOverrides } from '../config/index.js';
import { openStore, type LockWait, type Store } from '../db/index.js';
import type { KeyPolicy } from '../management/keys.js';

/**
 * How a hint the program prints names a command: from the repository root, `npx` finds
 * the package's own bin (a bare `school-data` is not on the PATH after `npm ci`).
 */
export const RUN = 'npx school-data';

export class CliError extends Error {
  override name = 'CliError';
  readonly exitCode: number;

  constructor(
    message: string,
    exitCode = 1,
  ) {
    super(message);
    this.exitCode = exitCode;
  }
}

/**
 * Output that exists nowhere else once printed (a new key, a generated password): what was
 * made, and how to make another, for the line a failed write of it ends with (main.ts).
 */
export interface ShownOnce {
  made: string;
  remedy: string;
}

let shownOnce: ShownOnce | null = null;

/** What the last result showed once, if it did (the output may have failed to take it). */
export function resultShownOnce(): ShownOnce | null {
  return shownOnce;
}

export interface Output {
  readonly json: boolean;
  /**
   * Prints `value` as JSON in --json mode, else the human text. `once`: the result holds what
   * is shown only this once, named if standard output cannot take it.
   */
  result(value: unknown, human: string | (() => string), once?: ShownOnce): void;
  /** Progress or notes for people: stderr, so stdout stays one JSON value in --json mode. */
  note(text: string): void;
}

export function createOutput(json: boolean, stdout: NodeJS.WritableStream = process.stdout, stderr: NodeJS.WritableStream = process.stderr): Output {
  return {
    json,
    result(value, human, once) {
      if (once !== undefined) shownOnce = once;
      if (json) stdout.write(`${JSON.stringify(value, null, 2)}\n`);
      else stdout.write(`${typeof human === 'function' ? human() : human}\n`);
    },
    note(text) {
      stderr.write(`${text}\n`);
    },
  };
}

/**
 * Refuses to make what is shown only once (`what`) when standard output goes nowhere:
 * /dev/null, or closed (Node then opens /dev/null in its place).
 */
export function refuseIfOutputDiscarded(what: string): void {
  let discarded = false;
  try {
    const out = fs.fstatSync(1);
    discarded = out.isCharacterDevice() && out.rdev === fs.statSync('/dev/null').rdev;
  } catch {
    // Not a place this can be told (no /dev/null): the write itself is checked instead.
  }
  if (discarded) throw new CliError(`standard output goes to /dev/null (or is closed): ${what} would be shown nowhere; nothing was made`);
}

export interface CommandContext {
  config: Config;
  out: Output;
}

/**
 * How the key commands judge keys: dates by this shell's SCHOOL_DATA_KEY_UNUSED_DAYS, no key
 * marked unused by it (the servers' setting may differ; their sweep marks those).
 */
export function operatorKeyPolicy(config: Config): KeyPolicy {
  return { unusedDays: config.keyUnusedDays, marksUnused: false };
}

/**
 * `overrides` are command-line flags: one given empty (a script's unset variable) is refused,
 * never read as "not given", which would quietly fall back to the variable or the default.
 */
export function contextFor(options: { json?: boolean }, overrides: ConfigOverrides = {}): CommandContext {
  for (const [key, value] of Object.entries(overrides)) {
    const flag = flagFor(key) ?? key;
    if (typeof value === 'string' && value.trim() === '') throw new CliError(`${flag} is empty: leave the option out to use ${settings[key as keyof typeof settings].env} or its default`);
  }
  return { config: loadConfig(process.env, overrides), out: createOutput(Boolean(options.json)) };
}

/**
 * Brings a store up to date: the schema (migrations), then every derived part of the
 * rows that today's code writes differently (src/importer/rebuild.ts). Returns the
 * migrations applied and the parts rebuilt.
 */
export async function upgradeStore(store: Store): Promise<{ applied: string[]; rebuilt: string[] }> {
  const { rebuildStale } = await import('../importer/rebuild.js');
  const { applied, derived } = await store.upgrade(rebuildStale);
  return { applied, rebuilt: derived };
}

/** Whether the wait for the lock was told already (once a command). */
let lockWaitSaid = false;

/**
 * A command's write on SQLite waits for another process's write lock as long as an import
 * does (its merge holds the lock until it commits: minutes for a large school), saying once
 * on stderr what it waits for; a revoke during an import then succeeds once the import ends.
 */
export const COMMAND_LOCK_WAIT: LockWait = {
  lockWaitMs: 10 * 60_000,
  onLockWait: () => {
    if (lockWaitSaid) return;
    lockWaitSaid = true;
    process.stderr.write("school-data: waiting for the SQLite file's write lock, held by another writer (an import merging its records holds it until it commits); Ctrl-C to give up\n");
  },
};
/** Runs `fn` with an up-to-date store (upgradeStore) and always closes it. */
export async function withStore<T>(config: Config, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = openStore(config, COMMAND_LOCK_WAIT);
  try {
    await upgradeStore(store);
    return await fn(store);
  } finally {
    await store.close();
  }
}

/**
 * Holds SIGINT and SIGTERM until `release`, for a command that must not stop halfway; the
 * first says on stderr what it waits for, a second stops the process at once. `release`
 * gives the exit code of a signal held (130 for SIGINT, 143 for SIGTERM), or null.
 */
export function holdSignals(waiting: string): { release: () => number | null } {
  let received: NodeJS.Signals | null = null;
  const hold = (signal: NodeJS.Signals) => {
    if (received === null) {
      received = signal;
      process.stderr.write(`${signal}: ${waiting} (again to stop now)\n`);
      return;
    }
    stop();
    process.kill(process.pid, signal);
  };
  const stop = () => {
    process.off('SIGINT', hold);
    process.off('SIGTERM', hold);
  };
  process.on('SIGINT', hold);
  process.on('SIGTERM', hold);
  return {
    release() {
      stop();
      return received === null ? null : 128 + os.constants.signals[received];
    },
  };
}

/** Formats rows as an aligned text table. */
export function table(headers: string[], rows: (string | number | null)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => (c === null ? '-' : String(c))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd()).join('\n');
}
