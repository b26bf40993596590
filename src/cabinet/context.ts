import type { Kysely } from 'kysely';
import type { RateLimiter } from '../access/ratelimit/index.js';
import type { Config } from '../config/index.js';
import type { Database } from '../db/schema.js';
import type { SessionPolicy } from './session.js';

/** What the cabinet's pages work with; the stores belong to the caller, who closes them. */
export interface CabinetContext {
  config: Pick<Config, 'rateLimitProfi' | 'rateLimitVip' | 'keyUnusedDays'>;
  db: Kysely<Database>;
  /** Counts sign-in attempts (the API's limiter: memory, or Redis shared by every instance). */
  limiter: RateLimiter;
  policy: SessionPolicy;
}
