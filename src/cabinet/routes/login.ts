/**
 * Signing in and out. The sign-in form carries a token that is also in a cookie of its
 * own (there is no session yet to hold it); every attempt is throttled before the
 * password is checked; and a wrong email and a wrong password get the same answer.
 */
import type { FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify';
import { verifyDirector } from '../../management/directors.js';
import { sendPage } from '../errors.js';
import { formField } from '../form.js';
import { checkForm, signedIn } from '../guard.js';
import type { CabinetContext } from '../context.js';
import { randomToken, TOKEN_FORMAT } from '../security.js';
import { COOKIE_OPTIONS, endSession, endSessionByToken, findSession, LOGIN_COOKIE, SESSION_COOKIE, startSession } from '../session.js';
import { admitPasswordAttempt } from '../throttle.js';
import { publicView } from '../view.js';
import { loginPage, type Notice } from '../views/pages.js';
import type { Messages } from '../i18n/index.js';

const LOGIN_FORM_SECONDS = 3600;

/** The notices the sign-in page shows for a query flag (`/login?expired=1`, `/login?signed-out`). */
const NOTICES: Record<string, (t: Messages['login']) => Notice> = {
  expired: (t) => ({ kind: 'info', text: t.expired }),
  'signed-out': (t) => ({ kind: 'success', text: t.signedOut }),
};

/** The sign-in form's token: the browser's current one, or a new one set in its cookie. */
function loginToken(request: FastifyRequest, reply: FastifyReply): string {
  const current = request.cookies[LOGIN_COOKIE];
  const token = current !== undefined && TOKEN_FORMAT.test(current) ? current : randomToken();
  reply.setCookie(LOGIN_COOKIE, token, { ...COOKIE_OPTIONS, maxAge: LOGIN_FORM_SECONDS });
  return token;
}

export const loginRoutes: FastifyPluginCallback<CabinetContext> = (app, { db, limiter, policy }, done) => {
  app.get('/login', async (request, reply) => {
    const lookup = await findSession(db, request.cookies[SESSION_COOKIE], policy);
    if (lookup.state === 'active') return reply.redirect('/settings/api', 303);
    if (lookup.state === 'expired') reply.clearCookie(SESSION_COOKIE, COOKIE_OPTIONS);
    const query = request.query as Record<string, unknown>;
    const view = publicView(request);
    const notice = Object.keys(NOTICES).find((k) => Object.hasOwn(query, k));
    return sendPage(reply, 200, loginPage(view, { csrf: loginToken(request, reply), notice: notice ? NOTICES[notice]?.(view.locale.t.login) : undefined }));
  });

  app.post('/login', async (request, reply) => {
    const formToken = request.cookies[LOGIN_COOKIE];
    checkForm(request, formToken, 'sign-in');

    const email = formField(request.body, 'email')?.trim() ?? '';
    const password = formField(request.body, 'password') ?? '';
    const view = publicView(request);
    const t = view.locale.t.login;
    const again = (status: number, text: string) => sendPage(reply, status, loginPage(view, { csrf: formToken, email, notice: { kind: 'error', text } }));
    if (email === '' || password === '') return again(400, t.enterBoth);

    const admission = await admitPasswordAttempt(limiter, request, reply, email, 'cabinet_login');
    if (!admission.admitted) return again(admission.status, admission.status === 429 ? t.throttled : t.unavailable);
    const { attempt } = admission;

    const director = await verifyDirector(db, email, password);
    if (!director) {
      request.log.warn({ ...attempt, outcome: 'failed' }, 'sign-in failed');
      return again(400, t.wrong);
    }
    await endSessionByToken(db, request.cookies[SESSION_COOKIE]);
    const token = await startSession(db, director.id, policy);
    reply.setCookie(SESSION_COOKIE, token, { ...COOKIE_OPTIONS, maxAge: Math.floor(policy.maxMs / 1000) });
    reply.clearCookie(LOGIN_COOKIE, COOKIE_OPTIONS);
    request.log.info({ ...attempt, outcome: 'ok', directorId: director.id, schoolId: director.school_id }, 'signed in');
    return reply.redirect('/settings/api', 303);
  });

  app.post('/logout', { preHandler: signedIn(db, policy) }, async (request, reply) => {
    const viewer = request.cabinet;
    if (viewer) await endSession(db, viewer.sessionId);
    reply.clearCookie(SESSION_COOKIE, COOKIE_OPTIONS);
    request.log.info({ event: 'cabinet_logout' }, 'signed out');
    return reply.redirect('/login?signed-out', 303);
  });

  done();
};
