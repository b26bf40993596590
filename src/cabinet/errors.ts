/**
 * Errors of the cabinet as HTML pages. Expected refusals are CabinetError (403 for a
 * refused form, 404 for anything not the director's own); a data-store outage is 503;
 * anything else is a bug: 500 with a generic page, the detail only in the log line
 * with the same request id.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isStoreUnavailable } from '../db/index.js';
import type { SafeHtml } from './html.js';
import type { FormRefusal } from './security.js';
import { errorPage } from './views/pages.js';

export class CabinetError extends Error {
  override name = 'CabinetError';
  constructor(
    readonly status: number,
    readonly title: string,
    message: string,
  ) {
    super(message);
  }
}

/** Another school's key, a malformed id and a key that never was look exactly alike. */
export const notFound = () => new CabinetError(404, 'Not found', 'There is no such page or key in your cabinet.');

/** The forms a refusal can be about: the sign-in form (its token lives in a cookie of an hour), or a signed-in page's. */
export type FormKind = 'sign-in' | 'page';

const REFUSALS: Record<Exclude<FormRefusal, 'expired_page'>, string> & Record<'expired_page', Record<FormKind, string>> = {
  other_origin:
    'The browser said this form was sent from another site or address, not from a page of this cabinet. Nothing was changed. Open the cabinet at its own address and send the form from its page; if you did, a browser extension or a proxy may be changing your requests.',
  missing_token: 'The form arrived without its security token, which every cabinet form carries. Nothing was changed. Open the page again and send the form from there.',
  wrong_token: 'The form\'s security token was not one this cabinet gave out: it was changed on the way. Nothing was changed. Open the page again and send the form from there.',
  expired_page: {
    'sign-in':
      'This sign-in page is out of date: it was open for more than an hour, or the browser did not keep the cabinet\'s cookie. Nothing was changed. Open the sign-in page again and retry; if this happens again, allow cookies for this site.',
    page: 'This page is out of date: it was opened before your latest sign-in, so its form is no longer valid. Nothing was changed. Open the page again and retry.',
  },
};

/** The 403 page of a refused form: which check failed and what to do. */
export const formRefused = (reason: FormRefusal, form: FormKind) =>
  new CabinetError(403, 'Form not accepted', reason === 'expired_page' ? REFUSALS.expired_page[form] : REFUSALS[reason]);

export function sendPage(reply: FastifyReply, status: number, page: SafeHtml): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(page.value);
}

function sendError(request: FastifyRequest, reply: FastifyReply, status: number, title: string, message: string): FastifyReply {
  return sendPage(reply, status, errorPage({ status, title, message, requestId: request.id, viewer: request.cabinet ?? undefined }));
}

const CLIENT_ERRORS: Record<number, [string, string]> = {
  413: ['Form too large', 'The form sent was larger than any cabinet form can be. Nothing was changed.'],
  415: ['Form not accepted', 'Cabinet forms are sent as ordinary HTML forms. Nothing was changed.'],
};

export function cabinetErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (error instanceof CabinetError) return sendError(request, reply, error.status, error.title, error.message);
  if (isStoreUnavailable(error)) {
    request.log.error({ err: error }, 'data store unavailable');
    reply.header('Retry-After', '5');
    return sendError(request, reply, 503, 'Temporarily unavailable', 'The cabinet cannot reach its data store right now. Nothing was changed; try again in a moment.');
  }
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    if (status === 404) return sendError(request, reply, 404, notFound().title, notFound().message);
    const [title, message] = CLIENT_ERRORS[status] ?? ['Bad request', 'The request could not be understood. Nothing was changed.'];
    return sendError(request, reply, status === 413 || status === 415 ? status : 400, title, message);
  }
  request.log.error({ err: error }, 'unhandled error');
  return sendError(request, reply, 500, 'Something went wrong', 'The cabinet could not finish this request. The request id below identifies it in our logs.');
}

export function cabinetNotFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return sendError(request, reply, 404, notFound().title, notFound().message);
}
