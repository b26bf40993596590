/**
 * Lets Node.js run the project's TypeScript as it is, for the test processes: Node strips
 * the types itself, and this hook resolves a relative `./x.js` written in a .ts file (the
 * NodeNext convention tsc compiles to) to the `./x.ts` beside it when there is one.
 *
 *   node --import ./scripts/ts-resolve.mjs --experimental-strip-types test/x.test.ts
 *
 * The hook runs in the process's own thread (module.registerHooks), so it costs a file
 * check per such import and nothing else.
 */
import fs from 'node:fs';
import { registerHooks } from 'node:module';

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier.endsWith('.js') && specifier.startsWith('.') && context.parentURL?.endsWith('.ts')) {
      const ts = new URL(`${specifier.slice(0, -3)}.ts`, context.parentURL);
      if (fs.existsSync(ts)) return nextResolve(ts.href, context);
    }
    return nextResolve(specifier, context);
  },
});
