/**
 * The contract check that every API test gets without asking: startTestApp's
 * request() hands each response to `checkResponse`, which finds the operation of the
 * OpenAPI document by method and path template and fails loudly when the status, the
 * content type, a header or the body is not what the document says. Requests that
 * match no operation (unknown paths, other methods, the docs page) are not checked.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { buildOpenApiDocument } from '../../src/openapi/document.js';
import type { JsonSchema, OpenApiDocument, Operation, ResponseObject } from '../../src/openapi/types.js';

export interface ResponseToCheck {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export class ContractViolation extends Error {
  override name = 'ContractViolation';
}

// Components are registered under this id, and the document's local references rewritten to it.
const COMPONENTS_ID = 'https://school-data.invalid/components';

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4}-\d{2}-\d{2})[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;

function isRealDate(text: string): boolean {
  const m = DATE.exec(text);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(y, mo - 1, d));
  return date.getUTCFullYear() === y && date.getUTCMonth() === mo - 1 && date.getUTCDate() === d;
}

function rewriteRefs(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rewriteRefs);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node).map(([k, v]) => [
      k,
      k === '$ref' && typeof v === 'string' ? v.replace('#/components/schemas/', `${COMPONENTS_ID}#/$defs/`) : rewriteRefs(v),
    ]),
  );
}

interface Route {
  method: string;
  template: string;
  pattern: RegExp;
  operation: Operation;
}

const mediaType = (header: string | string[] | undefined) => (typeof header === 'string' ? header.split(';')[0]!.trim().toLowerCase() : undefined);

export class DocumentContract {
  private readonly ajv = new Ajv2020({ strict: true, allErrors: true });
  private readonly routes: Route[] = [];
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(doc: OpenApiDocument) {
    this.ajv.addFormat('date', { type: 'string', validate: isRealDate });
    this.ajv.addFormat('date-time', { type: 'string', validate: (s: string) => DATE_TIME.test(s) && isRealDate(s.slice(0, 10)) });
    this.ajv.addSchema({ $id: COMPONENTS_ID, $defs: rewriteRefs(doc.components?.schemas ?? {}) as Record<string, JsonSchema> });
    for (const [template, item] of Object.entries(doc.paths)) {
      const source = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+');
      for (const [method, operation] of Object.entries(item)) {
        this.routes.push({ method: method.toUpperCase(), template, pattern: new RegExp(`^${source}$`), operation });
      }
    }
  }

  /** Throws a ContractViolation when a response to a documented operation breaks the document. */
  check(method: string, url: string, res: ResponseToCheck): void {
    const path = url.split('?')[0]!;
    // HEAD is GET without a body (docs/api/basics.md, "Methods").
    const asMethod = method.toUpperCase() === 'HEAD' ? 'GET' : method.toUpperCase();
    const route = this.routes.find((r) => r.method === asMethod && r.pattern.test(path));
    if (!route) return;
    const where = `${method} ${url} -> ${res.status} (${route.operation.operationId ?? route.template})`;
    const spec = route.operation.responses[String(res.status)];
    if (!spec) throw new ContractViolation(`${where}: the OpenAPI document lists no response with status ${res.status}`);
    this.checkHeaders(where, res, spec);
    if (method.toUpperCase() === 'HEAD' || res.headers['content-encoding'] !== undefined) return;
    this.checkBody(where, `${asMethod} ${route.template} ${res.status}`, res, spec);
  }

  private checkHeaders(where: string, res: ResponseToCheck, spec: ResponseObject): void {
    for (const [name, header] of Object.entries(spec.headers ?? {})) {
      const value = res.headers[name.toLowerCase()];
      if (value === undefined) {
        if (header.required) throw new ContractViolation(`${where}: the required header ${name} is missing`);
        continue;
      }
      const validate = this.validator(`header ${JSON.stringify(header.schema)}`, header.schema);
      if (!validate(value)) throw new ContractViolation(`${where}: header ${name}: ${JSON.stringify(value)} ${this.ajv.errorsText(validate.errors)}`);
    }
  }

  private checkBody(where: string, key: string, res: ResponseToCheck, spec: ResponseObject): void {
    const type = mediaType(res.headers['content-type']);
    const content = spec.content ?? {};
    const media = type === undefined ? undefined : content[type];
    if (!media) throw new ContractViolation(`${where}: content type ${type ?? '(none)'} is not one of ${Object.keys(content).join(', ') || '(no body)'}`);
    let body: unknown;
    try {
      body = JSON.parse(res.text);
    } catch {
      throw new ContractViolation(`${where}: the body is not JSON: ${res.text.slice(0, 200)}`);
    }
    const validate = this.validator(`${key} ${type}`, media.schema);
    if (!validate(body)) {
      throw new ContractViolation(`${where}: the body does not match the document: ${this.ajv.errorsText(validate.errors)}\n${res.text.slice(0, 500)}`);
    }
  }

  private validator(key: string, schema: JsonSchema): ValidateFunction {
    let validate = this.validators.get(key);
    if (!validate) {
      validate = this.ajv.compile(rewriteRefs(schema) as JsonSchema);
      this.validators.set(key, validate);
    }
    return validate;
  }
}

let contract: Promise<DocumentContract> | null = null;

/** The contract of the document the server generates, built once per test process. */
export function documentContract(): Promise<DocumentContract> {
  contract ??= buildOpenApiDocument().then((doc) => new DocumentContract(doc));
  return contract;
}
