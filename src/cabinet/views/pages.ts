/**
 * The cabinet's pages. Each takes plain data and returns markup; values are escaped by
 * `html`, so nothing a director (or an operator's import) typed can become markup.
 */
import { KEY_SCOPES } from '../../domain/scopes.js';
import { MAX_ACTIVE_KEYS, type KeyCard } from '../../management/keys.js';
import { html, type SafeHtml } from '../html.js';
import type { SignedIn } from '../session.js';
import { formatCount, formatWhen } from './format.js';
import { keyWarning, scopesText, statusBadge } from './key.js';
import { layout } from './layout.js';

export interface Notice {
  kind: 'info' | 'success' | 'warning' | 'error';
  text: string;
}

function notice(n: Notice | undefined): SafeHtml | '' {
  return n ? html`<div class="notice ${n.kind}" role="${n.kind === 'error' ? 'alert' : 'status'}"><p>${n.text}</p></div>` : '';
}

const csrfField = (viewer: SignedIn) => html`<input type="hidden" name="csrf" value="${viewer.csrf}">`;

export interface LoginModel {
  csrf: string;
  email?: string;
  notice?: Notice;
}

export function loginPage(model: LoginModel): SafeHtml {
  return layout(
    { title: 'Sign in' },
    html`<h1>Sign in</h1>
    <p class="muted">The cabinet of a driving school's director: the school's API keys.</p>
    ${notice(model.notice)}
    <form method="post" action="/login" class="card narrow">
      <input type="hidden" name="csrf" value="${model.csrf}">
      <div class="field">
        <label for="email">Email</label>
        <input type="email" id="email" name="email" autocomplete="username" required maxlength="254" value="${model.email ?? ''}">
      </div>
      <div class="field">
        <label for="password">Password</label>
        <input type="password" id="password" name="password" autocomplete="current-password" required maxlength="256">
      </div>
      <button type="submit">Sign in</button>
    </form>
    <section class="narrow" id="no-account">
      <h2>No account yet?</h2>
      <p class="hint">A director's account is made by whoever runs this service, in the service's folder on its server:
        <code>npx school-data director add --school SCHOOL_ID --email EMAIL</code> prints a password once
        (<code>npx school-data school list</code> shows the school ids). The demo, <code>npx school-data demo</code>,
        makes a director for each demo school and prints their sign-in beside the keys.</p>
    </section>`,
  );
}

export interface KeysModel {
  viewer: SignedIn;
  keys: KeyCard[];
  /** Requests per minute of the school's plan; null when the plan has no API access. */
  limitPerMinute: number | null;
  /** One-time token of the create form (a resubmitted form is refused). */
  nonce: string;
  name?: string;
  nameError?: string;
  /** The options as typed, shown again with their error when the form is refused. */
  scopes?: string[];
  expires?: string;
  allow?: string;
  optionsError?: string;
  notice?: Notice;
}

function createSection(model: KeysModel, active: number): SafeHtml {
  const { viewer } = model;
  if (model.limitPerMinute === null) {
    return html`<div class="notice warning" id="no-api-plan"><p><strong>Your school's plan, ${viewer.school.plan}, does not include API access.</strong></p>
      <p>API keys can be created on the Profi and VIP plans. ${model.keys.some((k) => k.revoked_at === null) ? 'The keys listed below stay valid but are refused (402) until the school moves back to Profi or VIP.' : ''}</p></div>`;
  }
  if (active >= MAX_ACTIVE_KEYS) {
    return html`<div class="notice warning" id="key-limit"><p><strong>Your school has ${MAX_ACTIVE_KEYS} active keys, the most it can have.</strong></p>
      <p>Revoke a key that is no longer used to create a new one.</p></div>`;
  }
  const invalid = model.nameError !== undefined;
  return html`<form method="post" action="/settings/api/keys" class="card" id="create-key">
      <h2>Create a key</h2>
      ${csrfField(viewer)}
      <input type="hidden" name="nonce" value="${model.nonce}">
      <div class="inline">
        <div class="field">
          <label for="key-name">Key name</label>
          <input type="text" id="key-name" name="name" required maxlength="100" value="${model.name ?? ''}" aria-describedby="key-name-hint${invalid ? ' key-name-error' : ''}"${invalid ? html` aria-invalid="true"` : ''}>
          ${invalid ? html`<p class="field-error" id="key-name-error">${model.nameError}</p>` : ''}
          <p class="hint" id="key-name-hint">1-100 characters, for you to tell keys apart, such as "Accounting" or "Website". ${active} of ${MAX_ACTIVE_KEYS} active keys in use.</p>
        </div>
        <button type="submit">Create key</button>
      </div>
      <details class="options"${model.optionsError ? html` open` : ''}>
        <summary>Limit the key (optional)</summary>
        ${model.optionsError ? html`<p class="field-error" id="options-error">${model.optionsError}</p>` : ''}
        <fieldset class="field" id="scopes">
          <legend>Resources it may read (none ticked: all)</legend>
          ${KEY_SCOPES.map((s) => html`<label class="check"><input type="checkbox" name="scope_${s}" value="1"${model.scopes?.includes(s) ? html` checked` : ''}> ${s}</label>`)}
        </fieldset>
        <div class="field">
          <label for="expires">Expires on (the key works through this day, ${viewer.school.timezone}; empty: never)</label>
          <input type="date" id="expires" name="expires" value="${model.expires ?? ''}">
        </div>
        <div class="field">
          <label for="allow">Only from these addresses (comma-separated IPv4/IPv6 addresses and CIDR ranges; empty: any)</label>
          <input type="text" id="allow" name="allow" maxlength="2000" value="${model.allow ?? ''}">
        </div>
      </details>
    </form>`;
}

function keyRow(key: KeyCard, timeZone: string): SafeHtml {
  const revoked = key.status !== 'active';
  return html`<tr class="${revoked ? 'revoked' : 'active'}" data-key-id="${key.id}">
        <td><a href="/settings/api/keys/${encodeURIComponent(key.id)}">${key.name}</a></td>
        <td class="nowrap"><code>${key.hint}</code></td>
        <td class="nowrap">${formatWhen(key.created_at, timeZone)}</td>
        <td class="nowrap">${formatWhen(key.last_used_at, timeZone)}</td>
        <td class="num">${formatCount(key.request_count)}</td>
        <td class="nowrap">${statusBadge(key)}${revoked ? html`<div class="muted small">${formatWhen(key.revoked_at, timeZone)}</div>` : html`<div class="muted small">${scopesText(key)}${key.allow === null ? '' : ' · limited addresses'}${key.expires_at === null ? '' : ` · until ${formatWhen(key.expires_at, timeZone)}`}</div>`}</td>
        <td class="nowrap">${revoked ? '' : html`<a class="button danger small" href="/settings/api/keys/${encodeURIComponent(key.id)}/revoke">Revoke</a>`}</td>
      </tr>`;
}

function keysTable(model: KeysModel): SafeHtml {
  if (model.keys.length === 0) return html`<p class="muted">No keys yet.</p>`;
  return html`<div class="table-wrap"><table id="keys">
      <thead><tr><th>Name</th><th>Key</th><th>Created</th><th>Last used</th><th class="num">Requests</th><th>Status</th><th><span class="muted">Action</span></th></tr></thead>
      <tbody>
      ${model.keys.map((k) => keyRow(k, model.viewer.school.timezone))}
      </tbody>
    </table></div>
    <p class="hint">Times are in ${model.viewer.school.timezone}. The request counter and last use are updated within a few seconds of each request.</p>`;
}

export function keysPage(model: KeysModel): SafeHtml {
  const { viewer } = model;
  const active = model.keys.filter((k) => k.revoked_at === null).length;
  const warnings = model.keys.flatMap((k) => {
    const w = keyWarning(k, viewer.school.timezone);
    return w === null ? [] : [html`<li>The key <a href="/settings/api/keys/${encodeURIComponent(k.id)}">“${k.name}”</a> ${w}.</li>`];
  });
  return layout(
    { title: 'Settings · API', viewer },
    html`<div class="crumbs">Settings › API</div>
    <h1>API keys</h1>
    ${notice(model.notice)}
    ${warnings.length > 0 ? html`<div class="notice warning" id="key-warnings" role="status"><ul>${warnings}</ul></div>` : ''}
    <section class="card" id="school">
      <h2>${viewer.school.name}</h2>
      <dl class="facts">
        <dt>Plan</dt><dd id="plan">${viewer.school.plan}</dd>
        <dt>Request limit</dt><dd id="limit">${model.limitPerMinute === null ? 'no API access on this plan' : `${formatCount(model.limitPerMinute)} requests per minute, shared by all of the school's keys`}</dd>
        <dt>How to use a key</dt><dd>send the header <code>Authorization: Bearer &lt;key&gt;</code> with each request</dd>
      </dl>
    </section>
    ${createSection(model, active)}
    <section>
      <h2>Keys</h2>
      ${keysTable(model)}
    </section>`,
  );
}

export function newKeyPage(viewer: SignedIn, created: { name: string; key: string; hint: string }): SafeHtml {
  return layout(
    { title: 'New API key', viewer, copyScript: true },
    html`<div class="crumbs">Settings › API › New key</div>
    <h1>Your new API key</h1>
    <div class="notice warning" role="alert">
      <p><strong>Copy the key now: it will not be shown again.</strong></p>
      <p>Only a fingerprint of the key is kept, so nobody can show it to you later. If it is lost, revoke it and create another.</p>
    </div>
    <section class="card">
      <h2>${created.name}</h2>
      <label for="new-key">API key</label>
      <div class="secret">
        <input type="text" id="new-key" value="${created.key}" readonly autocomplete="off" spellcheck="false">
        <button type="button" data-copy="new-key" hidden>Copy</button>
      </div>
      <p class="hint">In the key list it appears as <code>${created.hint}</code>. Send it as <code>Authorization: Bearer &lt;key&gt;</code>.</p>
    </section>
    <p><a class="button" href="/settings/api">I have copied the key — back to API keys</a></p>`,
  );
}

export function revokePage(viewer: SignedIn, key: KeyCard): SafeHtml {
  const tz = viewer.school.timezone;
  const facts = html`<dl class="facts">
        <dt>Key</dt><dd><code>${key.hint}</code></dd>
        <dt>Created</dt><dd>${formatWhen(key.created_at, tz)}</dd>
        <dt>Last used</dt><dd>${formatWhen(key.last_used_at, tz)}</dd>
        <dt>Requests</dt><dd>${formatCount(key.request_count)}</dd>
      </dl>`;
  if (key.revoked_at !== null) {
    return layout(
      { title: 'Key revoked', viewer },
      html`<div class="crumbs">Settings › API › Revoke key</div>
      <h1>Key “${key.name}” is already revoked</h1>
      <section class="card">${facts}</section>
      <p><a class="button secondary" href="/settings/api">Back to API keys</a></p>`,
    );
  }
  return layout(
    { title: 'Revoke key', viewer },
    html`<div class="crumbs">Settings › API › Revoke key</div>
    <h1>Revoke the key “${key.name}”?</h1>
    <div class="notice warning"><p><strong>This takes effect at once and cannot be undone.</strong> Every request made with this key from now on is refused (401), so whatever uses it stops working.</p></div>
    <section class="card">${facts}</section>
    <form method="post" action="/settings/api/keys/${encodeURIComponent(key.id)}/revoke" class="actions">
      ${csrfField(viewer)}
      <button type="submit" class="danger">Revoke key</button>
      <a class="button secondary" href="/settings/api">Cancel</a>
    </form>`,
  );
}

export interface ErrorModel {
  status: number;
  title: string;
  message: string;
  requestId: string;
  viewer?: SignedIn | undefined;
}

export function errorPage(model: ErrorModel): SafeHtml {
  return layout(
    { title: model.title, viewer: model.viewer },
    html`<h1>${model.title}</h1>
    <div class="notice error"><p>${model.message}</p></div>
    <p><a class="button secondary" href="/settings/api">Back to the cabinet</a></p>
    <p class="hint">Error ${model.status} · request id <code>${model.requestId}</code></p>`,
  );
}

export function passwordPage(viewer: SignedIn, status?: Notice): SafeHtml {
  return layout(
    { title: 'Change password', viewer },
    html`<div class="crumbs"><a href="/settings/api">Settings</a> › Password</div>
    <h1>Change your password</h1>
    ${notice(status)}
    <form method="post" action="/settings/password" class="card narrow" id="change-password">
      ${csrfField(viewer)}
      <div class="field">
        <label for="current">Current password</label>
        <input type="password" id="current" name="current" autocomplete="current-password" required maxlength="256">
      </div>
      <div class="field">
        <label for="next">New password</label>
        <input type="password" id="next" name="next" autocomplete="new-password" required minlength="12" maxlength="256">
        <p class="hint">At least 12 characters. Every other sign-in of yours ends when it is changed.</p>
      </div>
      <button type="submit">Change password</button>
    </form>`,
  );
}
