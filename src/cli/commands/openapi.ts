/**
 * Prints the OpenAPI 3.1 document of the public API: the one the server serves at
 * /api/public/v1/openapi.json, built from the route schemas without a database.
 */
import { buildOpenApiDocument } from '../../openapi/document.js';
import type { Output } from '../context.js';

export async function openapiCommand(out: Output): Promise<number> {
  const document = await buildOpenApiDocument();
  // The document is JSON either way: it is what people redirect into a file or a tool.
  out.result(document, () => JSON.stringify(document, null, 2));
  return 0;
}
