/**
 * The client's types are generated from the OpenAPI document; this fails when the
 * committed client/src/types.ts is stale (run `npm run generate:client`).
 * @store-free
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { buildOpenApiDocument } from '../../src/openapi/document.js';
import { renderClientTypes, TYPES_FILE } from '../../scripts/generate-client-types.js';
import { CLIENT_VERSION } from './built.js';

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
});
