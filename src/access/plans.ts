import type { Config } from '../config/index.js';

/** Requests per minute for a school's plan, or null when the plan has no API access. */
export function planLimit(config: Pick<Config, 'rateLimitProfi' | 'rateLimitVip'>, plan: string): number | null {
  if (plan === 'VIP') return config.rateLimitVip;
  if (plan === 'Profi') return config.rateLimitProfi;
  return null;
}
