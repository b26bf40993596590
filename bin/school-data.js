#!/usr/bin/env node
// The built CLI (npm run build). Exit codes come from the command, never from library code.
// A reader that stops early (`school-data openapi | head`) is not an error.
process.stdout.on('error', (err) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});
const { main } = await import('../dist/cli/main.js');
process.exitCode = await main(process.argv);
