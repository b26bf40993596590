/**
 * The two servers a benchmark run loads: the real service (the built CLI, `serve`, as an
 * operator starts it) and the bare node:https baseline; and the peak memory of a process,
 * read from the kernel rather than sampled, so a short spike is not missed.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * The V8 settings docs/deployment.md gives for production: a cap on the old generation
 * (without one, V8 sizes the heap from the machine's 24 GB and lets garbage pile up before
 * collecting it) and a young generation of fixed size (V8's default grows it to 32 MB and
 * more; at 2 MB the objects of the requests in flight outlive the frequent scavenges and are
 * promoted, and the floods lost a quarter of their throughput). docs/performance.md, "Memory".
 */
export const SERVER_NODE_OPTIONS = '--max-old-space-size=96 --max-semi-space-size=8';


/** Limits: VIP high enough never to bite; Profi at its default, so the Profi school's key floods into 429. */
export const RATE_LIMIT_VIP = 10_000_000;
export const RATE_LIMIT_PROFI = 60;

/** The settings of a served benchmark run that the server's environment carries. */
export interface ServedSettings {
  logLevel: string;
  responseCacheMb: number;
  nodeOptions: string;
}

/**
 * The served server's environment: the caller's general one, no SCHOOL_DATA_* setting of
 * theirs, the data set's store and directory, and the benchmark's limits. `redisUrl`
 * replaces the caller's REDIS_URL (a comparison gives each build its own database).
 */
export function serverEnv(loc: { databaseUrl: string | null; dataDir: string }, port: number, cabinetPort: number, options: ServedSettings, redisUrl?: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SCHOOL_DATA_') && k !== 'DATABASE_URL' && k !== 'PORT' && k !== 'HOST') env[k] = v;
  return {
    ...env,
    ...(redisUrl === undefined ? {} : { REDIS_URL: redisUrl }),
    NODE_OPTIONS: [env.NODE_OPTIONS, options.nodeOptions].filter(Boolean).join(' '),
    ...(loc.databaseUrl ? { DATABASE_URL: loc.databaseUrl } : {}),
    SCHOOL_DATA_DIR: loc.dataDir,
    HOST: '127.0.0.1',
    PORT: String(port),
    SCHOOL_DATA_CABINET_PORT: String(cabinetPort),
    SCHOOL_DATA_LOG_LEVEL: options.logLevel,
    SCHOOL_DATA_RESPONSE_CACHE_MB: String(options.responseCacheMb),
    SCHOOL_DATA_RATE_LIMIT_VIP: String(RATE_LIMIT_VIP),
    SCHOOL_DATA_RATE_LIMIT_PROFI: String(RATE_LIMIT_PROFI),
    // The data set's keys were made (and last used) long before a run: a long period keeps
    // the unused-key check on the request path without revoking them.
    SCHOOL_DATA_KEY_UNUSED_DAYS: '36500',
  };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface ApiServerOptions {
  env: NodeJS.ProcessEnv;
  workers: number;
  /** Where the server's stdout and stderr (its JSON log) go. */
  logFile: string;
  /** The server's /metrics (on its cabinet listener). */
  metricsUrl: string;
  /** With a directory, the server runs under --cpu-prof and writes its profile there on exit. */
  cpuProfileDir?: string | undefined;
  /** Node.js and V8 flags for the server's command line, after NODE_OPTIONS (for those it refuses, such as --trace-gc). */
  nodeArgs?: readonly string[];
  /** The checkout whose built CLI serves (default this one; a comparison starts another's). */
  root?: string;
}

export interface ApiServer {
  origin: string;
  metricsUrl: string;
  /** The processes that serve requests: the one server, or the workers. */
  servingPids(): number[];
  /** Empties the log file (the server appends, so it keeps writing at the new end). */
  truncateLog(): void;
  /** SIGTERM, then SIGKILL after 20 s; resolves with the exit code (null: killed by a signal). */
  stop(): Promise<number | null>;
}

/** Starts `node bin/school-data.js serve --json` and waits for its banner in the log file. */
export async function startApiServer(options: ApiServerOptions): Promise<ApiServer> {
  // The log goes straight to a file, not through a pipe: the benchmark process must not
  // spend the shared cores copying the server's log lines.
  const log = fs.openSync(options.logFile, 'w');
  fs.closeSync(log);
  const out = fs.openSync(options.logFile, 'a');
  const nodeArgs = [...(options.cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfileDir}`] : []), ...(options.nodeArgs ?? [])];
  const child = spawn(process.execPath, [...nodeArgs, path.join(options.root ?? ROOT, 'bin/school-data.js'), 'serve', '--json', '--workers', String(options.workers)], {
    env: options.env,
    stdio: ['ignore', out, out],
  });
  fs.closeSync(out);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const deadline = Date.now() + 120_000;
  let origin: string | null = null;
  while (origin === null) {
    const text = fs.readFileSync(options.logFile, 'utf8');
    const match = /"base_url":\s*"(https:\/\/[^/"]+)/.exec(text);
    if (match) origin = match[1]!;
    else if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGTERM');
      throw new Error(`the server did not start; its output:\n${text.slice(-4000)}`);
    } else await sleep(100);
  }

  return {
    origin,
    metricsUrl: options.metricsUrl,
    servingPids: () => (options.workers > 1 ? childPids(child.pid!) : [child.pid!]),
    truncateLog: () => fs.truncateSync(options.logFile, 0),
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

function childPids(pid: number): number[] {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

export interface BareServer {
  port: number;
  pid: number;
  /** Makes every later answer a JSON body of `size` bytes. */
  setBodySize(size: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The bare baseline, or with `floor` the floor of a stored answer writing its access lines
 * to `floor.logFile`, counting in Redis at `floor.redisUrl` when given (bench/bare-server.ts
 * says what each does).
 */
export async function startBareServer(certFile: string, keyFile: string, floor?: { logFile: string; redisUrl?: string | undefined }): Promise<BareServer> {
  const kind = floor === undefined ? 'bare' : 'floor';
  const floorArgs = floor === undefined ? [] : [floor.logFile, ...(floor.redisUrl === undefined ? [] : [floor.redisUrl])];
  const child: ChildProcess = fork(path.join(ROOT, 'bench/bare-server.ts'), [certFile, keyFile, kind, ...floorArgs], {
    execArgv: ['--import', path.join(ROOT, 'scripts/ts-resolve.mjs')],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const next = <T>(pick: (m: Record<string, unknown>) => T | undefined) =>
    new Promise<T>((resolve, reject) => {
      const onMessage = (m: Record<string, unknown>) => {
        const value = pick(m);
        if (value === undefined) return;
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(value);
      };
      const onExit = () => reject(new Error(`the ${kind} baseline server exited`));
      child.on('message', onMessage);
      child.once('exit', onExit);
    });
  const port = await next((m) => (typeof m.port === 'number' ? m.port : undefined));
  return {
    port,
    pid: child.pid!,
    setBodySize: async (size) => {
      const done = next((m) => (typeof m.size === 'number' ? m.size : undefined));
      child.send({ size });
      await done;
    },
    stop: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.disconnect();
      await exited;
    },
  };
}

/**
 * Peak resident memory of processes over an interval: the kernel's high-water mark
 * (VmHWM), reset at the start by writing 5 to /proc/<pid>/clear_refs.
 */
export class PeakRss {
  private readonly pids: () => number[];

  constructor(pids: () => number[]) {
    this.pids = pids;
  }

  reset(): void {
    for (const pid of this.pids()) {
      try {
        fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
      } catch {
        // Not Linux, or not allowed: the peak then covers the process's whole life.
      }
    }
  }

  /** The largest peak of any one process, in bytes (null where /proc is not readable). */
  read(): number | null {
    let peak: number | null = null;
    for (const pid of this.pids()) {
      try {
        const kb = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
        if (kb) peak = Math.max(peak ?? 0, Number(kb) * 1024);
      } catch {
        // The process is gone or /proc is missing.
      }
    }
    return peak;
  }
}

// USER_HZ, the unit of /proc/<pid>/stat times: 100 on every Linux architecture Node runs on.
const CLOCK_TICKS_PER_SECOND = 100;

/**
 * A /proc `stat` file (of a process or a thread): its command name, and the fields after it,
 * from the state on (field 3 of proc(5) at index 0: minflt at 7, majflt 9, utime 11, stime 12).
 * The name may hold spaces and parentheses, so the fields start after the last ") ". Throws
 * when the file cannot be read.
 */
export function procStat(file: string): { name: string; fields: string[] } {
  const stat = fs.readFileSync(file, 'utf8');
  const end = stat.lastIndexOf(') ');
  return { name: stat.slice(stat.indexOf('(') + 1, end), fields: stat.slice(end + 2).split(' ') };
}

/** User + system CPU seconds in a /proc `stat` file's fields. */
const cpuOf = (fields: string[]) => (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;

/** User + system CPU seconds of the process or thread of a /proc `stat` file; throws when it cannot be read. */
export const statCpuSeconds = (file: string): number => cpuOf(procStat(file).fields);

/** The system (kernel) part of a process's CPU seconds; throws when its `stat` cannot be read. */
export const systemCpuSeconds = (pid: number): number => Number(procStat(`/proc/${pid}/stat`).fields[12]) / CLOCK_TICKS_PER_SECOND;

/** CPU seconds (user + system) the processes have used so far; 0 for any not readable. */
export function cpuSeconds(pids: number[]): number {
  let seconds = 0;
  for (const pid of pids) {
    try {
      seconds += statCpuSeconds(`/proc/${pid}/stat`);
    } catch {
      // Gone, or not Linux.
    }
  }
  return seconds;
}

/** What a process's threads are for, by their names: the JavaScript thread, V8's helpers (the garbage collector's concurrent and parallel work, compiling), libuv's pool, the rest. */
export type ThreadKind = 'main' | 'v8' | 'libuv' | 'other';
export const THREAD_KINDS: readonly ThreadKind[] = ['main', 'v8', 'libuv', 'other'];

/** CPU seconds (user + system) a process's threads have used so far, by kind; all 0 when not readable. */
export function cpuSecondsByThread(pid: number): Record<ThreadKind, number> {
  const out: Record<ThreadKind, number> = { main: 0, v8: 0, libuv: 0, other: 0 };
  let tids: string[];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const { name, fields } = procStat(`/proc/${pid}/task/${tid}/stat`);
      const kind: ThreadKind = tid === String(pid) ? 'main' : name.startsWith('V8') || name.startsWith('DelayedTask') ? 'v8' : name.startsWith('libuv') ? 'libuv' : 'other';
      out[kind] += cpuOf(fields);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out;
}

/** What the kernel counted for a process so far: its main thread's switches off the CPU that it asked for (waiting for input) and that it was made to take, the nanoseconds that thread waited for a CPU while it could run, and the process's page faults. */
export interface OsEvents {
  voluntarySwitches: number;
  forcedSwitches: number;
  runQueueWaitNs: number;
  pageFaults: number;
}
export const OS_EVENTS: readonly (keyof OsEvents)[] = ['voluntarySwitches', 'forcedSwitches', 'runQueueWaitNs', 'pageFaults'];

/** The process's OsEvents; all 0 where /proc is not readable. */
export function osEvents(pid: number): OsEvents {
  const out: OsEvents = { voluntarySwitches: 0, forcedSwitches: 0, runQueueWaitNs: 0, pageFaults: 0 };
  try {
    const status = fs.readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8');
    out.voluntarySwitches = Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
    out.forcedSwitches = Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
    // schedstat: time on the CPU, time waiting on a run queue (both ns), time slices.
    out.runQueueWaitNs = Number(fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1] ?? 0);
    const { fields } = procStat(`/proc/${pid}/stat`);
    out.pageFaults = Number(fields[7]) + Number(fields[9]);
  } catch {
    // Gone, or not Linux.
  }
  return out;
}

/** A numeric command-line option of the benches: `fallback` when not given, else a number from `min` to `max`. */
/** The median of `xs` (the mean of the two middle ones for an even count); NaN for none. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

export function numberOption(value: string | undefined, fallback: number, name: string, min: number, max: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max) throw new Error(`--${name} must be a number from ${min} to ${max}`);
  return n;
}

/** Stops what `stop` stops, then exits 130, on Ctrl-C or SIGTERM, so no server outlives the bench; returns the function that stops listening. */
export function onInterrupt(stop: () => Promise<unknown>): () => void {
  const interrupted = () => void stop().finally(() => process.exit(130));
  process.once('SIGINT', interrupted).once('SIGTERM', interrupted);
  return () => process.off('SIGINT', interrupted).off('SIGTERM', interrupted);
}

/** Runs a bench's `main`: what it returns is the exit code; a failure is one line on stderr and exit code 1. */
export function runMain(name: string, main: () => Promise<number>): void {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`${name}: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
