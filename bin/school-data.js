#!/usr/bin/env node
// The built CLI (npm run build). Exit codes come from the command, never from library code.
// A reader that stops early (`school-data openapi | head`) is not an error; a failed write
// is judged by the CLI once it is loaded (outputFailed in src/cli/main.ts), one line until then.
let outputFailed = (err) => {
  if (err.code !== 'EPIPE') process.stderr.write(`school-data: standard output could not be written (${err.code ?? err.message})\n`);
  process.exit(err.code === 'EPIPE' ? 0 : 1);
};
process.stdout.on('error', (err) => outputFailed(err));
// The oldest Node.js line it runs on (package.json "engines"): older ones crash in the SQLite driver, without a word.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(`school-data: needs Node.js 22.18 or later; this is ${process.versions.node}\n`);
  process.exit(1);
}
const main = new URL('../dist/bundle/main.js', import.meta.url);
const { existsSync } = await import('node:fs');
if (!existsSync(main)) {
  // Right after `npm ci` nothing is built yet: say so in one line, not with a module-not-found stack.
  process.stderr.write('school-data: not built yet; run "npm run build" (or "npm start") in the repository first\n');
  process.exit(1);
}
const cli = await import(main.href);
outputFailed = cli.outputFailed;
process.exitCode = await cli.main(process.argv);
