/**
 * Errors the client throws. An answer of the service that is not a success is a
 * SchoolDataError (one subclass per status the API documents, and `code` from the
 * problem body as a discriminant); an answer that is not the service's problem+json (a
 * proxy's page, another server's) is the base SchoolDataError with code
 * `unexpected_response`, whatever its status; a request that got no answer at all is a
 * SchoolDataConnectionError.
 */
import type { Problem } from './types.js';

/** The problem codes of the API, plus one for an answer that is not problem+json (a proxy's error page). */
export type ErrorCode = Problem['code'] | 'unexpected_response';
export type InvalidParam = NonNullable<Problem['invalid_params']>[number];

export interface ErrorDetails {
  status: number;
  code: ErrorCode;
  detail: string;
  requestId: string | null;
  invalidParams?: InvalidParam[];
  /** Seconds from the Retry-After header, when the answer carried one. */
  retryAfter?: number | null;
}

/**
 * An answer of the service other than 200; itself (not a subclass) with code
 * `unexpected_response` for an answer that is not the service's, whatever its status.
 *
 * @example
 * try {
 *   await client.students.get('s-404');
 * } catch (err) {
 *   if (err instanceof NotFoundError) console.log('no such student');
 *   else if (err instanceof SchoolDataError) console.log(err.status, err.code, err.detail, err.requestId);
 *   else throw err;
 * }
 */
export class SchoolDataError extends Error {
  override name = 'SchoolDataError';
  /** HTTP status of the answer. */
  readonly status: number;
  /** Problem code (`invalid_parameter`, `unauthorized`, ...), the stable thing to branch on. */
  readonly code: ErrorCode;
  /** What went wrong, in words meant for a person. */
  readonly detail: string;
  /** X-Request-Id of the answer: quote it when reporting a problem to the service's operator. */
  readonly requestId: string | null;
  /** For `invalid_parameter`: each bad parameter and why. Empty otherwise. */
  readonly invalidParams: InvalidParam[];
  /** Seconds the service asked to wait (Retry-After), or null. */
  readonly retryAfter: number | null;

  constructor(details: ErrorDetails) {
    super(`${details.status} ${details.code}: ${details.detail}${details.requestId ? ` (request ${details.requestId})` : ''}`);
    this.status = details.status;
    this.code = details.code;
    this.detail = details.detail;
    this.requestId = details.requestId;
    this.invalidParams = details.invalidParams ?? [];
    this.retryAfter = details.retryAfter ?? null;
  }
}

/** 400 `invalid_parameter`: `invalidParams` names each bad parameter. Fix the request; do not retry it. */
export class InvalidParameterError extends SchoolDataError {
  override name = 'InvalidParameterError';
}
/** 401 `unauthorized`: the key is missing, malformed, unknown or revoked. */
export class AuthenticationError extends SchoolDataError {
  override name = 'AuthenticationError';
}
/** 402 `plan_required`: the school's plan has no API access (Profi and VIP have). */
export class PlanRequiredError extends SchoolDataError {
  override name = 'PlanRequiredError';
}
/**
 * 403: the key may not be used for this request. Its subclasses say why:
 * InsufficientScopeError (the endpoint is outside the key's scopes) and
 * AddressNotAllowedError (the request came from an address outside the key's allowlist).
 * Do not retry: use another key, or ask the school's director to change this one.
 */
export class ForbiddenError extends SchoolDataError {
  override name = 'ForbiddenError';
}
/**
 * 403 `insufficient_scope`: the endpoint (or a resource named in the changes feed's
 * `resources`) is outside the key's scopes.
 *
 * @example
 * try {
 *   await client.payments.list();
 * } catch (err) {
 *   if (err instanceof InsufficientScopeError) console.log('this key may not read payments');
 * }
 */
export class InsufficientScopeError extends ForbiddenError {
  override name = 'InsufficientScopeError';
}
/** 403 `address_not_allowed`: the request came from an address outside the key's allowlist. */
export class AddressNotAllowedError extends ForbiddenError {
  override name = 'AddressNotAllowedError';
}
/** 404 `not_found`: no such object for this key's school. */
export class NotFoundError extends SchoolDataError {
  override name = 'NotFoundError';
}
/** 410 `cursor_expired`: the changes feed no longer holds what came after the cursor. Drop the copy and read the feed from the beginning. */
export class CursorExpiredError extends SchoolDataError {
  override name = 'CursorExpiredError';
}
/** 429 `rate_limited`, thrown once the retries are used up (or with `maxRetries: 0`). */
export class RateLimitError extends SchoolDataError {
  override name = 'RateLimitError';
}
/** 503 `rate_limit_unavailable` or `data_unavailable`, thrown once the retries are used up. */
export class ServiceUnavailableError extends SchoolDataError {
  override name = 'ServiceUnavailableError';
}

const byStatus: Record<number, typeof SchoolDataError> = {
  400: InvalidParameterError,
  401: AuthenticationError,
  402: PlanRequiredError,
  403: ForbiddenError,
  404: NotFoundError,
  410: CursorExpiredError,
  429: RateLimitError,
  503: ServiceUnavailableError,
};

const byCode: Partial<Record<ErrorCode, typeof SchoolDataError>> = {
  insufficient_scope: InsufficientScopeError,
  address_not_allowed: AddressNotAllowedError,
};

/** A 200 whose body is not the service's answer (a proxy's, another server's): `unexpected_response`. Internal. */
export function unexpectedAnswer(detail: string): SchoolDataError {
  return new SchoolDataError({ status: 200, code: 'unexpected_response', detail, requestId: null });
}

/** The error for a problem answer of the service: its code's class, else its status's. Internal. */
export function errorFor(details: ErrorDetails): SchoolDataError {
  const Class = byCode[details.code] ?? byStatus[details.status] ?? SchoolDataError;
  return new Class(details);
}

/**
 * No answer: the connection was refused or reset, the name did not resolve, TLS
 * failed, or the answer did not come within `timeout`. `code` is Node's error code
 * (`ECONNREFUSED`, `ECONNRESET`, ...) or `timeout`.
 *
 * @example
 * catch (err) {
 *   if (err instanceof SchoolDataConnectionError && err.code === 'timeout') console.log('the service is slow');
 * }
 */
export class SchoolDataConnectionError extends Error {
  override name = 'SchoolDataConnectionError';
  readonly code: string;

  constructor(
    code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.code = code;
  }
}
