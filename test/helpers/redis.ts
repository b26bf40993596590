/**
 * A private redis-server on a free loopback port, for tests that stop and restart
 * Redis. The shared server on 6379 is never touched. Such tests run in the suite with
 * Redis (REDIS_URL set), whose machine has Redis's programs; the embedded suite has the
 * in-memory limiter and needs nothing installed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { RedisRateLimiter } from '../../src/access/ratelimit/redis.js';

/**
 * Ports tests choose for servers they start (and may restart on the same port): below the
 * kernel's ephemeral range (32768-60999 here), which the outgoing connections of every test
 * running beside this one draw from. Picked at random, claimed, and checked free by a listen.
 */
const CHOSEN_PORTS = { from: 20_000, to: 32_000 };

/**
 * A port is claimed by a file named after it, created exclusively: test files run side by
 * side (and whole runs, say CI beside a developer's `npm test`), and two of them may draw the
 * same port and both find it free before either server listens. A claim lasts as long as
 * its process; one a killed process left is skipped, never taken over (taking it over could
 * not be made atomic, and the range is wide). The directory is the user's own.
 */
const CLAIMS_DIR = path.join(os.tmpdir(), `school-data-test-ports-${process.getuid?.() ?? 'user'}`);
const claimed: string[] = [];

function claim(port: number): boolean {
  const file = path.join(CLAIMS_DIR, String(port));
  try {
    fs.writeFileSync(file, String(process.pid), { flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  if (claimed.length === 0) process.once('exit', () => claimed.forEach((f) => fs.rmSync(f, { force: true })));
  claimed.push(file);
  return true;
}

/** The `skip` option of a suite that starts a private redis-server. */
export const REDIS_ONLY: false | string = process.env.REDIS_URL ? false : 'Redis only: the embedded suite uses the in-memory limiter';

export async function freePort(): Promise<number> {
  fs.mkdirSync(CLAIMS_DIR, { recursive: true });
  for (let attempt = 0; ; attempt++) {
    if (attempt === 100) throw new Error('no free port found in 100 tries');
    const port = CHOSEN_PORTS.from + Math.floor(Math.random() * (CHOSEN_PORTS.to - CHOSEN_PORTS.from));
    if (!claim(port)) continue;
    const free = await new Promise<boolean>((resolve) => {
      const srv = net.createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

async function waitForPort(port: number, up: boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open === up) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`redis on port ${port} did not ${up ? 'start' : 'stop'} in time`);
}

export class PrivateRedis {
  private child: ChildProcess | null = null;
  readonly port: number;

  private constructor(port: number) {
    this.port = port;
  }

  static async start(): Promise<PrivateRedis> {
    const redis = new PrivateRedis(await freePort());
    await redis.start();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    // A replica (a failover test) writes the data it is sent to a file: in the temporary directory, one per port.
    const dir = path.join(os.tmpdir(), 'school-data-test-redis');
    fs.mkdirSync(dir, { recursive: true });
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--dbfilename', `dump-${this.port}.rdb`], { stdio: 'ignore' });
    this.child = child;
    const failed = new Promise<never>((_, reject) => child.once('error', (err) => reject(new Error(`redis-server could not start (${err.message}): the Redis suite starts its own servers`))));
    await Promise.race([waitForPort(this.port, true), failed]);
  }

  /** Stops the server abruptly (SIGKILL), as a crash would. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    await waitForPort(this.port, false);
  }

  /** Freezes the server (SIGSTOP): connections stay open but nothing answers. */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }
}

/** A private redis-server, a limiter on it, and a plain client for the test to look at it and meddle with it. */
export interface PrivateLimiter {
  redis: PrivateRedis;
  admin: Redis;
  limiter: RedisRateLimiter;
  close: () => Promise<void>;
}

export async function privateLimiter(timeoutMs: number): Promise<PrivateLimiter> {
  const redis = await PrivateRedis.start();
  const admin = new Redis(redis.url);
  const limiter = new RedisRateLimiter(redis.url, timeoutMs);
  return {
    redis,
    admin,
    limiter,
    close: async () => {
      await limiter.close();
      admin.disconnect();
      await redis.stop();
    },
  };
}
