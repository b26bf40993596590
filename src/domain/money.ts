/**
 * Money is stored as integer minor units and shown as a decimal string with exactly
 * two fraction digits ("15000.00", "-1200.50"), never as a float.
 */
const MONEY = /^(-)?(\d{1,13})(?:\.(\d{1,2}))?$/;

export function formatMoney(minor: number | bigint): string {
  const digits = String(minor < 0 ? -minor : minor).padStart(3, '0');
  return `${minor < 0 ? '-' : ''}${digits.slice(0, -2)}.${digits.slice(-2)}`;
}

/**
 * a - b, exact: each side is a sum within the import's bound (±2^53), but their
 * difference (a debt, a profit) can lie past what a double holds to the unit.
 */
export function subtractMoney(a: number, b: number): number | bigint {
  const difference = a - b;
  return Number.isSafeInteger(difference) ? difference : BigInt(a) - BigInt(b);
}

/** Parses "15000", "15000.5" or "15000.50" into minor units; null when malformed. */
export function parseMoney(text: string): number | null {
  const m = MONEY.exec(text);
  if (!m) return null;
  const minor = Number(m[2]) * 100 + Number((m[3] ?? '').padEnd(2, '0'));
  return m[1] ? -minor : minor;
}

export const CURRENCY = /^[A-Z]{3}$/;

/** The ISO 4217 codes in use, as the runtime's ICU knows them (no test or precious-metal codes). */
const CURRENCIES_IN_USE = new Set(Intl.supportedValuesOf('currency'));

/**
 * The ISO 4217 code in use that `typed` names, in capitals whatever the case it was typed
 * in (`eur` is EUR), or null: what a school's money may be kept in.
 */
export function currencyInUse(typed: string): string | null {
  const code = typed.toUpperCase();
  return /^[a-z]{3}$/i.test(typed) && CURRENCIES_IN_USE.has(code) ? code : null;
}
