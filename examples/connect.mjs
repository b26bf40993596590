// @ts-check
/**
 * The connection every example uses, from the environment:
 *   SCHOOL_DATA_KEY  the school's API key (required)
 *   SCHOOL_DATA_URL  the service's base address (default https://127.0.0.1:8443, the demo)
 *   SCHOOL_DATA_CA   a PEM file to trust (default data/tls/cert.pem, the demo's self-signed certificate;
 *                    set it empty for a service with a certificate of a public authority)
 *
 * In your own project, install the package (`cd client && npm pack`, then `npm install
 * /path/to/school-data-client-0.1.0.tgz`) and import from '@school-data/client' instead of
 * the relative path below.
 */
import fs from 'node:fs';
import { SchoolDataClient, SchoolDataConnectionError, SchoolDataError } from '../client/dist/index.js';

/**
 * @param {{ throttle?: boolean }} [options] throttle: pace requests by the RateLimit header (for long exports)
 */
export function connect(options = {}) {
  const apiKey = process.env.SCHOOL_DATA_KEY;
  if (!apiKey) fail('set SCHOOL_DATA_KEY to the school\'s API key (service_pk_...)');
  const caFile = process.env.SCHOOL_DATA_CA ?? 'data/tls/cert.pem';
  let ca;
  if (caFile) {
    try {
      ca = fs.readFileSync(caFile);
    } catch {
      fail(`cannot read the certificate ${caFile} (SCHOOL_DATA_CA); set SCHOOL_DATA_CA= to trust Node.js's public authorities alone`);
    }
  }
  try {
    return new SchoolDataClient({ baseUrl: process.env.SCHOOL_DATA_URL || 'https://127.0.0.1:8443', apiKey, ca, throttle: options.throttle ?? false });
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  }
}

/**
 * Runs an example, turning the client's errors into one line on stderr and exit code 1.
 * A reader that stops early (`node examples/export-students-csv.mjs | head`) is not an
 * error: the example ends quietly, with exit code 0.
 */
export async function run(main) {
  process.stdout.on('error', (err) => {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'EPIPE') process.exit(0);
    throw err;
  });
  try {
    await main();
  } catch (err) {
    if (err instanceof SchoolDataError) fail(`${err.status} ${err.code}: ${err.detail}${err.requestId ? ` (request ${err.requestId})` : ''}`);
    if (err instanceof SchoolDataConnectionError) fail(`cannot reach the service: ${err.message}`);
    throw err;
  }
}

/**
 * Ends an example with one line on stderr and exit code 1, the one code of every failure
 * (a command line it does not take, a setting missing, an error of the service): no stack trace.
 * @param {string} message
 * @returns {never}
 */
export function fail(message) {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}
