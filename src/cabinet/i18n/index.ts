/**
 * The language of a cabinet page: `?lang=` (a switch link, remembered in a cookie), else
 * the cookie, else the browser's Accept-Language weighed by its q-values between the two
 * the cabinet speaks, else English. Only `en` and `ru` are ever taken from the request,
 * so nothing it sends is reflected. Why a cookie and a GET link: docs/decisions.md.
 */
import negotiate from '@fastify/accept-negotiator';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { en, type Messages } from './en.js';
import { formatCount, formatDay, formatEnd, formatTime, LANGS, type Lang } from './format.js';
import { ru } from './ru.js';

export { LANGS, type Lang } from './format.js';
export type { ErrorPage, Messages, WarningKind } from './en.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The language of the cabinet page being answered (set by an `onRequest` hook once the cookies are read). */
    locale: Locale | null;
  }
}

/** A language's catalogue and formats: what every page is rendered with. */
export interface Locale {
  lang: Lang;
  t: Messages;
  /** A stored UTC timestamp in the school's time zone; `fallback` (default "never") when there is none. */
  when(timestamp: string | null, timeZone: string, fallback?: string): string;
  /** As `when`, for the moment a key ends: a local midnight is 24:00 of the day before. */
  ends(timestamp: string | null, timeZone: string, fallback?: string): string;
  count(n: number): string;
  day(day: string): string;
}

function localeOf(lang: Lang, t: Messages): Locale {
  return {
    lang,
    t,
    when: (timestamp, timeZone, fallback = t.key.never) => (timestamp === null ? fallback : formatTime(lang, timestamp, timeZone)),
    ends: (timestamp, timeZone, fallback = t.key.never) => (timestamp === null ? fallback : formatEnd(lang, timestamp, timeZone)),
    count: (n) => formatCount(lang, n),
    day: (day) => formatDay(lang, day),
  };
}

export const LOCALES: Readonly<Record<Lang, Locale>> = { en: localeOf('en', en), ru: localeOf('ru', ru) };

/** Remembers the switched language: a year, every path; Lax so a link from a mail keeps it. */
export const LANG_COOKIE = '__Host-sd_lang';
const LANG_COOKIE_OPTIONS = { path: '/', secure: true, httpOnly: true, sameSite: 'lax', maxAge: 365 * 86_400 } as const;

const isLang = (value: unknown): value is Lang => typeof value === 'string' && (LANGS as readonly string[]).includes(value);

/** Longer than any browser sends; a longer header is not read at all. */
const HEADER_MAX = 512;

/**
 * The language an Accept-Language header prefers, or null when it names neither. Each
 * range counts as its primary subtag (`ru-RU` is `ru`), its q-value kept; on equal
 * weights English wins, as it does for `*`.
 */
export function preferredLang(header: string | undefined): Lang | null {
  if (header === undefined || header.length > HEADER_MAX) return null;
  const ranges = header.split(',').map((range) => {
    const [tag = '', ...params] = range.split(';');
    const primary = tag.trim().toLowerCase().split('-')[0] ?? '';
    return [primary, ...params].join(';');
  });
  const chosen = negotiate(ranges.join(','), [...LANGS]);
  return isLang(chosen) ? chosen : null;
}

/** The request's language (see the head comment); a `?lang=` choice is set in the cookie. */
export function chooseLocale(request: FastifyRequest, reply: FastifyReply): Locale {
  const asked = (request.query as Record<string, unknown> | undefined)?.lang;
  if (isLang(asked)) {
    reply.setCookie(LANG_COOKIE, asked, LANG_COOKIE_OPTIONS);
    return LOCALES[asked];
  }
  const kept = request.cookies?.[LANG_COOKIE];
  if (isLang(kept)) return LOCALES[kept];
  return LOCALES[preferredLang(request.headers['accept-language']) ?? 'en'];
}

/** The switch's link: the page's own GET address with `lang` (the page names it, never the request). */
export function switchHref(here: string, lang: Lang): string {
  return `${here}?lang=${lang}`;
}
