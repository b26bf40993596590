/**
 * The benchmark's baselines (bench/bare-server.ts), run as the benchmark runs them: the bare
 * server answers a fixed body of the size asked, and the floor does the contract's work for
 * each answer (a key asked for, the answer's headers, the key's count, an access line), so
 * that the floor it reports is what it claims to be.
 * @store-free
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { selfSignedPaths, loadTls } from '../../src/tls.js';
import { startBareServer, type BareServer } from '../../bench/servers.js';

interface Got {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function get(port: number, ca: string, authorization?: string): Promise<Got> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
    const request = https.get({ host: '127.0.0.1', port, path: '/api/public/v1/students?limit=50', ca, servername: 'localhost', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    request.on('error', reject);
  });
}

describe('bench: the bare and floor baselines', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-baselines-'));
  const logFile = path.join(dataDir, 'floor.log');
  let ca = '';
  let bare: BareServer;
  let floor: BareServer;

  before(async () => {
    ca = (await loadTls({ tlsCert: null, tlsKey: null, dataDir })).cert;
    const paths = selfSignedPaths(dataDir);
    [bare, floor] = await Promise.all([startBareServer(paths.cert, paths.key), startBareServer(paths.cert, paths.key, { logFile })]);
    await Promise.all([bare.setBodySize(2000), floor.setBodySize(2000)]);
  });

  after(async () => {
    await Promise.all([bare?.stop(), floor?.stop()]);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('the bare server answers the body of the size asked, with no more than its type and length', async () => {
    const got = await get(bare.port, ca);
    assert.equal(got.status, 200);
    assert.equal(got.body.length, 2000);
    assert.equal(got.headers['x-request-id'], undefined);
  });

  it('the floor refuses a request without a key and answers one with a key as the service would, its access line written', async () => {
    assert.equal((await get(floor.port, ca)).status, 401);
    const first = await get(floor.port, ca, 'Bearer sk_live_one');
    const second = await get(floor.port, ca, 'Bearer sk_live_one');
    for (const got of [first, second]) {
      assert.equal(got.status, 200);
      assert.equal(got.body.length, 2000);
      assert.match(String(got.headers['x-request-id']), /^[0-9a-f-]{36}$/);
      for (const name of ['strict-transport-security', 'x-content-type-options', 'cache-control', 'ratelimit-policy', 'vary', 'etag']) assert.ok(got.headers[name], name);
    }
    assert.notEqual(first.headers['x-request-id'], second.headers['x-request-id']);
    // The key's requests are counted: the second leaves one fewer.
    const remaining = (got: Got) => Number(/r=(\d+)/.exec(String(got.headers.ratelimit))![1]);
    assert.equal(remaining(first) - remaining(second), 1);
    // Each answer has its access line, with its request id, once the turn is over.
    const deadline = Date.now() + 5000;
    while (!fs.readFileSync(logFile, 'utf8').includes(String(second.headers['x-request-id'])) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const lines = fs.readFileSync(logFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { requestId: string; res: { statusCode: number } });
    assert.deepEqual(lines.map((l) => l.requestId), [first.headers['x-request-id'], second.headers['x-request-id']]);
    assert.ok(lines.every((l) => l.res.statusCode === 200));
  });
});
