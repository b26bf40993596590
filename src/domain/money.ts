/**
 * Money is stored as integer minor units and shown as a decimal string with exactly
 * two fraction digits ("15000.00", "-1200.50"), never as a float.
 */
const MONEY = /^(-)?(\d{1,13})(?:\.(\d{1,2}))?$/;

export function formatMoney(minor: number): string {
  const sign = minor < 0 ? '-' : '';
  const abs = Math.abs(minor);
  const cents = abs % 100;
  return `${sign}${(abs - cents) / 100}.${cents < 10 ? '0' : ''}${cents}`;
}

/** Parses "15000", "15000.5" or "15000.50" into minor units; null when malformed. */
export function parseMoney(text: string): number | null {
  const m = MONEY.exec(text);
  if (!m) return null;
  const minor = Number(m[2]) * 100 + Number((m[3] ?? '').padEnd(2, '0'));
  return m[1] ? -minor : minor;
}

export const CURRENCY = /^[A-Z]{3}$/;
