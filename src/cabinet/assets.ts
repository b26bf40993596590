/**
 * The cabinet's only static files: a stylesheet and the copy-button script, served
 * from this origin (the CSP allows nothing else). They live here as text rather than
 * as files beside the code, so the compiled build needs no copy step and cannot ship
 * without them. The pages work without the script; it only adds the copy button.
 */
import type { FastifyPluginCallback } from 'fastify';

export const STYLESHEET_PATH = '/assets/cabinet.css';
export const COPY_SCRIPT_PATH = '/assets/copy.js';

const STYLESHEET = `
:root {
  --ink: #1d2433; --muted: #5b6476; --line: #dfe3ea; --paper: #ffffff; --ground: #f5f6f8;
  --accent: #1f5fbf; --accent-ink: #ffffff; --danger: #b42318; --ok: #1e7a3c;
  --warn-bg: #fff6e0; --warn-line: #f0c36d; --error-bg: #fdecea; --info-bg: #eaf2fd;
}
* { box-sizing: border-box; }
html { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--ink); background: var(--ground); }
body { margin: 0; }
.wrap { max-width: 72rem; margin: 0 auto; padding: 0 1.25rem; }
header.top { background: var(--paper); border-bottom: 1px solid var(--line); }
header.top .wrap { display: flex; align-items: center; gap: 1rem; min-height: 3.5rem; }
.brand { font-weight: 700; letter-spacing: .01em; }
.brand span { color: var(--muted); font-weight: 400; }
.who { margin-left: auto; display: flex; align-items: center; gap: .75rem; color: var(--muted); font-size: .9rem; }
.who form { margin: 0; }
.langs { display: flex; gap: .6rem; margin-right: .5rem; }
.langs strong { color: var(--ink); font-weight: 600; }
.langs a { color: var(--accent); }
.langs .leave { position: relative; }
.langs .leave summary { color: var(--accent); cursor: pointer; text-decoration: underline; list-style: none; }
.langs .leave summary::-webkit-details-marker { display: none; }
.langs .leave-box { position: absolute; right: 0; top: 1.6rem; z-index: 1; width: 22rem; padding: .8rem 1rem; background: var(--paper); border: 1px solid var(--line); border-radius: 6px; box-shadow: 0 4px 14px rgba(0,0,0,.12); }
.langs .leave-box p { margin: 0 0 .5rem; }
main { padding: 1.5rem 1.25rem 3rem; }
h1 { font-size: 1.6rem; margin: .25rem 0 1rem; }
h2 { font-size: 1.15rem; margin: 0 0 .75rem; }
.crumbs { color: var(--muted); font-size: .9rem; }
.card { background: var(--paper); border: 1px solid var(--line); border-radius: .5rem; padding: 1.25rem; margin-bottom: 1.25rem; }
.narrow { max-width: 26rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1.5rem; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
label { display: block; font-weight: 600; margin-bottom: .25rem; }
input[type=text], input[type=email], input[type=password] {
  font: inherit; padding: .5rem .65rem; border: 1px solid #b9c0cc; border-radius: .375rem; width: 100%; background: var(--paper); color: var(--ink);
}
select, input[type=date] { font: inherit; padding: .45rem .6rem; border: 1px solid #b9c0cc; border-radius: .375rem; background: var(--paper); color: var(--ink); min-width: 14rem; }
input:focus, button:focus, select:focus, a:focus { outline: 3px solid #9cc1f5; outline-offset: 1px; }
input[aria-invalid=true] { border-color: var(--danger); }
.field { margin-bottom: 1rem; }
.field-error { color: var(--danger); font-size: .9rem; margin-top: .25rem; }
.inline { display: flex; gap: .75rem; align-items: flex-start; flex-wrap: wrap; }
.inline .field { flex: 1 1 18rem; margin-bottom: 0; }
.hint { color: var(--muted); font-size: .9rem; margin: .25rem 0 0; }
button, .button {
  font: inherit; font-weight: 600; display: inline-block; padding: .5rem 1rem; border-radius: .375rem; border: 1px solid var(--accent);
  background: var(--accent); color: var(--accent-ink); cursor: pointer; text-decoration: none; line-height: 1.5;
}
.inline button { margin-top: 1.85rem; }
button.secondary, .button.secondary { background: var(--paper); color: var(--accent); }
button.danger, .button.danger { background: var(--danger); border-color: var(--danger); color: #fff; }
.button.small, button.small { padding: .2rem .6rem; font-size: .875rem; }
button.link { background: none; border: none; color: var(--accent); padding: 0; font-weight: 400; text-decoration: underline; }
.actions { display: flex; gap: .75rem; align-items: center; margin-top: 1rem; }
.notice { border: 1px solid var(--line); border-left-width: 4px; border-radius: .375rem; padding: .75rem 1rem; margin: 0 0 1.25rem; background: var(--info-bg); }
.notice.warning { background: var(--warn-bg); border-color: var(--warn-line); }
.notice.error { background: var(--error-bg); border-color: var(--danger); }
.notice.success { background: #e8f5ec; border-color: var(--ok); }
.notice p { margin: .25rem 0; }
table { width: 100%; border-collapse: collapse; background: var(--paper); }
th, td { text-align: left; padding: .6rem .6rem; border-bottom: 1px solid var(--line); vertical-align: middle; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.nowrap, td.num { white-space: nowrap; }
tr.revoked td { color: var(--muted); }
.table-wrap { overflow-x: auto; border: 1px solid var(--line); border-radius: .5rem; }
.table-wrap table tr:last-child td { border-bottom: none; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .9em; }
.badge { display: inline-block; padding: .05rem .5rem; border-radius: 1rem; font-size: .8rem; font-weight: 600; }
.badge.active { background: #e8f5ec; color: var(--ok); }
.badge.revoked { background: #eef0f3; color: var(--muted); }
details.options { margin-top: .75rem; }
details.options summary { cursor: pointer; }
fieldset.field { border: 0; padding: 0; }
label.check { display: inline-block; margin-right: 1rem; font-weight: normal; }
figure.chart { margin: 0 0 1rem; }
figure.chart rect:hover { fill: #1e40af; }
.secret { display: flex; gap: .75rem; align-items: center; flex-wrap: wrap; }
.secret input { flex: 1 1 24rem; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 1.05rem; background: #fbfbfc; }
main > section { margin-bottom: 1.75rem; }
.card > p.hint { margin: 0 0 .75rem; }
.muted { color: var(--muted); }
.small { font-size: .85rem; }
[hidden] { display: none !important; }
`;

const COPY_SCRIPT = `'use strict';
// Copy buttons: <button data-copy="ID" hidden> copies the value of the element ID; what it
// says then comes from the page (data-copied, data-copy-by-hand), in the page's language.
// Without this script the button stays hidden and the key is plain selectable text.
for (const button of document.querySelectorAll('button[data-copy]')) {
  const target = document.getElementById(button.dataset.copy);
  if (!target) continue;
  const label = button.textContent;
  button.hidden = false;
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(target.value);
      button.textContent = button.dataset.copied;
    } catch {
      target.focus();
      target.select();
      button.textContent = button.dataset.copyByHand;
    }
    setTimeout(() => { button.textContent = label; }, 4000);
  });
}
`;

export const assets: FastifyPluginCallback = (app, _options, done) => {
  app.get(STYLESHEET_PATH, (_request, reply) => reply.type('text/css; charset=utf-8').send(STYLESHEET));
  app.get(COPY_SCRIPT_PATH, (_request, reply) => reply.type('text/javascript; charset=utf-8').send(COPY_SCRIPT));
  done();
};
