/**
 * A key's own page: its options, its warnings, changing its allowlist, rolling it, its last
 * requests, its requests per day as an inline SVG chart (no external assets), and its events.
 */
import type { KeyDay, KeyRequestEntry } from '../../management/key-activity.js';
import { isOverlap } from '../../domain/overlaps.js';
import type { KeyCard, KeyEventEntry } from '../../management/keys.js';
import { html, type SafeHtml } from '../html.js';
import type { Locale } from '../i18n/index.js';
import { layout, type SignedView } from './layout.js';
import { csrfField, keyPath, keyWarning, notice, scopesText, statusBadge, type Notice } from './parts.js';

const CHART_W = 720;
const CHART_H = 160;

/** Requests per day as bars; days with no requests are drawn as gaps, the axis always. */
export function dayChart(locale: Locale, days: KeyDay[]): SafeHtml {
  const t = locale.t.key;
  const max = Math.max(1, ...days.map((d) => d.requests));
  const n = Math.max(days.length, 1);
  const barW = CHART_W / n;
  const total = days.reduce((sum, d) => sum + d.requests, 0);
  const bars = days.map((d, i) => {
    const h = Math.round((d.requests / max) * (CHART_H - 20));
    return html`<rect x="${(i * barW + 1).toFixed(1)}" y="${CHART_H - h}" width="${Math.max(barW - 2, 1).toFixed(1)}" height="${h}" data-day="${d.day}" data-requests="${d.requests}"><title>${t.chartBar(locale.day(d.day), d.requests)}</title></rect>`;
  });
  const first = days[0]?.day;
  const last = days.at(-1)?.day;
  return html`<figure class="chart" id="key-days">
      <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${CHART_W} ${CHART_H + 20}" width="100%" role="img" aria-label="${t.chartLabel(total, days.length)}">
        <g fill="#2563eb">${bars}</g>
        <line x1="0" y1="${CHART_H}" x2="${CHART_W}" y2="${CHART_H}" stroke="#94a3b8" stroke-width="1"></line>
        <text x="0" y="${CHART_H + 15}" font-size="11" fill="#64748b">${first === undefined ? '' : locale.day(first)}</text>
        <text x="${CHART_W}" y="${CHART_H + 15}" font-size="11" fill="#64748b" text-anchor="end">${last === undefined ? '' : locale.day(last)}</text>
        <text x="0" y="12" font-size="11" fill="#64748b">${t.chartMax(max)}</text>
      </svg>
      <figcaption class="hint">${total === 0 ? t.noRequests : t.chartCaption(total, days.length)}</figcaption>
    </figure>`;
}

function requestsTable(locale: Locale, entries: KeyRequestEntry[], timeZone: string): SafeHtml {
  const c = locale.t.key.requestColumns;
  if (entries.length === 0) return html`<p class="muted" id="key-requests">${locale.t.key.noRequests}</p>`;
  return html`<div class="table-wrap"><table id="key-requests">
      <thead><tr><th>${c.time}</th><th>${c.request}</th><th class="num">${c.status}</th><th class="num">${c.ms}</th><th>${c.address}</th><th>${c.id}</th></tr></thead>
      <tbody>${entries.map((e) => html`<tr><td class="nowrap">${locale.when(e.at, timeZone)}</td><td><code>${e.method} ${e.target}</code></td><td class="num">${e.status}</td><td class="num">${locale.count(e.duration_ms)}</td><td><code>${e.address}</code></td><td><code class="small">${e.request_id}</code></td></tr>`)}</tbody>
    </table></div>`;
}

function eventDetail(locale: Locale, e: KeyEventEntry): string {
  const t = locale.t.key;
  const d = e.detail ?? {};
  if (e.event === 'options_changed' && typeof d.allow === 'object' && d.allow !== null) return t.eventAddresses((d.allow as { to: string[] | null }).to);
  if (e.event === 'rolled') {
    const overlap = String(d.overlap);
    return t.eventRolled(String(d.new_key_id), isOverlap(overlap) ? t.overlapShort[overlap] : overlap);
  }
  if (e.event === 'revoked' && d.reason === 'rolled') return t.eventOverlapEnd;
  if (e.event === 'created' && typeof d.rolled_from === 'string') return t.eventReplaces(d.rolled_from);
  return '';
}

function eventsTable(locale: Locale, events: KeyEventEntry[], timeZone: string): SafeHtml {
  const t = locale.t.key;
  const c = t.eventColumns;
  return html`<div class="table-wrap"><table id="key-events">
      <thead><tr><th>${c.time}</th><th>${c.event}</th><th>${c.by}</th><th>${c.detail}</th></tr></thead>
      <tbody>${events.map((e) => html`<tr><td class="nowrap">${locale.when(e.at, timeZone)}</td><td>${t.eventNames[e.event]}</td><td>${e.actor === 'operator' ? t.operator : e.actor}</td><td>${eventDetail(locale, e)}</td></tr>`)}</tbody>
    </table></div>`;
}

export interface KeyPageModel {
  key: KeyCard;
  requests: KeyRequestEntry[];
  days: KeyDay[];
  events: KeyEventEntry[];
  /** True when the key has older events than `events` holds. */
  eventsCut?: boolean;
  /** One-time token of the roll form. */
  nonce: string;
  allow?: string;
  allowError?: string;
  notice?: Notice;
}

export function keyPage(view: SignedView, model: KeyPageModel): SafeHtml {
  const { locale } = view;
  const t = locale.t.key;
  const { key } = model;
  const tz = view.viewer.school.timezone;
  const active = key.status === 'active';
  const warning = keyWarning(key);
  const invalid = model.allowError !== undefined;
  const path = keyPath(key);
  const f = t.facts;
  return layout(
    { title: t.title(key.name), view, here: path },
    html`<div class="crumbs"><a href="/settings/api">${locale.t.keys.crumbs}</a> › ${t.crumb}</div>
    <h1>${t.heading(key.name)} ${statusBadge(locale, key)}</h1>
    ${notice(model.notice)}
    ${warning ? html`<div class="notice warning" id="key-warning"><p><strong>${t.warningOwn(warning.kind, locale.ends(warning.at, tz))}</strong></p></div>` : ''}
    <section class="card" id="key-options">
      <dl class="facts">
        <dt>${f.key}</dt><dd><code>${key.hint}</code></dd>
        <dt>${f.created}</dt><dd>${locale.when(key.created_at, tz)}</dd>
        <dt>${f.lastUsed}</dt><dd id="key-last-used">${locale.when(key.last_used_at, tz)}</dd>
        <dt>${f.requests}</dt><dd id="key-count">${locale.count(key.request_count)}</dd>
        <dt>${f.scopes}</dt><dd id="key-scopes">${scopesText(locale, key)}</dd>
        <dt>${f.expires}</dt><dd id="key-expires">${locale.ends(key.expires_at, tz, t.noExpiry)}</dd>
        <dt>${f.allow}</dt><dd id="key-allow">${key.allow === null ? t.anyAddress : key.allow.join(', ')}</dd>
        ${key.unused_revoke_at ? html`<dt>${f.unused}</dt><dd id="key-unused">${locale.ends(key.unused_revoke_at, tz)}</dd>` : ''}
        ${key.retires_at ? html`<dt>${f.retires}</dt><dd>${locale.ends(key.retires_at, tz)}</dd>` : ''}
        ${key.revoked_at ? html`<dt>${f.ended}</dt><dd>${locale.ends(key.revoked_at, tz)}</dd>` : ''}
      </dl>
    </section>
    ${active ? html`<form method="post" action="${path}/allow" class="card" id="change-allow">
      <h2>${t.allowHeading}</h2>
      ${csrfField(view)}
      <div class="field">
        <label for="allow">${t.allowLabel}</label>
        <input type="text" id="allow" name="allow" maxlength="2000" value="${model.allow ?? (key.allow ?? []).join(', ')}" aria-describedby="allow-hint"${invalid ? html` aria-invalid="true"` : ''}>
        ${invalid ? html`<p class="field-error" id="allow-error">${model.allowError}</p>` : ''}
        <p class="hint" id="allow-hint">${t.allowHint}</p>
      </div>
      <button type="submit">${t.allowSave}</button>
    </form>` : ''}
    ${active && key.retires_at === null ? html`<form method="post" action="${path}/roll" class="card" id="roll-key">
      <h2>${t.roll}</h2>
      <p class="hint">${t.rollHint}</p>
      ${csrfField(view)}
      <input type="hidden" name="nonce" value="${model.nonce}">
      <div class="inline">
        <div class="field">
          <label for="overlap">${t.overlap}</label>
          <select id="overlap" name="overlap">
            <option value="now">${t.overlaps.now}</option>
            <option value="1h">${t.overlaps['1h']}</option>
            <option value="24h" selected>${t.overlaps['24h']}</option>
            <option value="7d">${t.overlaps['7d']}</option>
          </select>
        </div>
        <button type="submit">${t.rollButton}</button>
      </div>
    </form>` : ''}
    <section>
      <h2>${t.perDay}</h2>
      ${dayChart(locale, model.days)}
    </section>
    <section>
      <h2>${t.lastRequests}</h2>
      ${requestsTable(locale, model.requests, tz)}
    </section>
    <section>
      <h2>${t.events}</h2>
      ${eventsTable(locale, model.events, tz)}
      ${model.eventsCut ? html`<p class="hint" id="events-cut">${t.eventsCut(model.events.length)}</p>` : ''}
    </section>
    <p><a class="button secondary" href="/settings/api">${t.back}</a></p>`,
  );
}
