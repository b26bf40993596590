/**
 * The browser the end-to-end tests drive: headless Chromium from the npm registry
 * (@sparticuz/chromium, pinned in the lockfile and unpacked to the temporary directory on
 * first launch), so `npm ci && npm test` needs nothing else on the machine. A Chromium of
 * the machine's own may be named with SCHOOL_DATA_CHROMIUM instead.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
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

/** How long a test waits for another process's unpacking, and when a lock is left over from a killed one. */
const UNPACK_WAIT_MS = 180_000;

/**
 * The unpacked Chromium. Its package writes the binary straight to its final path, so two
 * test files starting at once could run a half-written one (ETXTBSY) or write it twice: one
 * process unpacks at a time, under a lock directory, and a marker written after a whole
 * unpacking tells a finished binary from one a killed process left half-written.
 */
async function unpackedChromium(): Promise<string> {
  const lock = path.join(os.tmpdir(), 'school-data-chromium.lock');
  const ready = path.join(os.tmpdir(), 'school-data-chromium.ready');
  const deadline = Date.now() + UNPACK_WAIT_MS;
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const age = Date.now() - (fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > UNPACK_WAIT_MS) fs.rmSync(lock, { recursive: true, force: true });
      else if (Date.now() > deadline) throw new Error(`Chromium: still locked by another process (${lock})`, { cause: err });
      else await sleep(100);
    }
  }
  try {
    if (!fs.existsSync(ready)) fs.rmSync(path.join(os.tmpdir(), 'chromium'), { force: true });
    const executable = await sparticuz.executablePath();
    fs.writeFileSync(ready, executable);
    return executable;
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

export async function launchBrowser(): Promise<Browser> {
  const own = process.env.SCHOOL_DATA_CHROMIUM;
  if (own !== undefined && own !== '' && !fs.existsSync(own)) throw new Error(`SCHOOL_DATA_CHROMIUM: no file at ${own}`);
  const executablePath = own || (await unpackedChromium());
  return chromium.launch({ executablePath, args: ARGS, headless: true });
}
