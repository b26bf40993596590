#!/usr/bin/env node
// The built CLI (npm run build). Exit codes come from the command, never from library code.
// A reader that stops early (`school-data openapi | head`) is not an error.
process.stdout.on('error', (err) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});
const main = new URL('../dist/cli/main.js', import.meta.url);
const { existsSync } = await import('node:fs');
if (!existsSync(main)) {
  // Right after `npm ci` nothing is built yet: say so in one line, not with a module-not-found stack.
  process.stderr.write('school-data: not built yet; run "npm run build" (or "npm start") in the repository first\n');
  process.exit(1);
}
process.exitCode = await (await import(main.href)).main(process.argv);
