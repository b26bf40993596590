/** Pieces several pages share: notices, the form token field, a key's address, status and warning. */
import { KEY_SCOPES } from '../../domain/scopes.js';
import type { KeyCard } from '../../management/keys.js';
import { html, type SafeHtml } from '../html.js';
import type { Locale, WarningKind } from '../i18n/index.js';
import type { SignedView } from './layout.js';

export interface Notice {
  kind: 'info' | 'success' | 'warning' | 'error';
  text: string;
}

export function notice(n: Notice | undefined): SafeHtml | '' {
  return n ? html`<div class="notice ${n.kind}" role="${n.kind === 'error' ? 'alert' : 'status'}"><p>${n.text}</p></div>` : '';
}

export const csrfField = (view: SignedView) => html`<input type="hidden" name="csrf" value="${view.viewer.csrf}">`;

export const keyPath = (key: { id: string }) => `/settings/api/keys/${encodeURIComponent(key.id)}`;

const WARN_DAYS_MS = 7 * 86_400_000;

/**
 * Why a key needs the director's attention soon (it ends, expires, or will be revoked as
 * unused), and when; or null. Of several within the week, the soonest: that is when it stops.
 */
export function keyWarning(key: KeyCard, nowMs = Date.now()): { kind: WarningKind; at: string } | null {
  if (key.status !== 'active') return null;
  const ends: { kind: WarningKind; at: string | null }[] = [
    { kind: 'retires', at: key.retires_at },
    { kind: 'expires', at: key.expires_at },
    { kind: 'unused', at: key.unused_revoke_at },
  ];
  let soonest: { kind: WarningKind; at: string } | null = null;
  for (const { kind, at } of ends) {
    if (at === null || Date.parse(at) - nowMs > WARN_DAYS_MS) continue;
    if (soonest === null || Date.parse(at) < Date.parse(soonest.at)) soonest = { kind, at };
  }
  return soonest;
}

export function scopesText(locale: Locale, key: KeyCard): string {
  return key.scopes.length === KEY_SCOPES.length ? locale.t.key.allResources : key.scopes.map((s) => locale.t.key.scope[s]).join(', ');
}

export function statusBadge(locale: Locale, key: KeyCard): SafeHtml {
  const t = locale.t.key;
  if (key.status === 'active') return html`<span class="badge active">${t.active}</span>`;
  if (key.status === 'expired') return html`<span class="badge revoked">${t.expired}</span>`;
  const why = key.revoke_reason === 'unused' ? t.unused : key.revoke_reason === 'rolled' ? t.rolled : '';
  return html`<span class="badge revoked">${t.revoked}${why}</span>`;
}

