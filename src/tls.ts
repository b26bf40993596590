/**
 * TLS material for the listeners: the configured PEM files, or a self-signed
 * certificate for localhost / 127.0.0.1 / ::1, generated once into the data
 * directory and reused on every later start.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ensureDirectory, type Config } from './config/index.js';

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

export async function loadTls(config: Pick<Config, 'tlsCert' | 'tlsKey' | 'dataDir'>): Promise<TlsMaterial> {
  if (config.tlsCert && config.tlsKey) {
    return { cert: fs.readFileSync(config.tlsCert, 'utf8'), key: fs.readFileSync(config.tlsKey, 'utf8'), certPath: config.tlsCert };
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
  const suffix = `.${process.pid}.tmp`;
  fs.writeFileSync(paths.key + suffix, pems.private, { mode: 0o600 });
  fs.writeFileSync(paths.cert + suffix, pems.cert);
  fs.renameSync(paths.key + suffix, paths.key);
  fs.renameSync(paths.cert + suffix, paths.cert);
  return { cert: pems.cert, key: pems.private, certPath: paths.cert };
}
