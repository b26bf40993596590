/**
 * Settings -> API: the school's plan and limit, its keys with their usage, creating a
 * key (shown once, in the answer to the form itself) and revoking one after a
 * confirmation. A director acts on their own school only: any other key id is 404.
 */
import type { FastifyPluginCallback, FastifyReply } from 'fastify';
import type { Kysely } from 'kysely';
import { holdsKey } from '../../access/keys.js';
import { planLimit } from '../../access/plans.js';
import type { Step } from '../../db/index.js';
import type { Database } from '../../db/schema.js';
import { MAX_ALLOW_ENTRIES, parseAllowlist } from '../../domain/addresses.js';
import { ID } from '../../domain/ids.js';
import { isOverlap } from '../../domain/overlaps.js';
import { KEY_SCOPES, type KeyScope } from '../../domain/scopes.js';
import { isOneLine } from '../../domain/text.js';
import { formatTimestamp, nextDay, parseDate, startOfLocalDay, YEAR_10000_MS } from '../../domain/time.js';
import { changeOwnPassword, checkPassword, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH, passwordLength, SESSION_ENDED } from '../../management/directors.js';
import { keyDays, keyRequests } from '../../management/key-activity.js';
import { createKey, findKey, KEY_NAME_MAX, keyEvents, MAX_ACTIVE_KEYS, keyNameLength, listKeys, revokeKey, rollKey, setAllowlist, type KeyCard, type KeyOptions, type KeyPolicy } from '../../management/keys.js';
import type { CabinetContext } from '../context.js';
import { CabinetError, notFound, sendPage, SessionEnded, signInAgain } from '../errors.js';
import { formField, formTicked } from '../form.js';
import { signedView } from '../view.js';
import { signedIn } from '../guard.js';
import type { Messages } from '../i18n/index.js';
import { randomToken, TOKEN_FORMAT } from '../security.js';
import { claimFormNonce, COOKIE_OPTIONS, holdSession, SESSION_COOKIE, startSessionIn } from '../session.js';
import { admitPasswordAttempt } from '../throttle.js';
import { keyPage, type KeyPageModel } from '../views/key.js';
import { keyPath } from '../views/parts.js';
import type { SignedView } from '../views/layout.js';
import { keysPage, newKeyPage, passwordPage, revokePage, type KeysModel } from '../views/pages.js';

type FormText = Messages['form'];

/** The events a key's page shows, newest first (`school-data audit list` prints every one). */
const KEY_PAGE_EVENTS = 200;

/** Why a key name cannot be used, in the words shown under the field; null when it can. */
function keyNameError(t: FormText, name: string | null): string | null {
  const trimmed = name?.trim() ?? '';
  if (trimmed.length === 0) return t.nameMissing;
  const length = keyNameLength(trimmed);
  if (length > KEY_NAME_MAX) return t.nameTooLong(KEY_NAME_MAX, length);
  if (!isOneLine(trimmed)) return t.nameControl;
  if (holdsKey(trimmed)) return t.nameHoldsKey;
  return null;
}

/** Why a new password cannot be used (the rules of management/directors.ts), in the page's words; null when it can. */
function passwordError(t: Messages['password'], next: string): string | null {
  if (checkPassword(next) === null) return null;
  const length = passwordLength(next);
  if (length < PASSWORD_MIN_LENGTH) return t.tooShort(PASSWORD_MIN_LENGTH);
  if (length > PASSWORD_MAX_LENGTH) return t.tooLong(PASSWORD_MAX_LENGTH);
  return t.control;
}

const incomplete = () => new CabinetError(400, { page: 'incomplete' });
const alreadySubmitted = () => new CabinetError(409, { page: 'alreadySent' });

/** The first step of a key change a director asks for: their session must still be signed in (else nothing changes, SessionEnded); the password change checks its own. */
const stillSignedIn =
  (sessionId: string): Step =>
  async (trx) => {
    if (!(await holdSession(trx, sessionId))) throw new SessionEnded();
  };

/** The same, then a create or roll form's one-time token claimed: refused (409) when it was used before. */
const claimOnce =
  (sessionId: string, nonce: string): Step =>
  async (trx) => {
    await stillSignedIn(sessionId)(trx);
    if (!(await claimFormNonce(trx, sessionId, nonce))) throw alreadySubmitted();
  };

/** The scopes ticked in the create form (one checkbox `scope_<name>` each; none ticked: all). */
function tickedScopes(body: unknown): KeyScope[] {
  return KEY_SCOPES.filter((s) => formTicked(body, `scope_${s}`));
}

/** An allowlist as typed (empty: any address, null), or why it is refused, naming the first bad entry. */
function typedAllowlist(t: FormText, text: string): { ok: true; allow: string[] | null } | { ok: false; error: string } {
  if (text === '') return { ok: true, allow: null };
  const parsed = parseAllowlist(text);
  if (parsed.ok) return { ok: true, allow: parsed.entries };
  if (parsed.pastPrefix) return { ok: false, error: t.allowPastPrefix(parsed.pastPrefix) };
  const entries = text.split(',').map((e) => e.trim()).filter((e) => e !== '');
  if (entries.length === 0) return { ok: false, error: t.allowEmpty };
  if (entries.length > MAX_ALLOW_ENTRIES) return { ok: false, error: t.allowTooMany(MAX_ALLOW_ENTRIES) };
  const bad = entries.find((e) => !parseAllowlist(e).ok) ?? text;
  return { ok: false, error: t.allowBad(bad.slice(0, 60)) };
}

/** The end of a local calendar day (`YYYY-MM-DD`) in `timeZone`, as epoch milliseconds; null when not a date. */
function endOfLocalDay(text: string, timeZone: string): number | null {
  const ymd = parseDate(text);
  if (ymd === null) return null;
  return startOfLocalDay(nextDay(ymd), timeZone);
}

/** The create form's options, checked: the values to show again and either the options or why they are refused. */
function formOptions(t: FormText, body: unknown, timeZone: string): { scopes: string[]; expires: string; allow: string; options: KeyOptions | null; error?: string } {
  const scopes = tickedScopes(body);
  const expires = (formField(body, 'expires') ?? '').trim();
  const allow = (formField(body, 'allow') ?? '').trim();
  const refused = (error: string) => ({ scopes, expires, allow, options: null, error });
  const options: KeyOptions = scopes.length === 0 ? {} : { scopes };
  if (expires !== '') {
    const end = endOfLocalDay(expires, timeZone);
    if (end === null) return refused(t.notADate);
    // The stored form has four-digit years: west of UTC, the end of 9999-12-31 is past them.
    if (end >= YEAR_10000_MS) return refused(t.tooLate);
    if (end <= Date.now()) return refused(t.pastDate);
    options.expiresAt = formatTimestamp(end);
  }
  const typed = typedAllowlist(t, allow);
  if (!typed.ok) return refused(typed.error);
  if (typed.allow !== null) options.allow = typed.allow;
  return { scopes, expires, allow, options };
}

export const keyRoutes: FastifyPluginCallback<CabinetContext> = (app, { db, config, policy, limiter }, done) => {
  app.addHook('preHandler', signedIn(db, policy));
  const keyPolicy: KeyPolicy = { unusedDays: config.keyUnusedDays };

  /** The director's own school's key, or 404 for anything else. */
  async function ownKey(view: SignedView, keyId: string, from: Kysely<Database> = db): Promise<KeyCard> {
    const key = ID.test(keyId) ? await findKey(from, keyId, keyPolicy, view.viewer.school.id) : undefined;
    if (!key) throw notFound();
    return key;
  }

  async function showKey(reply: FastifyReply, view: SignedView, status: number, keyId: string, extra: Partial<KeyPageModel> = {}): Promise<FastifyReply> {
    const schoolId = view.viewer.school.id;
    // Read in one snapshot, so that the key's request count and its days agree: a usage flush
    // committing between two reads would show 2 requests beside a bar of 3. (Its last requests
    // are written after the counts, in a transaction of their own: they may be a flush behind.)
    const model = await db
      .transaction()
      .setIsolationLevel('repeatable read')
      .setAccessMode('read only')
      .execute(async (trx) => {
        const key = await ownKey(view, keyId, trx);
        const [requests, days, events] = await Promise.all([
          keyRequests(trx, schoolId, key.id),
          keyDays(trx, schoolId, key.id, 90),
          keyEvents(trx, schoolId, { keyId: key.id, limit: KEY_PAGE_EVENTS + 1 }),
        ]);
        return { key, requests, days, events: events.slice(0, KEY_PAGE_EVENTS), eventsCut: events.length > KEY_PAGE_EVENTS };
      });
    return sendPage(reply, status, keyPage(view, { ...model, nonce: randomToken(), ...extra }));
  }

  async function showKeys(reply: FastifyReply, view: SignedView, status: number, extra: Partial<KeysModel> = {}): Promise<FastifyReply> {
    const keys = await listKeys(db, view.viewer.school.id, keyPolicy);
    return sendPage(reply, status, keysPage(view, { keys, limitPerMinute: planLimit(config, view.viewer.school.plan), nonce: randomToken(), ...extra }));
  }

  /**
   * Why a roll was refused, in the page's words: the key ended or was rolled in the meantime,
   * or there is no place for the new key (the school's plan, or its 10 active keys).
   */
  async function whyNotRolled(view: SignedView, keyId: string): Promise<string> {
    const t = view.locale.t.key;
    const now = await ownKey(view, keyId);
    if (now.status !== 'active' || now.retires_at !== null) return t.notRolled;
    const { plan } = view.viewer.school;
    return planLimit(config, plan) === null ? t.notRolledPlan(plan) : t.notRolledLimit(MAX_ACTIVE_KEYS);
  }

  app.get('/', (_request, reply) => reply.redirect('/settings/api', 303));
  app.get('/settings', (_request, reply) => reply.redirect('/settings/api', 303));

  app.get('/settings/api', async (request, reply) => {
    const view = signedView(request);
    const revokedId = (request.query as Record<string, unknown>).revoked;
    if (typeof revokedId === 'string') {
      const keys = await listKeys(db, view.viewer.school.id, keyPolicy);
      const revoked = keys.find((k) => k.id === revokedId && k.revoked_at !== null);
      if (revoked) return showKeys(reply, view, 200, { notice: { kind: 'success', text: view.locale.t.keys.revoked(revoked.name) } });
    }
    return showKeys(reply, view, 200);
  });

  app.post('/settings/api/keys', async (request, reply) => {
    const view = signedView(request);
    const { viewer } = view;
    const t = view.locale.t.form;
    const name = formField(request.body, 'name');
    const nonce = formField(request.body, 'nonce');
    if (nonce === null || !TOKEN_FORMAT.test(nonce)) throw incomplete();
    const nameError = keyNameError(t, name);
    const typed = formOptions(t, request.body, viewer.school.timezone);
    const again = { scopes: typed.scopes, expires: typed.expires, allow: typed.allow };
    if (nameError !== null || name === null) return showKeys(reply, view, 400, { name: name ?? '', nameError: nameError ?? undefined, ...again });
    if (typed.options === null) return showKeys(reply, view, 400, { name, ...again, ...(typed.error === undefined ? {} : { optionsError: typed.error }) });
    const outcome = await createKey(db, viewer.school.id, name, typed.options, viewer.director.email, keyPolicy, claimOnce(viewer.sessionId, nonce));
    // The form was checked above: what is left is the plan or the key limit, which the page shows.
    if (!outcome.ok) return showKeys(reply, view, 409, { name, ...again, notice: { kind: 'error', text: view.locale.t.keys.notCreated } });
    request.log.info({ event: 'cabinet_key_created', keyId: outcome.value.id }, 'key created');
    // The value exists only in this answer (no-store, like every cabinet page): a reload
    // or a step back cannot bring it back, it is never in a URL, a cookie or a log line.
    return sendPage(reply, 200, newKeyPage(view, outcome.value));
  });

  // A form's own address opened as a page (the address bar after the form's answer, a new key's
  // or a refused form's; a bookmark) leads to the page the form is on, not to a 404.
  app.get('/settings/api/keys', (_request, reply) => reply.redirect('/settings/api', 303));
  for (const form of ['allow', 'roll']) {
    app.get<{ Params: { id: string } }>(`/settings/api/keys/:id/${form}`, async (request, reply) => {
      const key = await ownKey(signedView(request), request.params.id);
      return reply.redirect(keyPath(key), 303);
    });
  }

  app.get<{ Params: { id: string } }>('/settings/api/keys/:id/revoke', async (request, reply) => {
    const view = signedView(request);
    return sendPage(reply, 200, revokePage(view, await ownKey(view, request.params.id)));
  });

  app.post<{ Params: { id: string } }>('/settings/api/keys/:id/revoke', async (request, reply) => {
    const { viewer } = signedView(request);
    const keyId = request.params.id;
    if (!ID.test(keyId)) throw notFound();
    const outcome = await revokeKey(db, keyId, viewer.school.id, viewer.director.email, keyPolicy, stillSignedIn(viewer.sessionId));
    if (!outcome.ok) throw notFound();
    request.log.info({ event: 'cabinet_key_revoked', keyId }, 'key revoked');
    return reply.redirect(`/settings/api?revoked=${encodeURIComponent(keyId)}`, 303);
  });

  app.get('/settings/password', (request, reply) => sendPage(reply, 200, passwordPage(signedView(request))));

  app.post('/settings/password', async (request, reply) => {
    const view = signedView(request);
    const t = view.locale.t.password;
    const next = formField(request.body, 'next') ?? '';
    const refused = (text: string) => sendPage(reply, 400, passwordPage(view, { kind: 'error', text }));
    const badNext = passwordError(t, next);
    if (badNext !== null) return refused(badNext);
    // The current password is tried like a sign-in, per address and per session: a session
    // left open (or taken) must not become a way to guess it without limit, and attempts at
    // the account's sign-in (anyone's) do not keep its director from changing it.
    const admission = await admitPasswordAttempt(limiter, request, reply, view.viewer.director.email, 'cabinet_password_change', { session: view.viewer.sessionId });
    if (!admission.admitted) return sendPage(reply, admission.status, passwordPage(view, { kind: 'error', text: admission.status === 429 ? t.throttled : t.unavailable }));
    const { attempt } = admission;
    // This browser goes on signed in, under a new session: a copy of the old cookie is worthless.
    const outcome = await changeOwnPassword(db, { email: view.viewer.director.email, current: formField(request.body, 'current') ?? '', next, sessionId: view.viewer.sessionId }, (trx) =>
      startSessionIn(trx, view.viewer, policy),
    );
    // Signed out, reset or removed while the change was made: nothing changed, sign in again.
    if (!outcome.ok && outcome.reason === SESSION_ENDED) {
      request.log.warn({ ...attempt, outcome: 'session_ended' }, 'password change: the session ended meanwhile');
      return signInAgain(reply);
    }
    // The new password passed the same rules above: only the current one can be wrong (or was changed meanwhile).
    if (!outcome.ok) {
      request.log.warn({ ...attempt, outcome: 'failed' }, 'password change: current password wrong');
      return refused(t.wrongCurrent);
    }
    request.log.info({ event: 'cabinet_password_changed', directorId: view.viewer.director.id }, 'password changed');
    const renewed = outcome.value;
    reply.setCookie(SESSION_COOKIE, renewed.token, { ...COOKIE_OPTIONS, maxAge: Math.floor(policy.maxMs / 1000) });
    return sendPage(reply, 200, passwordPage({ ...view, viewer: renewed.session }, { kind: 'success', text: t.changed }));
  });

  app.get<{ Params: { id: string } }>('/settings/api/keys/:id', async (request, reply) => {
    const view = signedView(request);
    const saved = (request.query as Record<string, unknown>).saved === '1';
    return showKey(reply, view, 200, request.params.id, saved ? { notice: { kind: 'success', text: view.locale.t.key.allowSaved } } : {});
  });

  app.post<{ Params: { id: string } }>('/settings/api/keys/:id/allow', async (request, reply) => {
    const view = signedView(request);
    const key = await ownKey(view, request.params.id);
    const notSaved = () => showKey(reply, view, 409, key.id, { notice: { kind: 'error', text: view.locale.t.key.allowNotSaved } });
    // Ended while its page was open (revoked, expired, its roll's overlap over), maybe not yet marked so.
    if (key.status !== 'active') return notSaved();
    const text = (formField(request.body, 'allow') ?? '').trim();
    const typed = typedAllowlist(view.locale.t.form, text);
    if (!typed.ok) return showKey(reply, view, 400, key.id, { allow: text, allowError: typed.error });
    const outcome = await setAllowlist(db, key.id, typed.allow, view.viewer.director.email, keyPolicy, view.viewer.school.id, stillSignedIn(view.viewer.sessionId));
    if (!outcome.ok) return notSaved();
    request.log.info({ event: 'cabinet_key_allowlist_changed', keyId: key.id }, 'key allowlist changed');
    return reply.redirect(`/settings/api/keys/${encodeURIComponent(key.id)}?saved=1`, 303);
  });

  app.post<{ Params: { id: string } }>('/settings/api/keys/:id/roll', async (request, reply) => {
    const view = signedView(request);
    const key = await ownKey(view, request.params.id);
    const overlap = formField(request.body, 'overlap') ?? '';
    const nonce = formField(request.body, 'nonce');
    if (!isOverlap(overlap) || nonce === null || !TOKEN_FORMAT.test(nonce)) throw incomplete();
    const outcome = await rollKey(db, key.id, overlap, view.viewer.director.email, keyPolicy, view.viewer.school.id, claimOnce(view.viewer.sessionId, nonce));
    if (!outcome.ok) return showKey(reply, view, 409, key.id, { notice: { kind: 'error', text: await whyNotRolled(view, key.id) } });
    request.log.info({ event: 'cabinet_key_rolled', keyId: key.id, newKeyId: outcome.value.created.id }, 'key rolled');
    return sendPage(reply, 200, newKeyPage(view, outcome.value.created));
  });

  done();
};
