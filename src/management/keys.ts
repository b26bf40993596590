/**
 * API key administration shared by the operator CLI and the director's cabinet.
 * The key value exists only in the result of createKey; the database keeps its hash.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { generateKey } from '../access/keys.js';
import { onPostgres } from '../db/index.js';
import type { Database } from '../db/schema.js';
import { API_PLANS, type Plan } from '../domain/enums.js';
import { nowTimestamp } from '../domain/time.js';
import type { Outcome } from './schools.js';

export const MAX_ACTIVE_KEYS = 10;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/u;

export interface CreatedKey {
  id: string;
  /** The secret value, shown once. */
  key: string;
  name: string;
  hint: string;
  created_at: string;
}

export interface KeyCard {
  id: string;
  name: string;
  hint: string;
  created_at: string;
  last_used_at: string | null;
  request_count: number;
  revoked_at: string | null;
}

export async function createKey(db: Kysely<Database>, schoolId: string, rawName: string): Promise<Outcome<CreatedKey>> {
  const name = rawName.trim();
  if (name.length < 1 || name.length > 100) return { ok: false, reason: 'key name must be 1-100 characters' };
  if (CONTROL_CHARACTERS.test(name)) return { ok: false, reason: 'key name must not contain control characters' };

  return db.transaction().execute(async (trx): Promise<Outcome<CreatedKey>> => {
    // On PostgreSQL the school row is locked so two concurrent creates cannot both pass
    // the limit; SQLite already runs one write transaction at a time.
    let schoolQuery = trx.selectFrom('schools').select(['id', 'plan']).where('id', '=', schoolId);
    if (onPostgres(trx)) schoolQuery = schoolQuery.forUpdate();
    const school = await schoolQuery.executeTakeFirst();
    if (!school) return { ok: false, reason: `no school with id "${schoolId}"` };
    if (!API_PLANS.includes(school.plan as Plan)) {
      return { ok: false, reason: `the school's plan ${school.plan} has no API access; keys are issued on the Profi and VIP plans only` };
    }
    const { active } = await trx
      .selectFrom('api_keys')
      .select((eb) => eb.fn.countAll<number>().as('active'))
      .where('school_id', '=', schoolId)
      .where('revoked_at', 'is', null)
      .executeTakeFirstOrThrow();
    if (Number(active) >= MAX_ACTIVE_KEYS) {
      return { ok: false, reason: `the school already has ${MAX_ACTIVE_KEYS} active keys; revoke an unused key first` };
    }
    const value = generateKey();
    const created: CreatedKey = { id: `key_${randomBytes(8).toString('hex')}`, key: value.key, name, hint: value.hint, created_at: nowTimestamp() };
    await trx
      .insertInto('api_keys')
      .values({ id: created.id, school_id: schoolId, name, key_hash: value.hash, hint: value.hint, created_at: created.created_at })
      .execute();
    return { ok: true, value: created };
  });
}

/** Keys of a school, active first, then newest first. */
export async function listKeys(db: Kysely<Database>, schoolId: string): Promise<KeyCard[]> {
  return db
    .selectFrom('api_keys')
    .select(['id', 'name', 'hint', 'created_at', 'last_used_at', 'request_count', 'revoked_at'])
    .where('school_id', '=', schoolId)
    .orderBy((eb) => eb.case().when('revoked_at', 'is', null).then(0).else(1).end())
    .orderBy('created_at', 'desc')
    .orderBy('id')
    .execute();
}

/**
 * Revokes a key. Immediate: every API request that starts after this returns is
 * refused, because each request reads the key's state from the database.
 * With `schoolId`, only that school's key can be revoked (the cabinet's case).
 */
export async function revokeKey(db: Kysely<Database>, keyId: string, schoolId?: string): Promise<Outcome<KeyCard>> {
  let update = db.updateTable('api_keys').set({ revoked_at: nowTimestamp() }).where('id', '=', keyId).where('revoked_at', 'is', null);
  if (schoolId !== undefined) update = update.where('school_id', '=', schoolId);
  await update.execute();
  let select = db
    .selectFrom('api_keys')
    .select(['id', 'name', 'hint', 'created_at', 'last_used_at', 'request_count', 'revoked_at'])
    .where('id', '=', keyId);
  if (schoolId !== undefined) select = select.where('school_id', '=', schoolId);
  const card = await select.executeTakeFirst();
  if (!card) return { ok: false, reason: `no key with id "${keyId}"` };
  return { ok: true, value: card };
}
