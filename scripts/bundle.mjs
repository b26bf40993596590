#!/usr/bin/env node
/**
 * Builds the program: bundles the command line (src/cli/main.ts; esbuild strips the types,
 * `npm run typecheck` checks them) into dist/bundle/: the program's own modules and its
 * ESM-only dependencies made of hundreds of files (Kysely, TypeBox) in a few chunks, one per
 * command loaded when it runs. Node.js resolves, reads
 * and links every module of a program at start, so each `school-data` process (a command,
 * `serve`, a cluster worker) starts faster (docs/performance.md, "Bundled"). The other
 * dependencies stay in node_modules: native addons, and packages that load files or workers
 * of their own. Stack traces name the bundle's chunks; NODE_OPTIONS=--enable-source-maps
 * names src/ instead (docs/operations.md).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const INLINED = new Set(['kysely', 'typebox']);
const { dependencies } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const outdir = path.join(root, 'dist', 'bundle');

// The whole of dist/, so nothing of an older build's layout stays beside the bundle.
fs.rmSync(path.join(root, 'dist'), { recursive: true, force: true });
await build({
  entryPoints: [path.join(root, 'src', 'cli', 'main.ts')],
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  sourcemap: true,
  external: Object.keys(dependencies).filter((name) => !INLINED.has(name)),
  logLevel: 'warning',
});
