/**
 * Errors of the cabinet as HTML pages, in the request's language. Expected refusals are
 * CabinetError (403 for a refused form, 404 for anything not the director's own); a
 * data-store outage is 503, and so is a SQLite file another writer held past the store's
 * timeout, with a page of its own; anything else is a bug: 500 with a generic page, the detail
 * only in the log line with the same request id.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isLockWait, isStoreUnavailable } from '../db/index.js';
import { causeOf } from '../ops/dependency.js';
import type { SafeHtml } from './html.js';
import { chooseLocale, type ErrorPage, type Locale } from './i18n/index.js';
import type { FormRefusal } from './security.js';
import { COOKIE_OPTIONS, SESSION_COOKIE } from './session.js';
import { errorPage } from './views/pages.js';

/** What an error page says: one of the catalogue's pages, or a refused form's reason. */
type ErrorText = { page: ErrorPage } | { refusal: FormRefusal; form: FormKind };

export class CabinetError extends Error {
  override name = 'CabinetError';
  readonly status: number;
  readonly text: ErrorText;

  constructor(
    status: number,
    text: ErrorText,
  ) {
    super('page' in text ? text.page : `form refused: ${text.refusal}`);
    this.status = status;
    this.text = text;
  }
}

/**
 * The session that asked for a change ended while it was made (a sign-out, an operator's
 * reset, a password change): thrown inside the change's transaction, so nothing changed.
 */
export class SessionEnded extends Error {
  override name = 'SessionEnded';

  constructor() {
    super('the session ended while the change was made');
  }
}

/** Sends a browser whose session has ended to sign in again, its cookie cleared. */
export function signInAgain(reply: FastifyReply): FastifyReply {
  reply.clearCookie(SESSION_COOKIE, COOKIE_OPTIONS);
  return reply.redirect('/login?expired=1', 303);
}

/** Another school's key, a malformed id and a key that never was look exactly alike. */
export const notFound = () => new CabinetError(404, { page: 'notFound' });

/** The forms a refusal can be about: the sign-in form (its token lives in a cookie of an hour), or a signed-in page's. */
export type FormKind = 'sign-in' | 'page';

/** The 403 page of a refused form: which check failed and what to do. */
export const formRefused = (refusal: FormRefusal, form: FormKind) => new CabinetError(403, { refusal, form });

function titleAndMessage(locale: Locale, text: ErrorText): { title: string; message: string } {
  const t = locale.t.errors;
  if ('page' in text) return t.pages[text.page];
  const { refusal, form } = text;
  return { title: t.formRefused, message: t.refusals[refusal === 'expired_page' && form === 'sign-in' ? 'expired_sign_in' : refusal] };
}

export function sendPage(reply: FastifyReply, status: number, page: SafeHtml): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(page.value);
}

function sendError(request: FastifyRequest, reply: FastifyReply, status: number, text: ErrorText): FastifyReply {
  // The hook that chooses the language may not have run (a request Fastify refused before it).
  const locale = request.locale ?? chooseLocale(request, reply);
  const viewer = request.cabinet ?? undefined;
  // The switch leads to the cabinet's start, never to the address asked for (which could be anything).
  const here = viewer ? '/settings/api' : '/login';
  return sendPage(reply, status, errorPage({ locale, viewer }, { status, ...titleAndMessage(locale, text), requestId: request.id, here }));
}

export function cabinetErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (error instanceof CabinetError) return sendError(request, reply, error.status, error.text);
  if (error instanceof SessionEnded) {
    request.log.warn({ event: 'cabinet_session_ended' }, error.message);
    return signInAgain(reply);
  }
  // The request's own body failed to arrive (the client dropped it, or was too slow): the
  // error is the connection's, not the store's, and nobody is left to read an answer. Only
  // the request stream's own error: a request whose client left while the store failed
  // is the store's failure.
  if (request.raw.errored === error) {
    request.log.info({ reason: error.message }, 'connection closed before the request body arrived');
    return sendError(request, reply, 400, { page: 'badRequest' });
  }
  if (isStoreUnavailable(error)) {
    // On SQLite, another process held the write lock past the store's timeout: an import merging.
    if (isLockWait(error)) {
      request.log.warn({ cause: causeOf(error) }, 'data store busy with another writer');
      reply.header('Retry-After', '60');
      return sendError(request, reply, 503, { page: 'busy' });
    }
    // Its cause, no stack trace: the store's failure, not the code's.
    request.log.error({ cause: causeOf(error) }, 'data store unavailable');
    reply.header('Retry-After', '5');
    return sendError(request, reply, 503, { page: 'unavailable' });
  }
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    if (status === 404) return sendError(request, reply, 404, { page: 'notFound' });
    if (status === 413) return sendError(request, reply, 413, { page: 'tooLarge' });
    if (status === 415) return sendError(request, reply, 415, { page: 'notForm' });
    return sendError(request, reply, 400, { page: 'badRequest' });
  }
  request.log.error({ err: error }, 'unhandled error');
  return sendError(request, reply, 500, { page: 'internal' });
}

export function cabinetNotFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return sendError(request, reply, 404, { page: 'notFound' });
}
