/**
 * Settings -> API: the school's plan and limit, its keys with their usage, creating a
 * key (shown once, in the answer to the form itself) and revoking one after a
 * confirmation. A director acts on their own school only: any other key id is 404.
 */
import type { FastifyPluginCallback, FastifyReply } from 'fastify';
import { planLimit } from '../../access/plans.js';
import { ID } from '../../domain/ids.js';
import { parseAllowlist } from '../../domain/addresses.js';
import { KEY_SCOPES, type KeyScope } from '../../domain/scopes.js';
import { formatTimestamp, parseDate, startOfLocalDay } from '../../domain/time.js';
import { keyDays, keyRequests } from '../../management/key-activity.js';
import { createKey, findKey, isOverlap, keyEvents, listKeys, parseKeyOptions, revokeKey, rollKey, setAllowlist, type KeyCard, type KeyOptions, type KeyPolicy } from '../../management/keys.js';
import type { CabinetContext } from '../context.js';
import { CabinetError, notFound, sendPage } from '../errors.js';
import { formField } from '../form.js';
import { signedIn } from '../guard.js';
import { randomToken, TOKEN_FORMAT } from '../security.js';
import { claimFormNonce, type SignedIn } from '../session.js';
import { keyPage, type KeyPageModel } from '../views/key.js';
import { keysPage, newKeyPage, passwordPage, revokePage, type KeysModel } from '../views/pages.js';
import { changeOwnPassword } from '../../management/directors.js';

const KEY_NAME_MAX = 100;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f]/u;

/** Why a key name cannot be used, in the words shown under the field; null when it can. */
function keyNameError(name: string | null): string | null {
  const trimmed = name?.trim() ?? '';
  if (trimmed.length === 0) return 'Enter a name for the key.';
  if (trimmed.length > KEY_NAME_MAX) return `The name can be at most ${KEY_NAME_MAX} characters long (it has ${trimmed.length}).`;
  if (CONTROL.test(trimmed)) return 'The name cannot contain control characters such as tabs or line breaks.';
  return null;
}

const capitalise = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

const alreadySubmitted = () =>
  new CabinetError(
    409,
    'Form already sent',
    'This form was already sent. A new key is shown only once, right after it is created, so it cannot be shown again. Open API keys to see your keys; revoke a key you did not copy and create another.',
  );

/** The scopes ticked in the create form (one checkbox `scope_<name>` each; none ticked: all). */
function tickedScopes(body: unknown): KeyScope[] {
  return KEY_SCOPES.filter((s) => formField(body, `scope_${s}`) !== null);
}

/** The end of a local calendar day (`YYYY-MM-DD`) in `timeZone`, as an RFC 3339 UTC timestamp; null when not a date. */
function endOfLocalDay(text: string, timeZone: string): string | null {
  const ymd = parseDate(text);
  if (ymd === null) return null;
  const next = new Date(Date.UTC(ymd[0], ymd[1] - 1, ymd[2] + 1));
  return formatTimestamp(startOfLocalDay([next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate()], timeZone));
}

/** The create form's options, checked: the values to show again and either the options or why they are refused. */
function formOptions(body: unknown, timeZone: string): { scopes: string[]; expires: string; allow: string; options: KeyOptions | null; error?: string } {
  const scopes: string[] = tickedScopes(body);
  const expires = (formField(body, 'expires') ?? '').trim();
  const allow = (formField(body, 'allow') ?? '').trim();
  let expiresAt: string | undefined;
  if (expires !== '') {
    const end = endOfLocalDay(expires, timeZone);
    if (end === null) return { scopes, expires, allow, options: null, error: 'The expiry date is not a date.' };
    expiresAt = end;
  }
  const parsed = parseKeyOptions({ scopes: scopes.join(','), expires: expiresAt, allow });
  if (!parsed.ok) return { scopes, expires, allow, options: null, error: `${capitalise(parsed.reason)}.` };
  return { scopes, expires, allow, options: parsed.value };
}

export const keyRoutes: FastifyPluginCallback<CabinetContext> = (app, { db, config, policy }, done) => {
  app.addHook('preHandler', signedIn(db, policy));
  const keyPolicy: KeyPolicy = { unusedDays: config.keyUnusedDays };

  /** The director's own school's key, or 404 for anything else. */
  async function ownKey(viewer: SignedIn, keyId: string): Promise<KeyCard> {
    const key = ID.test(keyId) ? await findKey(db, keyId, keyPolicy, viewer.school.id) : undefined;
    if (!key) throw notFound();
    return key;
  }

  async function showKey(reply: FastifyReply, viewer: SignedIn, status: number, keyId: string, extra: Partial<KeyPageModel> = {}): Promise<FastifyReply> {
    const key = await ownKey(viewer, keyId);
    const [requests, days, events] = await Promise.all([
      keyRequests(db, viewer.school.id, key.id),
      keyDays(db, viewer.school.id, key.id, 90),
      keyEvents(db, viewer.school.id, { keyId: key.id, limit: 200 }),
    ]);
    return sendPage(reply, status, keyPage({ viewer, key, requests, days, events, nonce: randomToken(), ...extra }));
  }

  async function showKeys(reply: FastifyReply, viewer: SignedIn, status: number, extra: Partial<KeysModel> = {}): Promise<FastifyReply> {
    const keys = await listKeys(db, viewer.school.id, keyPolicy);
    return sendPage(reply, status, keysPage({ viewer, keys, limitPerMinute: planLimit(config, viewer.school.plan), nonce: randomToken(), ...extra }));
  }

  const viewerOf = (request: { cabinet: SignedIn | null }): SignedIn => {
    if (!request.cabinet) throw new Error('cabinet page reached without a signed-in director');
    return request.cabinet;
  };

  app.get('/', (_request, reply) => reply.redirect('/settings/api', 303));
  app.get('/settings', (_request, reply) => reply.redirect('/settings/api', 303));

  app.get('/settings/api', async (request, reply) => {
    const viewer = viewerOf(request);
    const revokedId = (request.query as Record<string, unknown>).revoked;
    if (typeof revokedId === 'string') {
      const keys = await listKeys(db, viewer.school.id, keyPolicy);
      const revoked = keys.find((k) => k.id === revokedId && k.revoked_at !== null);
      if (revoked) {
        return showKeys(reply, viewer, 200, { notice: { kind: 'success', text: `The key “${revoked.name}” is revoked: every request with it is now refused (401).` } });
      }
    }
    return showKeys(reply, viewer, 200);
  });

  app.post('/settings/api/keys', async (request, reply) => {
    const viewer = viewerOf(request);
    const name = formField(request.body, 'name');
    const nonce = formField(request.body, 'nonce');
    if (nonce === null || !TOKEN_FORMAT.test(nonce)) throw new CabinetError(400, 'Form not accepted', 'The form was incomplete. Nothing was changed. Open API keys again and retry.');
    const nameError = keyNameError(name);
    const typed = formOptions(request.body, viewer.school.timezone);
    const again = { scopes: typed.scopes, expires: typed.expires, allow: typed.allow };
    if (nameError !== null || name === null) return showKeys(reply, viewer, 400, { name: name ?? '', nameError: nameError ?? undefined, ...again });
    if (typed.options === null) return showKeys(reply, viewer, 400, { name, ...again, ...(typed.error === undefined ? {} : { optionsError: typed.error }) });
    if (!(await claimFormNonce(db, viewer.sessionId, nonce))) throw alreadySubmitted();

    const outcome = await createKey(db, viewer.school.id, name, typed.options, viewer.director.email, keyPolicy);
    if (!outcome.ok) return showKeys(reply, viewer, 409, { name, ...again, notice: { kind: 'error', text: `${capitalise(outcome.reason)}.` } });
    request.log.info({ event: 'cabinet_key_created', keyId: outcome.value.id }, 'key created');
    // The value exists only in this answer (no-store, like every cabinet page): a reload
    // or a step back cannot bring it back, it is never in a URL, a cookie or a log line.
    return sendPage(reply, 200, newKeyPage(viewer, outcome.value));
  });

  app.get<{ Params: { id: string } }>('/settings/api/keys/:id/revoke', async (request, reply) => {
    const viewer = viewerOf(request);
    return sendPage(reply, 200, revokePage(viewer, await ownKey(viewer, request.params.id)));
  });

  app.post<{ Params: { id: string } }>('/settings/api/keys/:id/revoke', async (request, reply) => {
    const viewer = viewerOf(request);
    const keyId = request.params.id;
    if (!ID.test(keyId)) throw notFound();
    const outcome = await revokeKey(db, keyId, viewer.school.id, viewer.director.email, keyPolicy);
    if (!outcome.ok) throw notFound();
    request.log.info({ event: 'cabinet_key_revoked', keyId }, 'key revoked');
    return reply.redirect(`/settings/api?revoked=${encodeURIComponent(keyId)}`, 303);
  });

  app.get('/settings/password', (request, reply) => sendPage(reply, 200, passwordPage(viewerOf(request))));

  app.post('/settings/password', async (request, reply) => {
    const viewer = viewerOf(request);
    const outcome = await changeOwnPassword(db, {
      email: viewer.director.email,
      current: formField(request.body, 'current') ?? '',
      next: formField(request.body, 'next') ?? '',
      keepSessionId: viewer.sessionId,
    });
    if (!outcome.ok) return sendPage(reply, 400, passwordPage(viewer, { kind: 'error', text: `${capitalise(outcome.reason)}.` }));
    request.log.info({ event: 'cabinet_password_changed', directorId: viewer.director.id }, 'password changed');
    return sendPage(reply, 200, passwordPage(viewer, { kind: 'success', text: 'Your password is changed; every other sign-in of yours has ended.' }));
  });

  app.get<{ Params: { id: string } }>('/settings/api/keys/:id', async (request, reply) => {
    const viewer = viewerOf(request);
    const saved = (request.query as Record<string, unknown>).saved === '1';
    return showKey(reply, viewer, 200, request.params.id, saved ? { notice: { kind: 'success', text: 'The addresses are saved: the next request with this key is checked against them.' } } : {});
  });

  app.post<{ Params: { id: string } }>('/settings/api/keys/:id/allow', async (request, reply) => {
    const viewer = viewerOf(request);
    const key = await ownKey(viewer, request.params.id);
    const typed = (formField(request.body, 'allow') ?? '').trim();
    let allow: string[] | null = null;
    if (typed !== '') {
      const parsed = parseAllowlist(typed);
      if (!parsed.ok) return showKey(reply, viewer, 400, key.id, { allow: typed, allowError: `${capitalise(parsed.reason)}.` });
      allow = parsed.entries;
    }
    const outcome = await setAllowlist(db, key.id, allow, viewer.director.email, keyPolicy, viewer.school.id);
    if (!outcome.ok) return showKey(reply, viewer, 409, key.id, { notice: { kind: 'error', text: `${capitalise(outcome.reason)}.` } });
    request.log.info({ event: 'cabinet_key_allowlist_changed', keyId: key.id }, 'key allowlist changed');
    return reply.redirect(`/settings/api/keys/${encodeURIComponent(key.id)}?saved=1`, 303);
  });

  app.post<{ Params: { id: string } }>('/settings/api/keys/:id/roll', async (request, reply) => {
    const viewer = viewerOf(request);
    const key = await ownKey(viewer, request.params.id);
    const overlap = formField(request.body, 'overlap') ?? '';
    const nonce = formField(request.body, 'nonce');
    if (!isOverlap(overlap) || nonce === null || !TOKEN_FORMAT.test(nonce)) throw new CabinetError(400, 'Form not accepted', 'The form was incomplete. Nothing was changed. Open the key again and retry.');
    if (!(await claimFormNonce(db, viewer.sessionId, nonce))) throw alreadySubmitted();
    const outcome = await rollKey(db, key.id, overlap, viewer.director.email, keyPolicy, viewer.school.id);
    if (!outcome.ok) return showKey(reply, viewer, 409, key.id, { notice: { kind: 'error', text: `${capitalise(outcome.reason)}.` } });
    request.log.info({ event: 'cabinet_key_rolled', keyId: key.id, newKeyId: outcome.value.created.id }, 'key rolled');
    return sendPage(reply, 200, newKeyPage(viewer, outcome.value.created));
  });

  done();
};
