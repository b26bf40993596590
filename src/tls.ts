/**
 * TLS material for the listeners: the configured PEM files (refused when they do not match
 * or the certificate has expired), or a self-signed certificate for localhost / 127.0.0.1 /
 * ::1, generated once into the data directory and reused on every later start.
 */
import { createPrivateKey, randomUUID, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { ConfigError, ensureDirectory, settingNamed, type Config } from './config/index.js';

export interface TlsMaterial {
  key: string;
  cert: string;
  /** The certificate file clients can trust (curl --cacert). */
  certPath: string;
}

export function selfSignedPaths(dataDir: string): { cert: string; key: string } {
  const dir = path.join(dataDir, 'tls');
  return { cert: path.join(dir, 'cert.pem'), key: path.join(dir, 'key.pem') };
}

/** A file a setting names, or a ConfigError naming the setting. */
function readSetting(env: string, file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${env}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** A certificate's end of validity, or null when it holds none that Node can read. */
function validUntil(cert: string): Date | null {
  try {
    return new Date(new X509Certificate(cert).validTo);
  } catch {
    return null;
  }
}

/**
 * Why `key` cannot serve `cert` (its first certificate, the server's own), or null when it
 * can. OpenSSL compares a key only with a certificate of the key's type: an RSA key beside
 * an EC certificate passes it, and every handshake then fails; so the public keys are
 * compared too.
 */
function pairProblem(cert: string, key: string): string | null {
  // The service takes no passphrase: OpenSSL's word for it would be "bad decrypt".
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|^Proc-Type: 4,ENCRYPTED/m.test(key)) return 'the private key is encrypted: give it unencrypted (the service asks for no passphrase)';
  try {
    tls.createSecureContext({ cert, key });
    if (new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) return null;
  } catch (err) {
    return laterInChain(cert, key) ?? (err as Error).message;
  }
  return laterInChain(cert, key) ?? "the private key is not the certificate's";
}

/** Said when the key is that of a certificate after the first in the file: a chain written leaf last. */
function laterInChain(cert: string, key: string): string | null {
  try {
    const blocks = cert.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
    const privateKey = createPrivateKey(key);
    const at = blocks.findIndex((block, i) => i > 0 && new X509Certificate(block).checkPrivateKey(privateKey));
    return at > 0 ? `the private key is that of certificate ${at + 1} in the file: the server's own certificate comes first, then the chain` : null;
  } catch {
    return null;
  }
}

export async function loadTls(config: Pick<Config, 'tlsCert' | 'tlsKey' | 'dataDir'>): Promise<TlsMaterial> {
  if (config.tlsCert && config.tlsKey) {
    const cert = readSetting('SCHOOL_DATA_TLS_CERT', config.tlsCert);
    const key = readSetting('SCHOOL_DATA_TLS_KEY', config.tlsKey);
    const problem = pairProblem(cert, key);
    if (problem !== null) throw new ConfigError(`SCHOOL_DATA_TLS_CERT and SCHOOL_DATA_TLS_KEY must name a PEM certificate and its private key (${problem})`);
    // Served, an expired certificate fails every client's handshake: said at start instead.
    const until = validUntil(cert);
    if (until !== null && until.getTime() <= Date.now()) {
      throw new ConfigError(`SCHOOL_DATA_TLS_CERT: the certificate in ${config.tlsCert} expired on ${until.toISOString()}; renew it`);
    }
    return { cert, key, certPath: config.tlsCert };
  }
  return selfSigned(config.dataDir, settingNamed(config, 'dataDir'));
}

/** The self-signed pair in `paths`: whole, expired (with its end), broken (the files do not match, or hold no certificate), or absent. */
type Pair = { state: 'whole'; material: TlsMaterial } | { state: 'expired'; until: Date } | { state: 'broken' | 'absent' };

function readPair(paths: { cert: string; key: string }, named: string): Pair {
  let cert: string;
  let key: string;
  try {
    cert = fs.readFileSync(paths.cert, 'utf8');
    key = fs.readFileSync(paths.key, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { state: 'absent' };
    throw new ConfigError(`${named}: cannot read the certificate in ${path.dirname(paths.cert)} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  if (pairProblem(cert, key) !== null) return { state: 'broken' };
  const until = validUntil(cert);
  if (until === null) return { state: 'broken' };
  if (until.getTime() <= Date.now()) return { state: 'expired', until };
  return { state: 'whole', material: { cert, key, certPath: paths.cert } };
}

/** How long a start waits for another making the certificate, and after how long its mark is taken as left by a start that died. */
const MAKING_WAIT_MS = 30_000;
const MAKING_STALE_MS = 20_000;

/**
 * The self-signed certificate of the data directory, made once: when there is none, or
 * the pair there is broken (the files do not match, or hold no certificate; a start that
 * died while writing could leave that). An expired one stops the start (a new one is made
 * once the directory is removed): clients that trust the old one must be told. One start at
 * a time makes it (a `.making` file, created exclusively), so starts at once on a new data
 * directory all take the same pair. `named` is how messages name the data directory's setting.
 */
async function selfSigned(dataDir: string, named: string): Promise<TlsMaterial> {
  const paths = selfSignedPaths(dataDir);
  const dir = path.dirname(paths.cert);
  const usable = (pair: Pair): TlsMaterial | null => {
    if (pair.state === 'expired') {
      throw new ConfigError(`${named}: the self-signed certificate in ${dir} expired on ${pair.until.toISOString()}: remove ${dir} to have a new one made at the next start`);
    }
    return pair.state === 'whole' ? pair.material : null;
  };
  const kept = usable(readPair(paths, named));
  if (kept !== null) return kept;
  ensureDirectory(dir, named);
  const making = path.join(dir, '.making');
  // What this start writes in the mark: it removes only a mark that still holds it.
  const mine = `${process.pid} ${randomUUID()}`;
  const markHolds = (token: string) => {
    try {
      return fs.readFileSync(making, 'utf8') === token;
    } catch {
      return false;
    }
  };
  const deadline = performance.now() + MAKING_WAIT_MS;
  for (;;) {
    try {
      fs.writeFileSync(making, mine, { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw writeError(err, dir, named);
    }
    const made = usable(readPair(paths, named));
    if (made !== null) return made;
    let theirs: string | null = null;
    try {
      if (Date.now() - fs.statSync(making).mtimeMs > MAKING_STALE_MS) theirs = fs.readFileSync(making, 'utf8');
    } catch {
      // Gone meanwhile: taken again at once.
      continue;
    }
    // Left by a start that died: removed, unless another start has just taken its place.
    if (theirs !== null && markHolds(theirs)) {
      try {
        fs.rmSync(making, { force: true });
      } catch (err) {
        throw writeError(err, dir, named);
      }
    } else if (performance.now() > deadline) {
      throw new ConfigError(`${named}: another start has been making the certificate in ${dir} for ${MAKING_WAIT_MS / 1000} s; if none is running, remove ${making}`);
    } else await sleep(50);
  }
  try {
    // Made meanwhile by the start that held the mark before.
    const made = usable(readPair(paths, named));
    if (made !== null) return made;
    const own = await makeSelfSigned(paths, named);
    // Should another start have written meanwhile (its mark taken as stale), the pair on disk is the one to serve.
    return usable(readPair(paths, named)) ?? own;
  } finally {
    if (markHolds(mine)) fs.rmSync(making, { force: true });
  }
}

/** A failure to write into the data directory, named (a full disk is left to the command's own words for it). */
function writeError(err: unknown, dir: string, named: string): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'EACCES' || code === 'EPERM' || code === 'EROFS' ? new ConfigError(`${named}: cannot write the self-signed certificate into ${dir} (${code}): this user needs to be able to write the data directory`) : err;
}

/** A start's temporary files of the pair: `key.pem.<pid>.tmp`, `cert.pem.<pid>.tmp`. */
const LEFTOVER = /^(key|cert)\.pem\.(\d+)\.tmp$/;

/** Removes the temporary files of starts no longer running (a private key among them). */
function removeLeftovers(dir: string): void {
  for (const name of fs.readdirSync(dir)) {
    const pid = LEFTOVER.exec(name)?.[2];
    if (pid === undefined || Number(pid) === process.pid || running(Number(pid))) continue;
    fs.rmSync(path.join(dir, name), { force: true });
  }
}

/** Whether a process of this id runs (one of another user's counts: it may not be signalled). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function makeSelfSigned(paths: { cert: string; key: string }, named: string): Promise<TlsMaterial> {
  const notAfter = new Date();
  notAfter.setFullYear(notAfter.getFullYear() + 5);
  // Loaded only when a certificate is made: every later start reads the files.
  const { generate } = await import('selfsigned');
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notAfterDate: notAfter,
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', digitalSignature: true, keyCertSign: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  });
  // Written to temporary names and renamed, so a start never reads half a file. A write that
  // fails (a full disk) leaves none of them behind; those of a start killed while it wrote are
  // removed by the next one to make a pair (it holds the mark: no other start is writing).
  const suffix = `.${process.pid}.tmp`;
  try {
    removeLeftovers(path.dirname(paths.cert));
    fs.writeFileSync(paths.key + suffix, pems.private, { mode: 0o600 });
    fs.writeFileSync(paths.cert + suffix, pems.cert);
    fs.renameSync(paths.key + suffix, paths.key);
    fs.renameSync(paths.cert + suffix, paths.cert);
  } catch (err) {
    for (const file of [paths.key, paths.cert]) {
      try {
        fs.rmSync(file + suffix, { force: true });
      } catch {
        // The write's own error is the one to report.
      }
    }
    throw writeError(err, path.dirname(paths.cert), named);
  }
  return { cert: pems.cert, key: pems.private, certPath: paths.cert };
}
