/** Real `school-data` processes (the built CLI) for multi-instance and signal tests. */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { keyLeak, TEST_REDIS_TIMEOUT_MS } from './app.js';
import { refuseIfStoreFree } from './store.js';

export const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/school-data.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs one CLI command to completion. */
export function runCli(args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<CliResult> {
  refuseIfStoreFree('it runs the command line');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      // stdout may carry a key on purpose (key create, demo); stderr never.
      const leak = keyLeak(stderr, `the stderr of "${args.join(' ')}"`);
      if (leak) reject(leak);
      else resolve({ code: code ?? -1, stdout, stderr });
    });
    child.stdin.end(input ?? '');
  });
}

export interface ServeProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number>;
}

/**
 * Starts one `serve` per environment, side by side; if any does not start, stops those that
 * did and fails, so a failed start leaves no process behind.
 */
export async function startServes(envs: NodeJS.ProcessEnv[]): Promise<ServeProcess[]> {
  const started = await Promise.allSettled(envs.map((env) => startServe(env)));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed === undefined) return started.map((r) => (r as PromiseFulfilledResult<ServeProcess>).value);
  for (const r of started) if (r.status === 'fulfilled') r.value.child.kill('SIGKILL');
  throw failed.reason;
}

/** Starts `school-data serve --json` and resolves once it printed its base URL. */
export function startServe(env: NodeJS.ProcessEnv, args: string[] = []): Promise<ServeProcess> {
  refuseIfStoreFree('it starts the server');
  return new Promise((resolve, reject) => {
    // The cabinet listens too: on a free port unless the test names one, so instances never collide on 8444.
    // The Redis timeout of the in-process test apps (TEST_REDIS_TIMEOUT_MS), unless the test names one.
    const defaults = { SCHOOL_DATA_CABINET_PORT: '0', SCHOOL_DATA_REDIS_TIMEOUT_MS: String(TEST_REDIS_TIMEOUT_MS) };
    const child = spawn(process.execPath, [BIN, 'serve', '--json', ...args], { env: { ...defaults, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    // Rejects, once the process is gone, if it ever wrote a key value (its logs are its output).
    const exited = new Promise<number>((resolve, rejectExit) =>
      child.on('exit', (code, signal) => {
        const leak = keyLeak(out, 'the output of serve');
        if (leak) rejectExit(leak);
        else resolve(code ?? (signal ? 128 : -1));
      }),
    );
    // A process that does not start in time is stopped, so no test leaves it running.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serve did not start:\n${out}`));
    }, 20_000);
    const onData = (c: Buffer) => {
      out += c.toString();
      if (out.includes('"base_url"')) {
        clearTimeout(timer);
        resolve({ child, output: () => out, exited });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const early = (code: unknown) => {
      clearTimeout(timer);
      reject(new Error(`serve exited (${String(code)}) before starting:\n${out}`));
    };
    exited.then(early, early);
  });
}
