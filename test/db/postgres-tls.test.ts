/**
 * TLS to PostgreSQL, through the real command line and `serve`: DATABASE_URL's sslmode
 * read as libpq reads it (require encrypts, verify-full also checks the certificate and the
 * host), no warning of the driver's on the output, and a connection PostgreSQL refuses
 * (TLS, a database that does not exist) named in one line.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadTls } from '../../src/tls.js';
import { httpsClient } from '../helpers/http.js';
import { PgTlsProxy } from '../helpers/pg-tls.js';
import { runCli, startServe, type CliResult } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';
import { createTestStore, type TestStore } from '../helpers/store.js';
import { seedWorld } from '../helpers/world.js';

describe('TLS to PostgreSQL', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' }, () => {
  let store: TestStore;
  let proxy: PgTlsProxy;
  /** The same real server, as one without TLS. */
  let plain: PgTlsProxy;
  let certDir: string;
  let certPath: string;

  before(async () => {
    store = await createTestStore();
    certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sd-pg-tls-'));
    const material = await loadTls({ dataDir: certDir, tlsCert: null, tlsKey: null });
    certPath = material.certPath;
    const url = new URL(store.url!);
    proxy = await PgTlsProxy.start({ host: url.hostname, port: Number(url.port || 5432) }, material);
    plain = await PgTlsProxy.start({ host: url.hostname, port: Number(url.port || 5432) }, null);
  });
  after(async () => {
    await proxy.close();
    await plain.close();
    await store.close();
    fs.rmSync(certDir, { recursive: true, force: true });
  });

  /** The test store's URL through the TLS proxy (or the one without TLS), with `params` added. */
  const urlWith = (params: Record<string, string>, through = proxy) => {
    const url = new URL(store.url!);
    url.hostname = '127.0.0.1';
    url.port = String(through.port);
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    return url.toString();
  };
  const cli = (databaseUrl: string) => runCli(['school', 'list', '--json'], { ...process.env, DATABASE_URL: databaseUrl, SCHOOL_DATA_DIR: store.dataDir });
  const succeeds = (r: CliResult) => {
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    assert.ok(Array.isArray(JSON.parse(r.stdout)));
  };
  const refused = (r: CliResult, pattern: RegExp) => {
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr.trim().split('\n').length, 1, `not one line: ${r.stderr}`);
    assert.match(r.stderr.trim(), pattern);
  };

  it('sslmode=require encrypts without checking the certificate, as libpq does, and warns of nothing', async () => {
    const before = proxy.tlsSessions;
    succeeds(await cli(urlWith({ sslmode: 'require' })));
    assert.ok(proxy.tlsSessions > before, 'no TLS session');
  });

  it('sslmode=verify-full checks the certificate: refused without its authority, taken with it', async () => {
    refused(await cli(urlWith({ sslmode: 'verify-full' })), /^school-data: PostgreSQL refused the connection: self[- ]signed certificate.* \(check DATABASE_URL\)$/);
    const before = proxy.tlsSessions;
    succeeds(await cli(urlWith({ sslmode: 'verify-full', sslrootcert: certPath })));
    assert.ok(proxy.tlsSessions > before, 'no TLS session');
  });

  it("node-postgres's own sslmode=no-verify encrypts without checking, as require does", async () => {
    const before = proxy.tlsSessions;
    succeeds(await cli(urlWith({ sslmode: 'no-verify' })));
    assert.ok(proxy.tlsSessions > before, 'no TLS session');
  });

  it('sslmode=disable connects in plain text', async () => {
    const before = proxy.tlsSessions;
    succeeds(await cli(urlWith({ sslmode: 'disable' })));
    assert.equal(proxy.tlsSessions, before);
  });

  it('a server without TLS, or without the database, is named in one line', async () => {
    refused(await cli(urlWith({ sslmode: 'require' }, plain)), /^school-data: PostgreSQL refused the connection: The server does not support SSL connections \(check DATABASE_URL\)$/);
    const url = new URL(store.url!);
    url.pathname = '/school_data_no_such_database';
    refused(await cli(url.toString()), /^school-data: PostgreSQL refused the connection: database "school_data_no_such_database" does not exist \(check DATABASE_URL\)$/);
  });

  it('serve answers over a TLS connection to PostgreSQL, with no warning on its output', async () => {
    const w = await seedWorld(store.db);
    const port = await freePort();
    const before = proxy.tlsSessions;
    const server = await startServe({ ...process.env, DATABASE_URL: urlWith({ sslmode: 'require' }), SCHOOL_DATA_DIR: store.dataDir, PORT: String(port), SCHOOL_DATA_RESPONSE_CACHE_MB: '0' });
    const tls = await loadTls({ dataDir: store.dataDir, tlsCert: null, tlsKey: null });
    const client = httpsClient(`https://127.0.0.1:${port}`, tls.cert);
    try {
      assert.equal((await client.request('/api/public/v1/students?limit=1', { key: w.a.key })).status, 200);
      assert.ok(proxy.tlsSessions > before, 'no TLS session');
    } finally {
      client.close();
      server.child.kill('SIGTERM');
    }
    assert.equal(await server.exited, 0);
    // pg's own warning of sslmode=require, several lines of plain text among the JSON logs.
    assert.doesNotMatch(server.output(), /warning/i);
  });
});
