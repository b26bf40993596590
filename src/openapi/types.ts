/**
 * The parts of an OpenAPI 3.1 document this project reads (tests, the client type
 * generator). Schemas are JSON Schema 2020-12 objects, kept open.
 */
export type JsonSchema = { [keyword: string]: unknown } & {
  type?: string | string[];
  title?: string;
  description?: string;
  $ref?: string;
};

export interface HeaderObject {
  description?: string;
  required?: boolean;
  schema: JsonSchema;
}

export interface ResponseObject {
  description: string;
  content?: Record<string, { schema: JsonSchema }>;
  headers?: Record<string, HeaderObject>;
}

export interface ParameterObject {
  name: string;
  in: 'query' | 'path' | 'header' | 'cookie';
  required?: boolean;
  description?: string;
  schema: JsonSchema;
}

export interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: ParameterObject[];
  responses: Record<string, ResponseObject>;
}

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description?: string };
  servers?: { url: string; description?: string }[];
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, JsonSchema>; securitySchemes?: Record<string, unknown> };
  security?: Record<string, string[]>[];
  tags?: { name: string; description?: string }[];
}
