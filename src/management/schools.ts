/**
 * School administration shared by the operator CLI and (later) the cabinet.
 * Expected outcomes are values; only unexpected failures throw.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { holdsKey } from '../access/keys.js';
import { announceKeyChanges } from '../db/index.js';
import { SCHOOL_COLUMNS, type Database, type School } from '../db/schema.js';
import { isPlan, PLANS, type Plan } from '../domain/enums.js';
import { ID } from '../domain/ids.js';
import { currencyInUse } from '../domain/money.js';
import { isOneLine } from '../domain/text.js';
import { canonicalTimeZone, nowTimestamp } from '../domain/time.js';

export type Outcome<T> = { ok: true; value: T } | { ok: false; reason: string };

const fail = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });

export interface NewSchool {
  name: string;
  plan: string;
  timezone?: string | undefined;
  currency?: string | undefined;
  id?: string | undefined;
}

function checkPlan(plan: string): plan is Plan {
  return isPlan(plan);
}

export async function createSchool(db: Kysely<Database>, input: NewSchool): Promise<Outcome<School>> {
  const name = input.name.trim();
  // Characters, as a reader counts them: an emoji is one, not two UTF-16 units.
  const length = [...name].length;
  if (length < 1 || length > 200) return fail('school name must be 1-200 characters');
  if (!isOneLine(name)) return fail('school name must not contain control characters');
  if (holdsKey(name)) return fail('school name must not hold an API key: names are shown in lists');
  if (!checkPlan(input.plan)) return fail(`plan must be one of ${PLANS.join(', ')}`);
  const typed = input.timezone ?? 'Europe/Moscow';
  const timezone = canonicalTimeZone(typed);
  if (timezone === null) return fail(`unknown time zone "${typed}" (use an IANA name such as Europe/Moscow)`);
  const typedCurrency = input.currency ?? 'RUB';
  const currency = currencyInUse(typedCurrency);
  if (currency === null) return fail(`currency must be an ISO 4217 code in use, such as RUB (not "${typedCurrency}")`);
  const id = input.id ?? `sch_${randomBytes(6).toString('hex')}`;
  if (!ID.test(id)) return fail('school id must be 1-64 characters of A-Z a-z 0-9 _ -');
  if (holdsKey(id)) return fail('school id must not hold an API key: ids are written in logs');

  const school: School = { id, name, plan: input.plan, timezone, currency, created_at: nowTimestamp() };
  const inserted = await db.insertInto('schools').values(school).onConflict((oc) => oc.column('id').doNothing()).executeTakeFirst();
  if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 0) return fail(`a school with id "${id}" already exists`);
  return { ok: true, value: school };
}

export async function setPlan(db: Kysely<Database>, schoolId: string, plan: string): Promise<Outcome<School>> {
  if (!checkPlan(plan)) return fail(`plan must be one of ${PLANS.join(', ')}`);
  const result = await db.updateTable('schools').set({ plan }).where('id', '=', schoolId).executeTakeFirst();
  if (Number(result.numUpdatedRows) === 0) return fail(`no school with id "${schoolId}"`);
  await announceKeyChanges(db);
  const school = await db.selectFrom('schools').select(SCHOOL_COLUMNS).where('id', '=', schoolId).executeTakeFirstOrThrow();
  return { ok: true, value: school };
}

export interface SchoolSummary extends School {
  active_keys: number;
}

export async function listSchools(db: Kysely<Database>): Promise<SchoolSummary[]> {
  return db
    .selectFrom('schools')
    .select(SCHOOL_COLUMNS.map((c) => `schools.${c}` as const))
    .select((eb) =>
      eb
        .selectFrom('api_keys')
        .select(eb.fn.countAll<number>().as('n'))
        .whereRef('api_keys.school_id', '=', 'schools.id')
        .where('api_keys.revoked_at', 'is', null)
        .as('active_keys'),
    )
    .orderBy('created_at')
    .orderBy('id')
    .execute() as Promise<SchoolSummary[]>;
}

export async function findSchool(db: Kysely<Database>, schoolId: string): Promise<School | undefined> {
  return db.selectFrom('schools').select(SCHOOL_COLUMNS).where('id', '=', schoolId).executeTakeFirst();
}

/** Whether the database has any school yet (the start banner says how to add some when not). */
export async function hasSchools(db: Kysely<Database>): Promise<boolean> {
  return (await db.selectFrom('schools').select('id').limit(1).executeTakeFirst()) !== undefined;
}
