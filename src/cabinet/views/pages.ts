/**
 * The cabinet's pages. Each takes the request's view (language, director) and plain data
 * and returns markup; values are escaped by `html`, so nothing a director (or an
 * operator's import) typed can become markup. Every word comes from the catalogue.
 */
import { KEY_SCOPES } from '../../domain/scopes.js';
import { PASSWORD_MIN_LENGTH } from '../../management/directors.js';
import { KEY_NAME_MAX, MAX_ACTIVE_KEYS, type KeyCard } from '../../management/keys.js';
import { html, type SafeHtml } from '../html.js';
import { layout, type SignedView, type View } from './layout.js';
import { csrfField, keyPath, keyWarning, notice, scopesText, statusBadge, type Notice } from './parts.js';

export type { Notice } from './parts.js';

export interface LoginModel {
  csrf: string;
  email?: string;
  notice?: Notice;
}

export function loginPage(view: View, model: LoginModel): SafeHtml {
  const t = view.locale.t.login;
  return layout(
    { title: t.title, view, here: '/login' },
    html`<h1>${t.title}</h1>
    <p class="muted">${t.intro}</p>
    ${notice(model.notice)}
    <form method="post" action="/login" class="card narrow">
      <input type="hidden" name="csrf" value="${model.csrf}">
      <div class="field">
        <label for="email">${t.email}</label>
        <input type="email" id="email" name="email" autocomplete="username" required maxlength="254" value="${model.email ?? ''}">
      </div>
      <div class="field">
        <label for="password">${t.password}</label>
        <input type="password" id="password" name="password" autocomplete="current-password" required maxlength="256">
      </div>
      <button type="submit">${t.submit}</button>
    </form>
    <section class="narrow" id="no-account">
      <h2>${t.noAccount}</h2>
      <p class="hint">${t.noAccountHint()}</p>
    </section>`,
  );
}

export interface KeysModel {
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

function createSection(view: SignedView, model: KeysModel, active: number): SafeHtml {
  const { viewer, locale } = view;
  const t = locale.t.keys;
  if (model.limitPerMinute === null) {
    return html`<div class="notice warning" id="no-api-plan"><p><strong>${t.noApiPlan(viewer.school.plan)}</strong></p>
      <p>${t.apiPlans} ${model.keys.some((k) => k.revoked_at === null) ? t.keptKeysRefused : ''}</p></div>`;
  }
  if (active >= MAX_ACTIVE_KEYS) {
    return html`<div class="notice warning" id="key-limit"><p><strong>${t.keyLimit(MAX_ACTIVE_KEYS)}</strong></p>
      <p>${t.keyLimitHint}</p></div>`;
  }
  const invalid = model.nameError !== undefined;
  // Browsers count maxlength in UTF-16 units: a name of KEY_NAME_MAX characters may take twice
  // as many. The server counts characters and says when a name is too long.
  return html`<form method="post" action="/settings/api/keys" class="card" id="create-key">
      <h2>${t.create}</h2>
      ${csrfField(view)}
      <input type="hidden" name="nonce" value="${model.nonce}">
      <div class="inline">
        <div class="field">
          <label for="key-name">${t.name}</label>
          <input type="text" id="key-name" name="name" required maxlength="${2 * KEY_NAME_MAX}" value="${model.name ?? ''}" aria-describedby="key-name-hint${invalid ? ' key-name-error' : ''}"${invalid ? html` aria-invalid="true"` : ''}>
          ${invalid ? html`<p class="field-error" id="key-name-error">${model.nameError}</p>` : ''}
          <p class="hint" id="key-name-hint">${t.nameHint(active, MAX_ACTIVE_KEYS)}</p>
        </div>
        <button type="submit">${t.createButton}</button>
      </div>
      <details class="options"${model.optionsError ? html` open` : ''}>
        <summary>${t.options}</summary>
        ${model.optionsError ? html`<p class="field-error" id="options-error">${model.optionsError}</p>` : ''}
        <fieldset class="field" id="scopes">
          <legend>${t.scopes}</legend>
          ${KEY_SCOPES.map((s) => html`<label class="check"><input type="checkbox" name="scope_${s}" value="1"${model.scopes?.includes(s) ? html` checked` : ''}> ${locale.t.key.scope[s]}</label>`)}
        </fieldset>
        <div class="field">
          <label for="expires">${t.expires(viewer.school.timezone)}</label>
          <input type="date" id="expires" name="expires" value="${model.expires ?? ''}">
        </div>
        <div class="field">
          <label for="allow">${t.allow}</label>
          <input type="text" id="allow" name="allow" maxlength="2000" value="${model.allow ?? ''}">
        </div>
      </details>
    </form>`;
}

function keyRow(view: SignedView, key: KeyCard): SafeHtml {
  const { locale } = view;
  const t = locale.t.keys;
  const tz = view.viewer.school.timezone;
  const revoked = key.status !== 'active';
  const limits = [scopesText(locale, key), key.allow === null ? '' : t.limitedAddresses, key.expires_at === null ? '' : t.until(locale.ends(key.expires_at, tz))];
  return html`<tr class="${revoked ? 'revoked' : 'active'}" data-key-id="${key.id}">
        <td><a href="${keyPath(key)}">${key.name}</a></td>
        <td class="nowrap"><code>${key.hint}</code></td>
        <td class="nowrap">${locale.when(key.created_at, tz)}</td>
        <td class="nowrap">${locale.when(key.last_used_at, tz)}</td>
        <td class="num">${locale.count(key.request_count)}</td>
        <td class="nowrap">${statusBadge(locale, key)}<div class="muted small">${revoked ? locale.ends(key.revoked_at, tz) : limits.filter((l) => l !== '').join(' · ')}</div></td>
        <td class="nowrap">${revoked ? '' : html`<a class="button danger small" href="${keyPath(key)}/revoke">${t.revoke}</a>`}</td>
      </tr>`;
}

function keysTable(view: SignedView, model: KeysModel): SafeHtml {
  const t = view.locale.t.keys;
  if (model.keys.length === 0) return html`<p class="muted">${t.none}</p>`;
  const c = t.columns;
  return html`<div class="table-wrap"><table id="keys">
      <thead><tr><th>${c.name}</th><th>${c.key}</th><th>${c.created}</th><th>${c.lastUsed}</th><th class="num">${c.requests}</th><th>${c.status}</th><th><span class="muted">${c.action}</span></th></tr></thead>
      <tbody>
      ${model.keys.map((k) => keyRow(view, k))}
      </tbody>
    </table></div>
    <p class="hint">${t.timesHint(view.viewer.school.timezone)}</p>`;
}

export function keysPage(view: SignedView, model: KeysModel): SafeHtml {
  const { viewer, locale } = view;
  const t = locale.t.keys;
  const active = model.keys.filter((k) => k.revoked_at === null).length;
  const warnings = model.keys.flatMap((k) => {
    const w = keyWarning(k);
    if (w === null) return [];
    const name = html`<a href="${keyPath(k)}">${locale.t.key.quoted(k.name)}</a>`;
    return [html`<li>${locale.t.key.warningListed(w.kind, name, locale.ends(w.at, viewer.school.timezone))}</li>`];
  });
  return layout(
    { title: t.title, view, here: '/settings/api' },
    html`<div class="crumbs">${t.crumbs}</div>
    <h1>${t.heading}</h1>
    ${notice(model.notice)}
    ${warnings.length > 0 ? html`<div class="notice warning" id="key-warnings" role="status"><ul>${warnings}</ul></div>` : ''}
    <section class="card" id="school">
      <h2>${viewer.school.name}</h2>
      <dl class="facts">
        <dt>${t.plan}</dt><dd id="plan">${viewer.school.plan}</dd>
        <dt>${t.limit}</dt><dd id="limit">${model.limitPerMinute === null ? t.noApiOnPlan : t.limitValue(model.limitPerMinute)}</dd>
        <dt>${t.howToUse}</dt><dd>${t.howToUseValue()}</dd>
      </dl>
    </section>
    ${createSection(view, model, active)}
    <section>
      <h2>${t.list}</h2>
      ${keysTable(view, model)}
    </section>`,
  );
}

export function newKeyPage(view: SignedView, created: { name: string; key: string; hint: string }): SafeHtml {
  const t = view.locale.t.newKey;
  return layout(
    { title: t.title, view, here: '/settings/api', switchLeaves: true, copyScript: true },
    html`<div class="crumbs">${t.crumbs}</div>
    <h1>${t.heading}</h1>
    <div class="notice warning" role="alert">
      <p><strong>${t.copyNow}</strong></p>
      <p>${t.onlyFingerprint}</p>
    </div>
    <section class="card">
      <h2>${created.name}</h2>
      <label for="new-key">${t.label}</label>
      <div class="secret">
        <input type="text" id="new-key" value="${created.key}" readonly autocomplete="off" spellcheck="false">
        <button type="button" data-copy="new-key" data-copied="${t.copied}" data-copy-by-hand="${t.copyByHand}" hidden>${t.copy}</button>
      </div>
      <p class="hint">${t.hint(created.hint)}</p>
    </section>
    <p><a class="button" href="/settings/api">${t.back}</a></p>`,
  );
}

export function revokePage(view: SignedView, key: KeyCard): SafeHtml {
  const { locale } = view;
  const t = locale.t.revoke;
  const f = locale.t.key.facts;
  const tz = view.viewer.school.timezone;
  const facts = html`<dl class="facts">
        <dt>${f.key}</dt><dd><code>${key.hint}</code></dd>
        <dt>${f.created}</dt><dd>${locale.when(key.created_at, tz)}</dd>
        <dt>${f.lastUsed}</dt><dd>${locale.when(key.last_used_at, tz)}</dd>
        <dt>${f.requests}</dt><dd>${locale.count(key.request_count)}</dd>
      </dl>`;
  const here = `${keyPath(key)}/revoke`;
  if (key.revoked_at !== null) {
    return layout(
      { title: t.doneTitle, view, here },
      html`<div class="crumbs">${t.crumbs}</div>
      <h1>${t.already(key.name)}</h1>
      <section class="card">${facts}</section>
      <p><a class="button secondary" href="/settings/api">${locale.t.key.back}</a></p>`,
    );
  }
  return layout(
    { title: t.title, view, here },
    html`<div class="crumbs">${t.crumbs}</div>
    <h1>${t.heading(key.name)}</h1>
    <div class="notice warning"><p><strong>${t.cannotUndo}</strong> ${t.consequence}</p></div>
    <section class="card">${facts}</section>
    <form method="post" action="${here}" class="actions">
      ${csrfField(view)}
      <button type="submit" class="danger">${t.button}</button>
      <a class="button secondary" href="/settings/api">${t.cancel}</a>
    </form>`,
  );
}

export interface ErrorModel {
  status: number;
  title: string;
  message: string;
  requestId: string;
  /** Where the language switch leads. */
  here: string;
}

export function errorPage(view: View, model: ErrorModel): SafeHtml {
  const t = view.locale.t.errors;
  return layout(
    { title: model.title, view, here: model.here },
    html`<h1>${model.title}</h1>
    <div class="notice error"><p>${model.message}</p></div>
    <p><a class="button secondary" href="/settings/api">${t.back}</a></p>
    <p class="hint">${t.footer(model.status)} <code>${model.requestId}</code></p>`,
  );
}

export function passwordPage(view: SignedView, status?: Notice): SafeHtml {
  const t = view.locale.t.password;
  return layout(
    { title: t.title, view, here: '/settings/password' },
    html`<div class="crumbs"><a href="/settings/api">${t.crumbs}</a> › ${t.crumb}</div>
    <h1>${t.heading}</h1>
    ${notice(status)}
    <form method="post" action="/settings/password" class="card narrow" id="change-password">
      ${csrfField(view)}
      <div class="field">
        <label for="current">${t.current}</label>
        <input type="password" id="current" name="current" autocomplete="current-password" required maxlength="256">
      </div>
      <div class="field">
        <label for="next">${t.next}</label>
        <input type="password" id="next" name="next" autocomplete="new-password" required minlength="${PASSWORD_MIN_LENGTH}" maxlength="256">
        <p class="hint">${t.hint(PASSWORD_MIN_LENGTH)}</p>
      </div>
      <button type="submit">${t.button}</button>
    </form>`,
  );
}
