/**
 * npm run bench:redis-call -- [options]: what one rate-limit call to Redis costs, with no
 * server around it, so that the figures do not move with the machine's load as a whole
 * server's do. For each number of schools in a turn, the service's limiter
 * (src/access/ratelimit/redis.ts: every school's requests counted and its key's usage
 * recorded, in one script call) beside the floor's counting (bench/floor-count.ts: the
 * counts alone), in turns: this process's CPU and the wall time per call, and Redis's own
 * CPU per call (its INFO commandstats: measure on a Redis nothing else uses, as the run stops
 * when another client's scripts show there). Needs REDIS_URL; writes only keys of its own,
 * removed at the end, on Ctrl-C too (the counters expire by themselves).
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { RedisRateLimiter } from '../src/access/ratelimit/redis.js';
import { floorCounter } from './floor-count.js';
import { median, numberOption, onInterrupt, runMain } from './servers.js';

const USAGE = `usage: REDIS_URL=redis://... npm run bench:redis-call -- [options]

  --schools A,B      schools in a turn, one request and one key each (default 1,5,20,50)
  --calls N          calls measured per side and round (default 3000)
  --rounds N         rounds, each measuring both sides in turns (default 3)`;

/** A limit no call reaches: every request is allowed. */
const LIMIT = 1_000_000_000;
const WARMUP_CALLS = 1000;

interface Side {
  name: string;
  /** One call counting one request of each of `schools` schools. */
  call(schools: number): Promise<unknown>;
}

interface Figures {
  clientMicros: number;
  wallMicros: number;
  redisMicros: number;
}

/** Redis's total microseconds and calls of EVALSHA and EVAL so far, every client's. */
async function scriptStats(admin: Redis): Promise<{ usec: number; calls: number }> {
  const info = await admin.info('commandstats');
  let usec = 0;
  let calls = 0;
  for (const line of info.split('\n')) {
    const m = /^cmdstat_(evalsha|eval):calls=(\d+),usec=(\d+)/.exec(line);
    if (m) {
      calls += Number(m[2]);
      usec += Number(m[3]);
    }
  }
  return { usec, calls };
}

async function measure(admin: Redis, side: Side, schools: number, calls: number): Promise<Figures> {
  for (let i = 0; i < WARMUP_CALLS; i++) await side.call(schools);
  const stats = await scriptStats(admin);
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < calls; i++) await side.call(schools);
  const wall = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const after = await scriptStats(admin);
  // Redis's figures are every client's: scripts another client ran meanwhile would count as ours.
  if (after.calls - stats.calls !== calls) throw new Error(`Redis ran ${after.calls - stats.calls - calls} other scripts meanwhile: measure on a Redis nothing else uses`);
  return { clientMicros: (used.user + used.system) / calls, wallMicros: (wall * 1000) / calls, redisMicros: (after.usec - stats.usec) / calls };
}

/** Removes every key of this run (the counters would expire; the usage hash would not). */
async function removeKeys(admin: Redis, run: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `school-data:*${run}*`, 'COUNT', 1000);
    if (keys.length > 0) await admin.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { schools: { type: 'string' }, calls: { type: 'string' }, rounds: { type: 'string' }, help: { type: 'boolean' } } });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const url = process.env.REDIS_URL;
  if (!url) throw new Error('set REDIS_URL to the Redis to measure');
  const whole = (value: string | undefined, fallback: number, name: string, min: number, max: number) => {
    const n = numberOption(value, fallback, name, min, max);
    if (!Number.isInteger(n)) throw new Error(`--${name} must be a whole number`);
    return n;
  };
  const schoolCounts = (values.schools ?? '1,5,20,50').split(',').map((s) => whole(s, 1, 'schools', 1, 500));
  const calls = whole(values.calls, 3000, 'calls', 100, 1_000_000);
  const rounds = whole(values.rounds, 3, 'rounds', 1, 100);

  const run = randomUUID();
  const admin = new Redis(url, { maxRetriesPerRequest: 1 });
  admin.on('error', () => undefined);
  const limiter = new RedisRateLimiter(url, 2000);
  limiter.shareUsage(`bench-${run}`, () => undefined);
  const floor = floorCounter(url);
  const closeAll = async () => {
    floor.disconnect();
    await limiter.close();
    admin.disconnect();
  };
  const tidy = async () => {
    // A Redis that went away leaves its keys: the error that stopped the run is the one to report.
    await removeKeys(admin, run).catch(() => undefined);
    await closeAll();
  };
  const forget = onInterrupt(tidy);
  if (!(await limiter.ready(5000))) {
    forget();
    await closeAll();
    throw new Error(`Redis at ${url} did not answer`);
  }
  const floorKeys = Array.from({ length: 500 }, (_, i) => `school-data:floor:${run}:${i}`);
  const sides: Side[] = [
    {
      name: 'service',
      call: (schools) => Promise.all(Array.from({ length: schools }, (_, i) => limiter.consume(`school-${i}`, LIMIT, `key-${i}`))),
    },
    { name: 'floor', call: (schools) => floor.count(floorKeys.slice(0, schools), floorKeys.slice(0, schools).map(() => 1)) },
  ];

  try {
    process.stdout.write(`per call, medians of ${rounds} rounds of ${calls} calls each (client: this process's CPU; Redis: its CPU running the script)\n\n`);
    process.stdout.write('| schools a call | service client CPU µs | floor | service wall µs | floor | service Redis CPU µs | floor |\n|---:|---:|---:|---:|---:|---:|---:|\n');
    for (const schools of schoolCounts) {
      const got: Record<string, Figures[]> = { service: [], floor: [] };
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? sides : [...sides].reverse();
        for (const side of order) got[side.name]!.push(await measure(admin, side, schools, calls));
      }
      const m = (name: string, field: keyof Figures) => median(got[name]!.map((f) => f[field])).toFixed(1);
      process.stdout.write(`| ${schools} | ${m('service', 'clientMicros')} | ${m('floor', 'clientMicros')} | ${m('service', 'wallMicros')} | ${m('floor', 'wallMicros')} | ${m('service', 'redisMicros')} | ${m('floor', 'redisMicros')} |\n`);
    }
  } finally {
    forget();
    await tidy();
  }
  return 0;
}

runMain('bench:redis-call', main);
