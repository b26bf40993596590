/**
 * A seeded world for API tests: school A (VIP) and school B (Profi) hold the same
 * ids with different data; school C was moved down to Standart after its key was
 * made (402); school D is on Free. Ids are fresh per run so shared Redis counters
 * of earlier runs never interfere.
 */
import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.js';
import { importData } from '../../src/importer/index.js';
import { createKey, revokeKey } from '../../src/management/keys.js';
import { createSchool, setPlan } from '../../src/management/schools.js';
import { schoolData, TZ } from './fixtures.js';

export interface World {
  a: { id: string; key: string; keyId: string };
  b: { id: string; key: string; keyId: string };
  /** A school whose only student ("only-here") has an id no other school uses. */
  lone: { id: string; key: string; keyId: string };
  /** A revoked key of school A. */
  revokedKey: string;
  /** A key of a school on Standart (was Profi when the key was made). */
  downgradedKey: string;
}

async function school(db: Kysely<Database>, plan: string, timezone = TZ): Promise<string> {
  const created = await createSchool(db, { name: `Test ${plan}`, plan, timezone, id: `t_${plan.toLowerCase()}_${randomBytes(5).toString('hex')}` });
  assert.ok(created.ok, created.ok ? '' : created.reason);
  return created.value.id;
}

async function key(db: Kysely<Database>, schoolId: string, name = 'test'): Promise<{ id: string; key: string }> {
  const created = await createKey(db, schoolId, name);
  assert.ok(created.ok, created.ok ? '' : created.reason);
  return created.value;
}

export async function seedWorld(db: Kysely<Database>): Promise<World> {
  const a = await school(db, 'VIP');
  const b = await school(db, 'Profi');
  for (const [id, tag] of [
    [a, 'A'],
    [b, 'B'],
  ] as const) {
    const result = await importData(db, id, schoolData(tag));
    assert.ok(result.ok, JSON.stringify(result));
  }
  // A third school with a student no other school has an id for.
  const lone = await school(db, 'VIP');
  const loneData = await importData(db, lone, {
    groups: [{ id: 'g9', name: 'Группа', category: 'B', branch_id: null }],
    students: [{ id: 'only-here', full_name: 'Только здесь', phone: '+79990000099', email: 'x@example.ru', category: 'B', status: 'enrolled', group_id: 'g9', branch_id: null, created_at: '2026-01-20T09:00:00Z' }],
  });
  assert.ok(loneData.ok, JSON.stringify(loneData));
  const keyLone = await key(db, lone);
  const keyA = await key(db, a);
  const keyB = await key(db, b);
  const revoked = await key(db, a, 'old');
  await revokeKey(db, revoked.id);
  const c = await school(db, 'Profi');
  const downgraded = await key(db, c);
  await setPlan(db, c, 'Standart');
  return {
    a: { id: a, key: keyA.key, keyId: keyA.id },
    b: { id: b, key: keyB.key, keyId: keyB.id },
    lone: { id: lone, key: keyLone.key, keyId: keyLone.id },
    revokedKey: revoked.key,
    downgradedKey: downgraded.key,
  };
}
