/**
 * TLS material for the listeners: the configured PEM files, or a self-signed
 * certificate for localhost / 127.0.0.1 / ::1, generated once into the data
 * directory and reused on every later start.
 */
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

export async function loadTls(config: Pick<Config, 'tlsCert' | 'tlsKey' | 'dataDir'>): Promise<TlsMaterial> {
  if (config.tlsCert && config.tlsKey) {
    const cert = readSetting('SCHOOL_DATA_TLS_CERT', config.tlsCert);
    const key = readSetting('SCHOOL_DATA_TLS_KEY', config.tlsKey);
    try {
      tls.createSecureContext({ cert, key });
    } catch (err) {
      throw new ConfigError(`SCHOOL_DATA_TLS_CERT and SCHOOL_DATA_TLS_KEY must name a PEM certificate and its private key (${(err as Error).message})`);
    }
    return { cert, key, certPath: config.tlsCert };
  }
  const paths = selfSignedPaths(config.dataDir);
  if (fs.existsSync(paths.cert) && fs.existsSync(paths.key)) {
    return { cert: fs.readFileSync(paths.cert, 'utf8'), key: fs.readFileSync(paths.key, 'utf8'), certPath: paths.cert };
  }
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
  ensureDirectory(path.dirname(paths.cert), 'SCHOOL_DATA_DIR');
  // Written to temporary names and renamed, so concurrent first starts never read half a file.
  // A write that fails (a full disk) leaves none of them behind.
  const suffix = `.${process.pid}.tmp`;
  try {
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
    throw err;
  }
  return { cert: pems.cert, key: pems.private, certPath: paths.cert };
}
