/**
 * The gate in front of every page of a signed-in director: a valid session (else the
 * sign-in page), and for every form submission a same-origin request carrying the
 * session's form token (else 403 naming the failed check, and nothing changes).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { formRefused, signInAgain, type FormKind } from './errors.js';
import { formField } from './form.js';
import { formRefusal } from './security.js';
import { findSession, SESSION_COOKIE, type SessionPolicy, type SignedIn } from './session.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in director of a cabinet page; null elsewhere. */
    cabinet: SignedIn | null;
  }
}

/**
 * Throws the 403 refusal unless the form comes from this origin with `expected` as its
 * token (undefined: the browser holds none for this form).
 */
export function checkForm(request: FastifyRequest, expected: string | undefined, form: FormKind): asserts expected is string {
  const reason = formRefusal(request, formField(request.body, 'csrf'), expected);
  // Null only when the form carried `expected`, so it is a string from here on.
  if (reason === null) return;
  request.log.warn({ event: 'cabinet_form_refused', reason, origin: request.headers.origin, site: request.headers['sec-fetch-site'] }, `form refused: ${reason}`);
  throw formRefused(reason, form);
}

export function signedIn(db: Kysely<Database>, policy: SessionPolicy) {
  return async function requireSignIn(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const lookup = await findSession(db, request.cookies[SESSION_COOKIE], policy);
    if (lookup.state === 'expired') return signInAgain(reply);
    if (lookup.state !== 'active') return reply.redirect('/login', 303);
    request.cabinet = lookup.session;
    request.log = request.log.child({ directorId: lookup.session.director.id, schoolId: lookup.session.school.id });
    if (request.method === 'POST') checkForm(request, lookup.session.csrf, 'page');
    return undefined;
  };
}
