/**
 * A key's own page: its options, its warnings, changing its allowlist, rolling it, its last
 * requests, its requests per day as an inline SVG chart (no external assets), and its events.
 */
import { KEY_SCOPES } from '../../domain/scopes.js';
import type { KeyDay, KeyRequestEntry } from '../../management/key-activity.js';
import type { KeyCard, KeyEventEntry } from '../../management/keys.js';
import { html, type SafeHtml } from '../html.js';
import type { SignedIn } from '../session.js';
import { formatCount, formatWhen } from './format.js';
import { layout } from './layout.js';

const WARN_DAYS_MS = 7 * 86_400_000;

/** Why a key needs the director's attention soon (it expires, or will be revoked as unused), or null. */
export function keyWarning(key: KeyCard, timeZone: string, nowMs = Date.now()): string | null {
  if (key.status !== 'active') return null;
  const soon = (at: string | null) => at !== null && Date.parse(at) - nowMs <= WARN_DAYS_MS;
  if (soon(key.retires_at)) return `ends ${formatWhen(key.retires_at, timeZone)} (it was rolled)`;
  if (soon(key.expires_at)) return `expires ${formatWhen(key.expires_at, timeZone)}`;
  if (soon(key.unused_revoke_at)) return `will be revoked as unused ${formatWhen(key.unused_revoke_at, timeZone)} unless it is used before`;
  return null;
}

export function scopesText(key: KeyCard): string {
  return key.scopes.length === KEY_SCOPES.length ? 'all resources' : key.scopes.join(', ');
}

export function statusBadge(key: KeyCard): SafeHtml {
  if (key.status === 'active') return html`<span class="badge active">Active</span>`;
  if (key.status === 'expired') return html`<span class="badge revoked">Expired</span>`;
  const why = key.revoke_reason === 'unused' ? ' (unused)' : key.revoke_reason === 'rolled' ? ' (rolled)' : '';
  return html`<span class="badge revoked">Revoked${why}</span>`;
}

const CHART_W = 720;
const CHART_H = 160;

/** Requests per day as bars; days with no requests are drawn as gaps, the axis always. */
export function dayChart(days: KeyDay[]): SafeHtml {
  const max = Math.max(1, ...days.map((d) => d.requests));
  const n = Math.max(days.length, 1);
  const barW = CHART_W / n;
  const total = days.reduce((sum, d) => sum + d.requests, 0);
  const bars = days.map((d, i) => {
    const h = Math.round((d.requests / max) * (CHART_H - 20));
    return html`<rect x="${(i * barW + 1).toFixed(1)}" y="${CHART_H - h}" width="${Math.max(barW - 2, 1).toFixed(1)}" height="${h}"><title>${d.day}: ${formatCount(d.requests)}</title></rect>`;
  });
  const first = days[0]?.day ?? '';
  const last = days.at(-1)?.day ?? '';
  return html`<figure class="chart" id="key-days">
      <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${CHART_W} ${CHART_H + 20}" width="100%" role="img" aria-label="Requests per day: ${formatCount(total)} in ${days.length} days">
        <g fill="#2563eb">${bars}</g>
        <line x1="0" y1="${CHART_H}" x2="${CHART_W}" y2="${CHART_H}" stroke="#94a3b8" stroke-width="1"></line>
        <text x="0" y="${CHART_H + 15}" font-size="11" fill="#64748b">${first}</text>
        <text x="${CHART_W}" y="${CHART_H + 15}" font-size="11" fill="#64748b" text-anchor="end">${last}</text>
        <text x="0" y="12" font-size="11" fill="#64748b">max ${formatCount(max)}/day</text>
      </svg>
      <figcaption class="hint">${days.length === 0 ? 'No requests recorded yet.' : `${formatCount(total)} requests in the last ${days.length} days (UTC days).`}</figcaption>
    </figure>`;
}

function requestsTable(entries: KeyRequestEntry[], timeZone: string): SafeHtml {
  if (entries.length === 0) return html`<p class="muted" id="key-requests">No requests recorded yet.</p>`;
  return html`<div class="table-wrap"><table id="key-requests">
      <thead><tr><th>Time</th><th>Request</th><th class="num">Status</th><th class="num">ms</th><th>Address</th><th>Request id</th></tr></thead>
      <tbody>${entries.map((e) => html`<tr><td class="nowrap">${formatWhen(e.at, timeZone)}</td><td><code>${e.method} ${e.target}</code></td><td class="num">${e.status}</td><td class="num">${e.duration_ms}</td><td><code>${e.address}</code></td><td><code class="small">${e.request_id}</code></td></tr>`)}</tbody>
    </table></div>`;
}

const EVENT_NAMES: Record<string, string> = {
  created: 'Created', rolled: 'Rolled', revoked: 'Revoked', expired: 'Expired', revoked_unused: 'Revoked as unused', options_changed: 'Options changed',
};

function eventDetail(e: KeyEventEntry): string {
  const d = e.detail ?? {};
  if (e.event === 'options_changed' && typeof d.allow === 'object' && d.allow !== null) {
    const to = (d.allow as { to: string[] | null }).to;
    return `addresses: ${to === null ? 'any' : to.join(', ')}`;
  }
  if (e.event === 'rolled') return `new key ${String(d.new_key_id)}, overlap ${String(d.overlap)}`;
  if (e.event === 'revoked' && d.reason === 'rolled') return 'end of the roll\'s overlap';
  if (e.event === 'created' && typeof d.rolled_from === 'string') return `replaces ${d.rolled_from}`;
  return '';
}

function eventsTable(events: KeyEventEntry[], timeZone: string): SafeHtml {
  return html`<div class="table-wrap"><table id="key-events">
      <thead><tr><th>Time</th><th>Event</th><th>By</th><th>Detail</th></tr></thead>
      <tbody>${events.map((e) => html`<tr><td class="nowrap">${formatWhen(e.at, timeZone)}</td><td>${EVENT_NAMES[e.event] ?? e.event}</td><td>${e.actor}</td><td>${eventDetail(e)}</td></tr>`)}</tbody>
    </table></div>`;
}

export interface KeyPageModel {
  viewer: SignedIn;
  key: KeyCard;
  requests: KeyRequestEntry[];
  days: KeyDay[];
  events: KeyEventEntry[];
  /** One-time token of the roll form. */
  nonce: string;
  allow?: string;
  allowError?: string;
  notice?: { kind: 'success' | 'error'; text: string };
}

export function keyPage(model: KeyPageModel): SafeHtml {
  const { viewer, key } = model;
  const tz = viewer.school.timezone;
  const active = key.status === 'active';
  const warning = keyWarning(key, tz);
  const csrf = html`<input type="hidden" name="csrf" value="${viewer.csrf}">`;
  const invalid = model.allowError !== undefined;
  return layout(
    { title: `Key ${key.name}`, viewer },
    html`<div class="crumbs"><a href="/settings/api">Settings › API</a> › Key</div>
    <h1>Key “${key.name}” ${statusBadge(key)}</h1>
    ${model.notice ? html`<div class="notice ${model.notice.kind}" role="status"><p>${model.notice.text}</p></div>` : ''}
    ${warning ? html`<div class="notice warning" id="key-warning"><p><strong>This key ${warning}.</strong></p></div>` : ''}
    <section class="card" id="key-options">
      <dl class="facts">
        <dt>Key</dt><dd><code>${key.hint}</code></dd>
        <dt>Created</dt><dd>${formatWhen(key.created_at, tz)}</dd>
        <dt>Last used</dt><dd>${formatWhen(key.last_used_at, tz)}</dd>
        <dt>Requests</dt><dd>${formatCount(key.request_count)}</dd>
        <dt>May read</dt><dd id="key-scopes">${scopesText(key)}</dd>
        <dt>Expires</dt><dd id="key-expires">${formatWhen(key.expires_at, tz)}</dd>
        <dt>From addresses</dt><dd id="key-allow">${key.allow === null ? 'any address' : key.allow.join(', ')}</dd>
        ${key.unused_revoke_at ? html`<dt>Revoked if unused until</dt><dd id="key-unused">${formatWhen(key.unused_revoke_at, tz)}</dd>` : ''}
        ${key.retires_at ? html`<dt>Ends (rolled)</dt><dd>${formatWhen(key.retires_at, tz)}</dd>` : ''}
        ${key.revoked_at ? html`<dt>Ended</dt><dd>${formatWhen(key.revoked_at, tz)}</dd>` : ''}
      </dl>
    </section>
    ${active ? html`<form method="post" action="/settings/api/keys/${encodeURIComponent(key.id)}/allow" class="card" id="change-allow">
      <h2>Addresses the key may be used from</h2>
      ${csrf}
      <div class="field">
        <label for="allow">Addresses and networks</label>
        <input type="text" id="allow" name="allow" maxlength="2000" value="${model.allow ?? (key.allow ?? []).join(', ')}" aria-describedby="allow-hint"${invalid ? html` aria-invalid="true"` : ''}>
        ${invalid ? html`<p class="field-error" id="allow-error">${model.allowError}</p>` : ''}
        <p class="hint" id="allow-hint">Comma-separated IPv4/IPv6 addresses and CIDR ranges, such as 203.0.113.7, 10.0.0.0/8. Empty: any address. Requests from elsewhere are refused (403).</p>
      </div>
      <button type="submit">Save addresses</button>
    </form>` : ''}
    ${active && key.retires_at === null ? html`<form method="post" action="/settings/api/keys/${encodeURIComponent(key.id)}/roll" class="card" id="roll-key">
      <h2>Roll the key</h2>
      <p class="hint">Makes a new key with the same name, resources and addresses (shown once), and ends this one after the overlap you choose, so the integration can switch without downtime.</p>
      ${csrf}
      <input type="hidden" name="nonce" value="${model.nonce}">
      <div class="inline">
        <div class="field">
          <label for="overlap">This key keeps working</label>
          <select id="overlap" name="overlap">
            <option value="now">no longer: end it now</option>
            <option value="1h">1 more hour</option>
            <option value="24h" selected>24 more hours</option>
            <option value="7d">7 more days</option>
          </select>
        </div>
        <button type="submit">Roll key</button>
      </div>
    </form>` : ''}
    <section>
      <h2>Requests per day</h2>
      ${dayChart(model.days)}
    </section>
    <section>
      <h2>Last requests</h2>
      ${requestsTable(model.requests, tz)}
    </section>
    <section>
      <h2>Events</h2>
      ${eventsTable(model.events, tz)}
    </section>
    <p><a class="button secondary" href="/settings/api">Back to API keys</a></p>`,
  );
}
