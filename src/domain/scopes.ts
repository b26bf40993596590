/**
 * Key scopes (docs/api/keys.md): the resources a key may read. A set of scopes is a
 * bit mask, so the request path checks an endpoint's needs with one `&`. Stored as the
 * names, comma-separated, in the order of KEY_SCOPES; null in the database is every scope.
 */
export const KEY_SCOPES = ['students', 'instructors', 'vehicles', 'lessons', 'contracts', 'payments', 'leads', 'finance'] as const;
export type KeyScope = (typeof KEY_SCOPES)[number];

/** A set of scopes as a bit mask (bit i: KEY_SCOPES[i]). */
export type ScopeSet = number;

export const ALL_SCOPES: ScopeSet = (1 << KEY_SCOPES.length) - 1;

export function scopeBit(scope: KeyScope): ScopeSet {
  return 1 << KEY_SCOPES.indexOf(scope);
}

export function scopeSetOf(scopes: readonly KeyScope[]): ScopeSet {
  let set = 0;
  for (const scope of scopes) set |= scopeBit(scope);
  return set;
}

export function scopesIn(set: ScopeSet): KeyScope[] {
  return KEY_SCOPES.filter((_, i) => (set & (1 << i)) !== 0);
}

export function isKeyScope(name: string): name is KeyScope {
  return (KEY_SCOPES as readonly string[]).includes(name);
}

/**
 * A comma-separated list of scope names as given by a director or an operator (`students,lessons`),
 * or the reason it is refused. Order and spaces do not matter; a name given twice is refused.
 */
export function parseScopes(text: string): { ok: true; scopes: KeyScope[] } | { ok: false; reason: string } {
  const names = text.split(',').map((n) => n.trim());
  const unknown = names.filter((n) => !isKeyScope(n));
  if (names.length === 0 || unknown.length > 0) {
    return { ok: false, reason: `scopes must be a comma-separated list of: ${KEY_SCOPES.join(', ')}${unknown.length > 0 ? ` (got "${unknown[0]}")` : ''}` };
  }
  if (new Set(names).size !== names.length) return { ok: false, reason: 'scopes must not name a scope twice' };
  return { ok: true, scopes: scopesIn(scopeSetOf(names as KeyScope[])) };
}

/** The stored text of a set (null: all scopes). */
export function storedScopes(scopes: readonly KeyScope[] | null): string | null {
  if (scopes === null) return null;
  const set = scopeSetOf(scopes);
  return set === ALL_SCOPES ? null : scopesIn(set).join(',');
}

const parsed = new Map<string, ScopeSet>();

/** The set a stored text names (null: all). Made once per distinct text: the request path calls it. */
export function scopeSetOfStored(text: string | null): ScopeSet {
  if (text === null) return ALL_SCOPES;
  let set = parsed.get(text);
  if (set === undefined) {
    set = scopeSetOf(text.split(',').filter(isKeyScope));
    // A stored text is one of at most 2^8 sets; the bound is a backstop.
    if (parsed.size > 1024) parsed.clear();
    parsed.set(text, set);
  }
  return set;
}
