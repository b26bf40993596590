/**
 * The closed set of problem codes (RFC 9457 problem details) and the one place
 * that maps each to its HTTP status and title.
 */
import { METHODS } from 'node:http';
import { Type, type Static } from 'typebox';

export const problemTypes = {
  invalid_parameter: { status: 400, title: 'Invalid request parameter' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  plan_required: { status: 402, title: 'Plan does not include API access' },
  insufficient_scope: { status: 403, title: 'Key scope does not cover this endpoint' },
  address_not_allowed: { status: 403, title: 'Address not allowed for this key' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  cursor_expired: { status: 410, title: 'Cursor expired' },
  request_timeout: { status: 408, title: 'Request timeout' },
  uri_too_long: { status: 414, title: 'URI too long' },
  header_too_large: { status: 431, title: 'Request header fields too large' },
  rate_limited: { status: 429, title: 'Too many requests' },
  internal_error: { status: 500, title: 'Internal server error' },
  rate_limit_unavailable: { status: 503, title: 'Rate-limit service unavailable' },
  data_unavailable: { status: 503, title: 'Data store unavailable' },
} as const;

export type ProblemCode = keyof typeof problemTypes;

export const InvalidParam = Type.Object(
  { name: Type.String(), reason: Type.String() },
  { additionalProperties: false },
);
export type InvalidParam = Static<typeof InvalidParam>;

export const ProblemSchema = Type.Object(
  {
    type: Type.String({ description: 'urn:school-data:problem:<code>' }),
    title: Type.String(),
    status: Type.Integer(),
    code: Type.Enum(Object.keys(problemTypes) as ProblemCode[], { type: 'string' }),
    detail: Type.String(),
    invalid_params: Type.Optional(Type.Array(InvalidParam)),
    request_id: Type.String(),
  },
  { additionalProperties: false, $id: 'Problem', title: 'Problem' },
);
export type ProblemBody = Static<typeof ProblemSchema>;

/** An expected failure of a request; the error handler turns it into problem+json. */
export class Problem extends Error {
  override name = 'Problem';
  readonly status: number;
  readonly code: ProblemCode;
  readonly detail: string;
  readonly options: { invalidParams?: InvalidParam[]; headers?: Record<string, string> };

  constructor(
    code: ProblemCode,
    detail: string,
    options: { invalidParams?: InvalidParam[]; headers?: Record<string, string> } = {},
  ) {
    super(detail);
    this.code = code;
    this.detail = detail;
    this.options = options;
    this.status = problemTypes[code].status;
  }

  static invalid(params: InvalidParam[]): Problem {
    // A parameter without a name (`?=1`) is told by its reason alone.
    const detail = params.map((p) => (p.name === '' ? p.reason : `${p.name} ${p.reason}`)).join('; ');
    return new Problem('invalid_parameter', detail, { invalidParams: params });
  }

  private jsonPrefix: string | undefined;

  /**
   * The body as JSON text, the fields in ProblemSchema's order: what every problem answer
   * carries. Only the request id differs between two answers of one Problem, so the rest
   * is made once.
   */
  json(requestId: string): string {
    this.jsonPrefix ??= `${JSON.stringify(this.head()).slice(0, -1)},"request_id":`;
    return `${this.jsonPrefix}${JSON.stringify(requestId)}}`;
  }

  private head(): Omit<ProblemBody, 'request_id'> {
    const head: Omit<ProblemBody, 'request_id'> = {
      type: `urn:school-data:problem:${this.code}`,
      title: problemTypes[this.code].title,
      status: this.status,
      code: this.code,
      detail: this.detail,
    };
    if (this.options.invalidParams) head.invalid_params = this.options.invalidParams;
    return head;
  }
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8';

/** The statuses every public route can answer with besides its success. */
export const commonErrorStatuses = [400, 401, 402, 403, 404, 405, 429, 500, 503] as const;

/** Per method Node's parser knows (a few dozen): the 405 problem, made once. */
const notAllowed = new Map<string, Problem>();

/** The 405 for a method other than GET and HEAD, with `Allow: GET, HEAD`. */
export function methodNotAllowed(method: string): Problem {
  let problem = notAllowed.get(method);
  if (problem === undefined) {
    problem = new Problem('method_not_allowed', `${method} is not supported: this API is read-only (GET and HEAD).`, { headers: { Allow: 'GET, HEAD' } });
    // Any other name comes from a request line the parser refused: made each time, never kept.
    if (METHODS.includes(method)) notAllowed.set(method, problem);
  }
  return problem;
}
