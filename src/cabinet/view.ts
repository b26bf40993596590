/** The view a route renders its page with: the request's language and, behind the sign-in gate, its director. */
import type { FastifyRequest } from 'fastify';
import { LOCALES } from './i18n/index.js';
import type { SignedView, View } from './views/layout.js';

export function publicView(request: FastifyRequest): View {
  return { locale: request.locale ?? LOCALES.en, viewer: request.cabinet ?? undefined };
}

/** The view of a page behind the sign-in gate (guard.ts), which set the director. */
export function signedView(request: FastifyRequest): SignedView {
  if (!request.cabinet) throw new Error('cabinet page reached without a signed-in director');
  return { locale: request.locale ?? LOCALES.en, viewer: request.cabinet };
}
