#!/usr/bin/env node
/**
 * The repository stands alone, and `npm run lint` holds it so:
 * - every relative link and image in its Markdown resolves to a file or folder inside
 *   the repository, and a link to `#anchor` of a Markdown page to one of its headings
 *   (GitHub's anchors, made by github-slugger) or an explicit `<a id>`;
 * - no file refers to documents the repository does not hold (the sibling folder of
 *   specifications, or sections of a contract kept there): its own docs say it all.
 * Markdown is read by markdown-it, so text in code blocks and code spans is no link.
 *
 *   node scripts/check-docs.mjs
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import GithubSlugger from 'github-slugger';
import MarkdownIt from 'markdown-it';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
// Written so that this file does not match itself.
const OUTSIDE = [
  [new RegExp(['\\.\\.', 'shared'].join('/')), 'points to a folder outside the repository'],
  [new RegExp(['contract', '(section|[0-9])'].join(' '), 'i'), 'cites a contract the repository does not hold; link the page of docs/ that says it'],
];
const SCHEME = /^[a-z][a-z0-9+.-]*:/i;
const HTML_LINK = /<(?:a|img)\b[^>]*?\s(?:href|src)="([^"]*)"/gi;
const HTML_ANCHOR = /<a\b[^>]*?\s(?:id|name)="([^"]*)"/gi;

const md = new MarkdownIt({ html: true });
const problems = [];
const report = (file, line, message) => problems.push(`${file}:${line}: ${message}`);

/** Files git knows of (tracked, or new and not ignored), relative to the root. */
function repositoryFiles() {
  const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: root, encoding: 'utf8' });
  return [...new Set(out.split('\0').filter((f) => f !== '' && fs.existsSync(path.join(root, f))))].sort();
}

const parsed = new Map();
/** A Markdown file's tokens, parsed once. */
function tokensOf(file) {
  let tokens = parsed.get(file);
  if (tokens === undefined) {
    tokens = md.parse(fs.readFileSync(path.join(root, file), 'utf8'), {});
    parsed.set(file, tokens);
  }
  return tokens;
}

const anchorSets = new Map();
/** The anchors a Markdown file offers: its headings' slugs and explicit <a id>/<a name>. */
function anchorsOf(file) {
  let anchors = anchorSets.get(file);
  if (anchors !== undefined) return anchors;
  anchors = new Set();
  const slugger = new GithubSlugger();
  const tokens = tokensOf(file);
  tokens.forEach((token, i) => {
    if (token.type === 'heading_open') {
      const text = (tokens[i + 1]?.children ?? []).filter((c) => c.type === 'text' || c.type === 'code_inline').map((c) => c.content).join('');
      anchors.add(slugger.slug(text));
    }
    const html = [token.type === 'html_block' ? token.content : '', ...(token.children ?? []).filter((c) => c.type === 'html_inline').map((c) => c.content)].join('');
    for (const m of html.matchAll(HTML_ANCHOR)) anchors.add(m[1]);
  });
  anchorSets.set(file, anchors);
  return anchors;
}

/** Every link target of a Markdown file with the line it is on. */
function linksOf(file) {
  const links = [];
  for (const token of tokensOf(file)) {
    const line = (token.map?.[0] ?? 0) + 1;
    if (token.type === 'html_block') for (const m of token.content.matchAll(HTML_LINK)) links.push({ target: m[1], line });
    for (const child of token.children ?? []) {
      if (child.type === 'link_open') links.push({ target: child.attrGet('href'), line });
      else if (child.type === 'image') links.push({ target: child.attrGet('src'), line });
      else if (child.type === 'html_inline') for (const m of child.content.matchAll(HTML_LINK)) links.push({ target: m[1], line });
    }
  }
  return links;
}

function checkLink(file, { target, line }) {
  if (target === null || target === '') return report(file, line, 'a link without a target');
  if (SCHEME.test(target)) return;
  if (target.startsWith('/')) return report(file, line, `${target}: write links relative to the page, not from /`);
  const hash = target.indexOf('#');
  const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
  const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
  const resolved = pathPart === '' ? path.join(root, file) : path.resolve(path.dirname(path.join(root, file)), pathPart);
  const inside = path.relative(root, resolved);
  if (inside.startsWith('..') || path.isAbsolute(inside)) return report(file, line, `${target}: outside the repository`);
  if (!fs.existsSync(resolved)) return report(file, line, `${target}: no such file in the repository`);
  if (anchor !== null && inside.endsWith('.md') && !anchorsOf(inside).has(anchor)) {
    report(file, line, `${target}: ${inside} has no heading or anchor "${anchor}"`);
  }
}

for (const file of repositoryFiles()) {
  const buffer = fs.readFileSync(path.join(root, file));
  if (buffer.includes(0)) continue;
  if (file !== 'package-lock.json') {
    buffer
      .toString('utf8')
      .split('\n')
      .forEach((text, i) => {
        for (const [pattern, message] of OUTSIDE) if (pattern.test(text)) report(file, i + 1, message);
      });
  }
  if (file.endsWith('.md')) for (const link of linksOf(file)) checkLink(file, link);
}

if (problems.length > 0) {
  process.stderr.write(`${problems.join('\n')}\n${problems.length} problem(s): the repository's docs must stand alone (scripts/check-docs.mjs)\n`);
  process.exit(1);
}
