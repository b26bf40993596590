/** The frame of every cabinet page: head, top bar (language switch; sign-out when signed in), main. */
import { COPY_SCRIPT_PATH, STYLESHEET_PATH } from '../assets.js';
import { html, type SafeHtml } from '../html.js';
import { LANGS, LOCALES, switchHref, type Lang, type Locale } from '../i18n/index.js';
import type { SignedIn } from '../session.js';

/** What a page is rendered for, per request: its language, and who is signed in (none on the sign-in page). */
export interface View {
  locale: Locale;
  viewer?: SignedIn | undefined;
}

/** A page of a signed-in director. */
export interface SignedView extends View {
  viewer: SignedIn;
}

export interface PageOptions {
  title: string;
  view: View;
  /** The page's own GET address, where the language switch leads; null: no switch. */
  here: string | null;
  /**
   * The switch leaves what this page shows for good (the new-key page: its key is shown
   * once): each language opens first, in itself, a warning and the link to `here`.
   */
  switchLeaves?: boolean;
  /** Loads the copy-button script (only the new-key page needs it). */
  copyScript?: boolean;
}

/** Each language named in itself, so a director finds their own whatever the page's language. */
const LANG_NAMES: Record<Lang, string> = { en: 'English', ru: 'Русский' };

function languageSwitch(here: string, locale: Locale, leaves: boolean): SafeHtml {
  return html`<nav class="langs" aria-label="${locale.t.layout.languages}">${LANGS.map((lang) =>
    lang === locale.lang
      ? html`<strong lang="${lang}" aria-current="true">${LANG_NAMES[lang]}</strong>`
      : leaves
        ? html`<details class="leave" lang="${lang}"><summary id="lang-${lang}">${LANG_NAMES[lang]}</summary>
            <div class="leave-box"><p>${LOCALES[lang].t.layout.leaveWarning}</p>
            <a href="${switchHref(here, lang)}" hreflang="${lang}" id="lang-${lang}-leave">${LOCALES[lang].t.layout.leaveAndSwitch}</a></div></details>`
        : html`<a href="${switchHref(here, lang)}" lang="${lang}" hreflang="${lang}" id="lang-${lang}">${LANG_NAMES[lang]}</a>`)}</nav>`;
}

function signOutForm(viewer: SignedIn, locale: Locale): SafeHtml {
  return html`<form method="post" action="/logout">
      <input type="hidden" name="csrf" value="${viewer.csrf}">
      <button type="submit" class="link">${locale.t.layout.signOut}</button>
    </form>`;
}

export function layout(options: PageOptions, body: SafeHtml): SafeHtml {
  const { title, view: { locale, viewer } } = options;
  const t = locale.t.layout;
  return html`<!doctype html>
<html lang="${locale.lang}">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${title} · ${t.titleSuffix}</title>
  <link rel="stylesheet" href="${STYLESHEET_PATH}">
  ${options.copyScript ? html`<script src="${COPY_SCRIPT_PATH}" defer></script>` : ''}
</head>
<body>
  <header class="top">
    <div class="wrap">
      <div class="brand">school-data <span>· ${t.brand}</span></div>
      <div class="who">
        ${options.here === null ? '' : languageSwitch(options.here, locale, options.switchLeaves === true)}
        ${viewer ? html`<span>${viewer.director.email}</span><a href="/settings/password" class="link">${t.password}</a>${signOutForm(viewer, locale)}` : ''}
      </div>
    </div>
  </header>
  <main class="wrap">
${body}
  </main>
</body>
</html>
`;
}
