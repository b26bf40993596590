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
import tls from 'node:tls';
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

/** The RateLimit headers of `count` answers to GETs of `path` with `key`, sent in one write on one connection (so one turn reads them all). */
function pipelined(port: number, ca: string, key: string, path: string, count: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${key}\r\n\r\n`.repeat(count));
    });
    let data = Buffer.alloc(0);
    const headers: string[] = [];
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      for (;;) {
        const end = data.indexOf('\r\n\r\n');
        if (end === -1) break;
        const head = data.subarray(0, end).toString('latin1');
        const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (data.length < end + 4 + length) break;
        headers.push(/^ratelimit: (.*)$/im.exec(head)?.[1] ?? '');
        data = data.subarray(end + 4 + length);
      }
      if (headers.length === count) {
        socket.end();
        resolve(headers);
      }
    });
    socket.on('error', reject);
  });
}

describe('bench: the floor counting in Redis', { skip: REDIS_ONLY }, () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-floor-redis-'));
  let floor: BareServer;
  let client: ReturnType<typeof httpsClient>;
  let redis: Redis;
  let ca = '';

  before(async () => {
    ca = (await loadTls({ tlsCert: null, tlsKey: null, dataDir })).cert;
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
    const limit = Number(/q=(\d+)/.exec(String(first.headers['ratelimit-policy']))![1]);
    assert.equal(rateLimit(first).remaining, limit - 1);
    assert.ok(rateLimit(first).reset >= 1 && rateLimit(first).reset <= 60);
    // Three requests in one write are read in one turn and counted by one call: each its own place.
    const three = await pipelined(floor.port, ca, 'sk_live_floor_a', '/api/public/v1/students', 3);
    assert.deepEqual(three.map((h) => Number(/r=(\d+)/.exec(h)![1])), [limit - 2, limit - 3, limit - 4]);
    // The count is Redis's: the school's key there holds the four requests, for a minute at most.
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', `school-data:floor:${floor.pid}:*`, 'COUNT', 1000);
      keys.push(...found);
      cursor = next;
    } while (cursor !== '0');
    const counts = await Promise.all(keys.map(async (k) => ({ count: Number(await redis.get(k)), ttl: await redis.pttl(k) })));
    assert.equal(counts.length, 1, JSON.stringify(counts));
    assert.equal(counts[0]!.count, 4);
    assert.ok(counts[0]!.ttl > 0 && counts[0]!.ttl <= 60_000);
    // Another key is another school, counted on its own.
    const other = await client.request('/api/public/v1/students', { key: 'sk_live_floor_b' });
    assert.equal(rateLimit(other).remaining, limit - 1);
  });
});
