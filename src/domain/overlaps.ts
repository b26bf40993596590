/** The overlaps a key's roll offers (docs/api/keys.md): how long the old key keeps working, in milliseconds. */
export const OVERLAPS = { now: 0, '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000 } as const;
export type Overlap = keyof typeof OVERLAPS;

export function isOverlap(text: string): text is Overlap {
  return Object.hasOwn(OVERLAPS, text);
}
