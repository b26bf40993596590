/**
 * Lets Node.js run the project's TypeScript as it is (the tests, the benchmarks, the client
 * type generator): Node strips the types itself (on by default from Node.js 22.18), and this
 * hook resolves a relative `./x.js` written in a .ts file (the NodeNext convention) to the
 * file `./x.ts` beside it when there is one.
 *
 *   node --import ./scripts/ts-resolve.mjs test/x.test.ts
 *
 * The hook runs in the process's own thread (module.registerHooks), so it costs a file
 * check per such import and nothing else.
 *
 * Under scripts/test.mjs, SCHOOL_DATA_TEST_DEPS names a directory of dependencies bundled for
 * the run, with a map.json from each import specifier (`kysely`, `typebox/value`) to its file:
 * every import of one, the project's or a package's, loads the bundle instead.
 */
import fs from 'node:fs';
import path from 'node:path';
import { registerHooks } from 'node:module';

const TYPESCRIPT_PARENT = /\.[cm]?ts$/;
const bundled = process.env.SCHOOL_DATA_TEST_DEPS ? JSON.parse(fs.readFileSync(path.join(process.env.SCHOOL_DATA_TEST_DEPS, 'map.json'), 'utf8')) : {};

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (Object.hasOwn(bundled, specifier)) return { url: bundled[specifier], format: 'module', shortCircuit: true };
    if (specifier.startsWith('.') && context.parentURL !== undefined && TYPESCRIPT_PARENT.test(new URL(context.parentURL).pathname)) {
      const url = new URL(specifier, context.parentURL);
      if (url.pathname.endsWith('.js')) {
        url.pathname = `${url.pathname.slice(0, -3)}.ts`;
        if (fs.statSync(url, { throwIfNoEntry: false })?.isFile()) return nextResolve(url.href, context);
      }
    }
    return nextResolve(specifier, context);
  },
});
