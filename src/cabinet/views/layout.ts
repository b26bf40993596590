/** The frame of every cabinet page: head, top bar (with sign-out when signed in), main. */
import { COPY_SCRIPT_PATH, STYLESHEET_PATH } from '../assets.js';
import { html, type SafeHtml } from '../html.js';
import type { SignedIn } from '../session.js';

export interface PageOptions {
  title: string;
  /** Present when a director is signed in: shows who, and the sign-out button. */
  viewer?: SignedIn | undefined;
  /** Loads the copy-button script (only the new-key page needs it). */
  copyScript?: boolean;
}

export function signOutForm(viewer: SignedIn): SafeHtml {
  return html`<form method="post" action="/logout">
      <input type="hidden" name="csrf" value="${viewer.csrf}">
      <button type="submit" class="link">Sign out</button>
    </form>`;
}

export function layout(options: PageOptions, body: SafeHtml): SafeHtml {
  const { title, viewer } = options;
  return html`<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${title} · school-data cabinet</title>
  <link rel="stylesheet" href="${STYLESHEET_PATH}">
  ${options.copyScript ? html`<script src="${COPY_SCRIPT_PATH}" defer></script>` : ''}
</head>
<body>
  <header class="top">
    <div class="wrap">
      <div class="brand">school-data <span>· Director's cabinet</span></div>
      ${viewer ? html`<div class="who"><span>${viewer.director.email}</span><a href="/settings/password" class="link">Password</a>${signOutForm(viewer)}</div>` : ''}
    </div>
  </header>
  <main class="wrap">
${body}
  </main>
</body>
</html>
`;
}
