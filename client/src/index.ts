/**
 * @school-data/client: a typed client for the school-data public API, with
 * auto-pagination, retries that are safe for reads, and optional pacing by the
 * service's RateLimit headers. No runtime dependencies.
 */
export { SchoolDataClient, type ClientOptions } from './client.js';
export {
  AddressNotAllowedError,
  AuthenticationError,
  CursorExpiredError,
  ForbiddenError,
  InsufficientScopeError,
  InvalidParameterError,
  NotFoundError,
  PlanRequiredError,
  RateLimitError,
  SchoolDataConnectionError,
  SchoolDataError,
  ServiceUnavailableError,
  type ErrorCode,
  type InvalidParam,
} from './errors.js';
export { ChangeFeed, MAX_CHANGES_PAGE, type ChangesPage, type ChangesQuery } from './feed.js';
export { ListRequest, MAX_PAGE_SIZE, type Page, type PageQuery } from './pagination.js';
export type { ThrottleOptions } from './throttle.js';
export { CLIENT_VERSION, type AttemptEvent, type RetryEvent } from './transport.js';
export type * from './types.js';
export { operations } from './types.js';
