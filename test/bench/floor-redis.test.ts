/**
 * The floor of a stored answer with its counts in Redis (bench/bare-server.ts given a Redis
 * URL), as `npm run bench:compare -- --floor` starts it when REDIS_URL is set: each school's
 * requests are counted in Redis before they are answered, the requests of one turn in one
 * call, each answer carrying its own place in the count.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { selfSignedPaths, loadTls } from '../../src/tls.js';
import { startBareServer, type BareServer } from '../../bench/servers.js';
import { httpsClient, type TestResponse } from '../helpers/http.js';
import { REDIS_ONLY } from '../helpers/redis.js';

/** The remaining requests and seconds to the window's end an answer's RateLimit header gives. */
function rateLimit(res: TestResponse): { remaining: number; reset: number } {
  const match = /r=(\d+);t=(\d+)/.exec(String(res.headers.ratelimit));
  assert.ok(match, String(res.headers.ratelimit));
  return { remaining: Number(match[1]), reset: Number(match[2]) };
}

describe('bench: the floor counting in Redis', { skip: REDIS_ONLY }, () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-floor-redis-'));
  let floor: BareServer;
  let client: ReturnType<typeof httpsClient>;
  let redis: Redis;

  before(async () => {
    const { cert: ca } = await loadTls({ tlsCert: null, tlsKey: null, dataDir });
    const paths = selfSignedPaths(dataDir);
    floor = await startBareServer(paths.cert, paths.key, { logFile: path.join(dataDir, 'floor.log'), redisUrl: process.env.REDIS_URL });
    await floor.setBodySize(500);
    client = httpsClient(`https://127.0.0.1:${floor.port}`, ca);
    redis = new Redis(process.env.REDIS_URL!);
  });

  after(async () => {
    client?.close();
    redis?.disconnect();
    await floor?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('counts each request in Redis before it answers, requests of one turn each with its own place', async () => {
    const first = await client.request('/api/public/v1/students', { key: 'sk_live_floor_a' });
    assert.equal(first.status, 200);
    assert.equal(first.body.length, 500);
    // Sent together, the next three reach the server in one turn or a few: their counts follow on.
    const together = await Promise.all([1, 2, 3].map(() => client.request('/api/public/v1/students', { key: 'sk_live_floor_a' })));
    const remaining = [first, ...together].map((r) => rateLimit(r).remaining).sort((a, b) => b - a);
    assert.deepEqual(remaining, [0, 1, 2, 3].map((n) => remaining[0]! - n));
    for (const r of [first, ...together]) assert.ok(rateLimit(r).reset >= 1 && rateLimit(r).reset <= 60);
    // The count is Redis's: the school's key there holds the four requests, for a minute at most.
    const keys = await redis.keys(`school-data:floor:${floor.pid}:*`);
    const counts = await Promise.all(keys.map(async (k) => ({ count: Number(await redis.get(k)), ttl: await redis.pttl(k) })));
    const school = counts.find((c) => c.count === 4);
    assert.ok(school, JSON.stringify(counts));
    assert.ok(school.ttl > 0 && school.ttl <= 60_000);
    // Another key is another school, counted on its own.
    const other = await client.request('/api/public/v1/students', { key: 'sk_live_floor_b' });
    assert.equal(rateLimit(other).remaining, remaining[0]);
  });
});
