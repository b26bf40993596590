/**
 * TLS material for the listeners: the configured PEM files (refused when they do not match
 * or the certificate has expired), or a self-signed certificate for localhost / 127.0.0.1 /
 * ::1, generated into the data directory and reused on every later start while it is whole
 * and not near its end.
 */
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { ConfigError, ensureDirectory, type Config } from './config/index.js';

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

export async function loadTls(config: Pick<Config, 'tlsCert' | 'tlsKey' | 'dataDir'>): Promise<TlsMaterial> {
  if (config.tlsCert && config.tlsKey) {
    const cert = readSetting('SCHOOL_DATA_TLS_CERT', config.tlsCert);
    const key = readSetting('SCHOOL_DATA_TLS_KEY', config.tlsKey);
    try {
      tls.createSecureContext({ cert, key });
    } catch (err) {
      throw new ConfigError(`SCHOOL_DATA_TLS_CERT and SCHOOL_DATA_TLS_KEY must name a PEM certificate and its private key (${(err as Error).message})`);
    }
    // Served, an expired certificate fails every client's handshake: said at start instead.
    const until = validUntil(cert);
    if (until !== null && until.getTime() <= Date.now()) {
      throw new ConfigError(`SCHOOL_DATA_TLS_CERT: the certificate in ${config.tlsCert} expired on ${until.toISOString()}; renew it`);
    }
    return { cert, key, certPath: config.tlsCert };
  }
  return selfSigned(config.dataDir);
}

/** How long before its end a self-signed certificate is made anew at a start (a server runs on with the one it read). */
const RENEW_BEFORE_MS = 30 * 86_400_000;

/** The self-signed pair in `paths`, when both files are there, match, and are not near their end; else null. */
function usablePair(paths: { cert: string; key: string }): TlsMaterial | null {
  let cert: string;
  let key: string;
  try {
    cert = fs.readFileSync(paths.cert, 'utf8');
    key = fs.readFileSync(paths.key, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ConfigError(`SCHOOL_DATA_DIR: cannot read the certificate in ${path.dirname(paths.cert)} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  try {
    tls.createSecureContext({ cert, key });
  } catch {
    return null;
  }
  const until = validUntil(cert);
  if (until === null || until.getTime() - RENEW_BEFORE_MS <= Date.now()) return null;
  return { cert, key, certPath: paths.cert };
}

/**
 * The self-signed certificate of the data directory: the one there, or one made now when
 * there is none, or the one there is broken (the files do not match, or cannot be read as a
 * certificate) or within RENEW_BEFORE_MS of its end.
 */
async function selfSigned(dataDir: string): Promise<TlsMaterial> {
  const paths = selfSignedPaths(dataDir);
  const kept = usablePair(paths);
  if (kept !== null) return kept;
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
  ensureDirectory(dataDir, 'SCHOOL_DATA_DIR');
  // The pair is written into a directory of its own, which then takes the place of `tls/` in
  // one rename: a start never reads half a file or one start's key with another's certificate.
  // When starts race, the first rename wins and the others take its pair.
  const dir = path.dirname(paths.cert);
  let staging: string | null = null;
  try {
    staging = fs.mkdtempSync(path.join(dataDir, '.tls-'));
    // As a directory made for it would be (mkdtemp makes it private); the key file stays private.
    fs.chmodSync(staging, 0o755);
    fs.writeFileSync(path.join(staging, path.basename(paths.key)), pems.private, { mode: 0o600 });
    fs.writeFileSync(path.join(staging, path.basename(paths.cert)), pems.cert);
    // What is there is no usable pair (looked at again: another start may just have made one).
    if (usablePair(paths) === null) fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(staging, dir);
    staging = null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const theirs = code === 'ENOTEMPTY' || code === 'EEXIST' ? usablePair(paths) : null;
    if (theirs !== null) return theirs;
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`SCHOOL_DATA_DIR: cannot write the self-signed certificate into ${dir} (${code ?? (err as Error).message})`);
  } finally {
    if (staging !== null) fs.rmSync(staging, { recursive: true, force: true });
  }
  return { cert: pems.cert, key: pems.private, certPath: paths.cert };
}
