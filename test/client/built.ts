/**
 * The client as its users get it: the built package (client/dist, made by `npm run
 * build`, which `npm test` runs first), typed by the source it is built from.
 */
import type * as ClientPackage from '../../client/src/index.js';

const dist = new URL('../../client/dist/index.js', import.meta.url);

export const {
  SchoolDataClient,
  SchoolDataError,
  SchoolDataConnectionError,
  InvalidParameterError,
  AuthenticationError,
  PlanRequiredError,
  ForbiddenError,
  InsufficientScopeError,
  AddressNotAllowedError,
  NotFoundError,
  RateLimitError,
  ServiceUnavailableError,
  CursorExpiredError,
  ChangeFeed,
  ListRequest,
  CLIENT_VERSION,
} = (await import(dist.href).catch((err: unknown) => {
  throw new Error(`the client is not built (${String(err)}): run \`npm run build\` first`);
})) as typeof ClientPackage;

export type { AttemptEvent, ClientOptions, RetryEvent, Student } from '../../client/src/index.js';
