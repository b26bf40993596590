/**
 * The client as a package: its types are generated from the OpenAPI document (this fails
 * when the committed client/src/types.ts is stale: run `npm run generate:client`); it loads
 * through its package.json "exports" from CommonJS as from ESM; and the snippets of the READMEs
 * type-check against it in strict TypeScript, as a user's project would.
 * @store-free
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import MarkdownIt from 'markdown-it';
import ts from 'typescript';
import { buildOpenApiDocument } from '../../src/openapi/document.js';
import { renderClientTypes, TYPES_FILE } from '../../scripts/generate-client-types.js';
import type * as ClientPackage from '../../client/src/index.js';
import { CLIENT_VERSION } from './built.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A project of a user's: a folder whose node_modules holds the client package (a link to client/). */
function userProject(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-client-user-'));
  fs.mkdirSync(path.join(dir, 'node_modules', '@school-data'), { recursive: true });
  fs.symlinkSync(path.join(ROOT, 'client'), path.join(dir, 'node_modules', '@school-data', 'client'), 'dir');
  return dir;
}

/** The first code block of a Markdown file that makes a client. */
function clientSnippet(file: string): string {
  const block = new MarkdownIt().parse(fs.readFileSync(path.join(ROOT, file), 'utf8'), {}).find((t) => t.type === 'fence' && t.content.includes('new SchoolDataClient('));
  assert.ok(block, `${file} has a snippet that makes a client`);
  return block.content;
}

describe('client package', () => {
  it('has types generated from the current OpenAPI document', async () => {
    const expected = renderClientTypes(await buildOpenApiDocument());
    const committed = fs.readFileSync(TYPES_FILE, 'utf8');
    assert.ok(committed === expected, 'client/src/types.ts is stale: run `npm run generate:client` and commit the result');
  });

  it('reports the version of its package.json', () => {
    const pkg = JSON.parse(fs.readFileSync(new URL('../../client/package.json', import.meta.url), 'utf8')) as { version: string; dependencies?: object };
    assert.equal(CLIENT_VERSION, pkg.version);
    assert.equal(pkg.dependencies, undefined, 'the client has no runtime dependencies');
  });

  const projects: string[] = [];
  after(() => {
    for (const dir of projects) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('loads with require() from CommonJS, through its package.json "exports"', () => {
    const dir = userProject();
    projects.push(dir);
    const require = createRequire(path.join(dir, 'index.cjs'));
    const pkg = require('@school-data/client') as typeof ClientPackage;
    assert.equal(typeof pkg.SchoolDataClient, 'function');
    assert.equal(pkg.CLIENT_VERSION, CLIENT_VERSION);
  });

  it('has README snippets that type-check in strict TypeScript', () => {
    const dir = userProject();
    projects.push(dir);
    // What the root README's snippet leaves to the reader's program.
    const given = 'declare const savedCursor: string | undefined;\ndeclare function apply(change: unknown): void;\ndeclare function save(cursor: string | undefined): void;\n';
    const files = [
      ['client-readme.mts', clientSnippet('client/README.md')],
      ['readme.mts', given + clientSnippet('README.md')],
    ].map(([name, text]) => {
      fs.writeFileSync(path.join(dir, name!), text!);
      return path.join(dir, name!);
    });
    const program = ts.createProgram(files, {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ['node'],
      typeRoots: [path.join(ROOT, 'node_modules', '@types')],
    });
    const errors = ts.getPreEmitDiagnostics(program).map((d) => `${path.basename(d.file?.fileName ?? '')}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
    assert.deepEqual(errors, []);
  });
});
