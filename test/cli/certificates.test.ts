/**
 * The server's certificate (src/tls.ts): a configured one that has expired stops the start
 * in one line; the self-signed one of the data directory is made once, again only when the
 * pair there is broken (a key of another certificate, a file that is no certificate), an
 * expired one stops the start, and starts that make it at once all take one whole pair.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { generate } from 'selfsigned';
import { loadTls, selfSignedPaths } from '../../src/tls.js';
import { runCli } from '../helpers/processes.js';

describe('the server\'s certificate', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-certs-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  const pair = (notAfterDate: Date, notBeforeDate = new Date(notAfterDate.getTime() - 86_400_000 * 365)) =>
    generate([{ name: 'commonName', value: 'localhost' }], { keyType: 'ec', curve: 'P-256', algorithm: 'sha256', notBeforeDate, notAfterDate });
  const matches = (paths: { cert: string; key: string }) => {
    const [cert, key] = [fs.readFileSync(paths.cert), fs.readFileSync(paths.key)];
    tls.createSecureContext({ cert, key });
    const x509 = new X509Certificate(cert);
    assert.ok(x509.checkPrivateKey(createPrivateKey(key)), "the key is the certificate's");
    return new Date(x509.validTo);
  };

  /** An RSA pair: OpenSSL's own check of a key against a certificate compares keys of one type only. */
  let rsa: Awaited<ReturnType<typeof generate>>;
  before(async () => {
    rsa = await generate([{ name: 'commonName', value: 'localhost' }], { keyType: 'rsa', keySize: 2048, algorithm: 'sha256' });
  });

  it('refuses a configured private key that is not the certificate\'s, of its type or another, in one line', async () => {
    const ec = await pair(new Date(Date.now() + 86_400_000 * 365));
    const other = await pair(new Date(Date.now() + 86_400_000 * 365));
    for (const [what, cert, key] of [
      ['an RSA certificate, an EC key', rsa.cert, ec.private],
      ['an EC certificate, an RSA key', ec.cert, rsa.private],
      ['an EC certificate, the key of another', ec.cert, other.private],
    ] as const) {
      const certFile = path.join(dir, 'mixed-cert.pem');
      const keyFile = path.join(dir, 'mixed-key.pem');
      fs.writeFileSync(certFile, cert);
      fs.writeFileSync(keyFile, key);
      await assert.rejects(loadTls({ tlsCert: certFile, tlsKey: keyFile, dataDir: path.join(dir, 'data-mixed') }), (err: unknown) =>
        err instanceof Error && /^SCHOOL_DATA_TLS_CERT and SCHOOL_DATA_TLS_KEY must name a PEM certificate and its private key \(.+\)$/.test(err.message), what);
    }
    // Two mistakes of a hand-made pair, said in words of their own.
    const refusal = async (cert: string, key: string) => {
      fs.writeFileSync(path.join(dir, 'mixed-cert.pem'), cert);
      fs.writeFileSync(path.join(dir, 'mixed-key.pem'), key);
      const err = await loadTls({ tlsCert: path.join(dir, 'mixed-cert.pem'), tlsKey: path.join(dir, 'mixed-key.pem'), dataDir: path.join(dir, 'data-mixed') }).then(() => null, (e: unknown) => e);
      return err instanceof Error ? err.message : 'accepted';
    };
    assert.match(await refusal(`${other.cert}\n${ec.cert}`, ec.private), /\(the private key is that of certificate 2 in the file: the server's own certificate comes first, then the chain\)$/);
    const encrypted = createPrivateKey(ec.private).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }) as string;
    assert.match(await refusal(ec.cert, encrypted), /\(the private key is encrypted: give it unencrypted \(the service asks for no passphrase\)\)$/);
    assert.equal(await refusal(`${ec.cert}\n${other.cert}`, ec.private), 'accepted', 'the server\'s own certificate first, then the chain');
    fs.writeFileSync(path.join(dir, 'mixed-key.pem'), rsa.private);
    fs.writeFileSync(path.join(dir, 'mixed-cert.pem'), rsa.cert);
    assert.equal((await loadTls({ tlsCert: path.join(dir, 'mixed-cert.pem'), tlsKey: path.join(dir, 'mixed-key.pem'), dataDir: path.join(dir, 'data-mixed') })).cert, rsa.cert, 'a pair of its own is taken');
  });

  it('refuses a configured certificate that has expired, in one line naming the setting and the date', async () => {
    const expired = await pair(new Date('2024-01-01T00:00:00Z'));
    const cert = path.join(dir, 'expired-cert.pem');
    const key = path.join(dir, 'expired-key.pem');
    fs.writeFileSync(cert, expired.cert);
    fs.writeFileSync(key, expired.private);
    const r = await runCli(['serve'], { ...process.env, DATABASE_URL: '', REDIS_URL: '', SCHOOL_DATA_DIR: path.join(dir, 'data-expired'), SCHOOL_DATA_TLS_CERT: cert, SCHOOL_DATA_TLS_KEY: key });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /^school-data: SCHOOL_DATA_TLS_CERT: the certificate in \S+expired-cert\.pem expired on 2024-01-01T00:00:00\.000Z; renew it\n$/);
  });

  it('makes the self-signed certificate again when the pair there does not match or is no certificate; keeps one near its end, refuses an expired one', async () => {
    const dataDir = path.join(dir, 'data-broken');
    const paths = selfSignedPaths(dataDir);
    const first = await loadTls({ tlsCert: '', tlsKey: '', dataDir });
    assert.equal(first.cert, fs.readFileSync(paths.cert, 'utf8'));
    assert.equal((await loadTls({ tlsCert: '', tlsKey: '', dataDir })).cert, first.cert, 'a whole pair is kept');
    const other = await pair(new Date(Date.now() + 86_400_000 * 365));
    for (const [what, cert, key] of [
      ['a key of another certificate', first.cert, other.private],
      ['a key of another type', first.cert, rsa.private],
      ['a file that is no certificate', 'not a certificate', first.key],
    ] as const) {
      fs.writeFileSync(paths.cert, cert);
      fs.writeFileSync(paths.key, key);
      const made = await loadTls({ tlsCert: '', tlsKey: '', dataDir });
      const until = matches(paths);
      assert.equal(made.cert, fs.readFileSync(paths.cert, 'utf8'), what);
      assert.ok(until.getTime() > Date.now() + 86_400_000 * 365 * 4, `${what}: valid until ${until.toISOString()}`);
    }
    // Made once: one five days from its end is still the one.
    const soon = await pair(new Date(Date.now() + 86_400_000 * 5));
    fs.writeFileSync(paths.cert, soon.cert);
    fs.writeFileSync(paths.key, soon.private);
    assert.equal((await loadTls({ tlsCert: '', tlsKey: '', dataDir })).cert, soon.cert);
    const expired = await pair(new Date('2024-01-01T00:00:00Z'));
    fs.writeFileSync(paths.cert, expired.cert);
    fs.writeFileSync(paths.key, expired.private);
    await assert.rejects(loadTls({ tlsCert: '', tlsKey: '', dataDir }), /^ConfigError: SCHOOL_DATA_DIR: the self-signed certificate in \S+ expired on 2024-01-01T00:00:00\.000Z: remove \S+ to have a new one made at the next start$/);
    // A mark left by a start that died while making it is not waited for long.
    fs.rmSync(path.dirname(paths.cert), { recursive: true });
    fs.mkdirSync(path.dirname(paths.cert));
    const mark = path.join(path.dirname(paths.cert), '.making');
    fs.writeFileSync(mark, '');
    fs.utimesSync(mark, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    // So are the files it was writing (a private key among them); a running start's are its own.
    const dead = spawnSync(process.execPath, ['-e', '0']).pid;
    const tlsDir = path.dirname(paths.cert);
    for (const name of [`key.pem.${dead}.tmp`, `cert.pem.${dead}.tmp`, `key.pem.${process.ppid}.tmp`]) fs.writeFileSync(path.join(tlsDir, name), 'half');
    await loadTls({ tlsCert: '', tlsKey: '', dataDir });
    matches(paths);
    assert.deepEqual(fs.readdirSync(tlsDir).sort(), ['cert.pem', 'key.pem', `key.pem.${process.ppid}.tmp`]);
  });

  it('leaves one whole pair when several starts make it at once', async () => {
    const dataDir = path.join(dir, 'data-race');
    const tlsModule = new URL('../../src/tls.ts', import.meta.url).href;
    const script = `const { loadTls } = await import(${JSON.stringify(tlsModule)}); const m = await loadTls({ tlsCert: '', tlsKey: '', dataDir: ${JSON.stringify(dataDir)} }); process.stdout.write(m.cert);`;
    const runs = await Promise.all(
      Array.from({ length: 4 }, () =>
        new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
          const child = spawn(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
          let out = '';
          let err = '';
          child.stdout.on('data', (c: Buffer) => (out += c.toString()));
          child.stderr.on('data', (c: Buffer) => (err += c.toString()));
          child.on('close', (code) => resolve({ code, out, err }));
        }),
      ),
    );
    for (const run of runs) assert.equal(run.code, 0, run.err);
    const paths = selfSignedPaths(dataDir);
    matches(paths);
    const onDisk = fs.readFileSync(paths.cert, 'utf8');
    assert.ok(runs.every((run) => run.out === onDisk), 'every start took the pair on disk');
    assert.deepEqual(fs.readdirSync(path.dirname(paths.cert)).sort(), ['cert.pem', 'key.pem'], 'nothing else left');
  });
});
