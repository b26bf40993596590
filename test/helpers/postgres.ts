/**
 * A private PostgreSQL server (initdb into a temporary directory, on a free loopback
 * port), for tests that stop and start the database under load. The shared server is
 * never touched. PostgreSQL refuses to run as root: as root the server runs as the
 * `postgres` OS user (runuser).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './redis.js';

const run = promisify(execFile);

/** The directory of initdb and pg_ctl, or null when PostgreSQL's server programs are not installed. */
export function postgresBin(): string | null {
  const root = '/usr/lib/postgresql';
  if (!fs.existsSync(root)) return null;
  const versions = fs.readdirSync(root).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) if (fs.existsSync(path.join(root, v, 'bin', 'pg_ctl'))) return path.join(root, v, 'bin');
  return null;
}

export class PrivatePostgres {
  private readonly bin: string;
  private readonly dir: string;
  readonly port: number;

  private constructor(
    bin: string,
    dir: string,
    port: number,
  ) {
    this.bin = bin;
    this.dir = dir;
    this.port = port;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  static async create(): Promise<PrivatePostgres> {
    const bin = postgresBin();
    if (!bin) throw new Error('PostgreSQL server programs not found');
    const root = process.getuid?.() === 0;
    const dir = fs.mkdtempSync(path.join(root ? reachableTemp() : os.tmpdir(), 'school-data-pg-'));
    if (root) fs.chownSync(dir, ...(await postgresIds()));
    const pg = new PrivatePostgres(bin, dir, await freePort());
    await pg.as(path.join(bin, 'initdb'), ['-D', path.join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync']);
    await pg.start();
    return pg;
  }

  /** Runs a PostgreSQL program, as the postgres OS user when we are root. */
  private as(program: string, args: string[]) {
    return process.getuid?.() === 0 ? run('runuser', ['-u', 'postgres', '--', program, ...args]) : run(program, args);
  }

  async start(): Promise<void> {
    const options = `-p ${this.port} -c listen_addresses=127.0.0.1 -k ${this.dir} -c fsync=off`;
    await this.as(path.join(this.bin, 'pg_ctl'), ['-D', path.join(this.dir, 'data'), '-o', options, '-l', path.join(this.dir, 'log'), '-w', 'start']);
  }

  /** Stops the server at once (`-m fast`: open connections are ended), as an outage would. */
  async stop(): Promise<void> {
    await this.as(path.join(this.bin, 'pg_ctl'), ['-D', path.join(this.dir, 'data'), '-m', 'fast', '-w', 'stop']);
  }

  async destroy(): Promise<void> {
    await this.stop().catch(() => undefined);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A temporary directory the `postgres` user can enter: the usual one unless it is private
 * (a `TMPDIR` made by `mktemp -d` is 0700), else /tmp.
 */
function reachableTemp(): string {
  const usual = os.tmpdir();
  return (fs.statSync(usual).mode & 0o001) !== 0 ? usual : '/tmp';
}

async function postgresIds(): Promise<[number, number]> {
  const { stdout: uid } = await run('id', ['-u', 'postgres']);
  const { stdout: gid } = await run('id', ['-g', 'postgres']);
  return [Number(uid), Number(gid)];
}
