/**
 * The browser the end-to-end tests drive: headless Chromium from the npm registry
 * (@sparticuz/chromium, pinned in the lockfile and unpacked to the temporary directory on
 * first launch), so `npm ci && npm test` needs nothing else on the machine. A Chromium of
 * the machine's own may be named with SCHOOL_DATA_CHROMIUM instead.
 */
import fs from 'node:fs';
import sparticuz from '@sparticuz/chromium';
import { chromium, type Browser } from 'playwright-core';

/**
 * Flags for a root user in a container with no display and a closed network: no sandbox
 * (it needs user namespaces), software GL, and none of Chromium's background connections.
 */
const ARGS = [
  '--no-sandbox',
  '--no-zygote',
  '--disable-gpu',
  '--use-gl=angle',
  '--use-angle=swiftshader',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-domain-reliability',
  '--disable-sync',
  '--no-first-run',
  '--no-default-browser-check',
  '--font-render-hinting=none',
];

export async function launchBrowser(): Promise<Browser> {
  const own = process.env.SCHOOL_DATA_CHROMIUM;
  if (own !== undefined && own !== '' && !fs.existsSync(own)) throw new Error(`SCHOOL_DATA_CHROMIUM: no file at ${own}`);
  const executablePath = own || (await sparticuz.executablePath());
  return chromium.launch({ executablePath, args: ARGS, headless: true });
}
