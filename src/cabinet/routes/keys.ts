/**
 * Settings -> API: the school's plan and limit, its keys with their usage, creating a
 * key (shown once, in the answer to the form itself) and revoking one after a
 * confirmation. A director acts on their own school only: any other key id is 404.
 */
import type { FastifyPluginCallback, FastifyReply } from 'fastify';
import { planLimit } from '../../access/plans.js';
import { ID } from '../../domain/ids.js';
import { createKey, listKeys, revokeKey, type KeyCard } from '../../management/keys.js';
import type { CabinetContext } from '../context.js';
import { CabinetError, notFound, sendPage } from '../errors.js';
import { formField } from '../form.js';
import { signedIn } from '../guard.js';
import { randomToken, TOKEN_FORMAT } from '../security.js';
import { claimFormNonce, type SignedIn } from '../session.js';
import { keysPage, newKeyPage, revokePage, type KeysModel } from '../views/pages.js';

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

export const keyRoutes: FastifyPluginCallback<CabinetContext> = (app, { db, config, policy }, done) => {
  app.addHook('preHandler', signedIn(db, policy));

  /** The director's own school's key, or 404 for anything else. */
  async function ownKey(viewer: SignedIn, keyId: string): Promise<KeyCard> {
    const key = ID.test(keyId) ? (await listKeys(db, viewer.school.id)).find((k) => k.id === keyId) : undefined;
    if (!key) throw notFound();
    return key;
  }

  async function showKeys(reply: FastifyReply, viewer: SignedIn, status: number, extra: Partial<KeysModel> = {}): Promise<FastifyReply> {
    const keys = await listKeys(db, viewer.school.id);
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
      const keys = await listKeys(db, viewer.school.id);
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
    if (nameError !== null || name === null) return showKeys(reply, viewer, 400, { name: name ?? '', nameError: nameError ?? undefined });
    if (!(await claimFormNonce(db, viewer.sessionId, nonce))) throw alreadySubmitted();

    const outcome = await createKey(db, viewer.school.id, name);
    if (!outcome.ok) return showKeys(reply, viewer, 409, { name, notice: { kind: 'error', text: `${capitalise(outcome.reason)}.` } });
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
    const outcome = await revokeKey(db, keyId, viewer.school.id);
    if (!outcome.ok) throw notFound();
    request.log.info({ event: 'cabinet_key_revoked', keyId }, 'key revoked');
    return reply.redirect(`/settings/api?revoked=${encodeURIComponent(keyId)}`, 303);
  });

  done();
};
