/**
 * Demo data: three schools (VIP, Profi, Standart) with a year of realistic data,
 * loaded through the importer like any other data, one fresh key for each school
 * whose plan has API access, and a director for each school with a fresh password.
 * Prints the keys and the directors' sign-in (both shown once) and a curl line.
 */
import path from 'node:path';
import type { Kysely } from 'kysely';
import { localUrlHost } from '../../config/index.js';
import type { Database, School } from '../../db/schema.js';
import { API_PLANS, type Plan } from '../../domain/enums.js';
import { generateSchoolData } from '../../demo/generate.js';
import { importData } from '../../importer/index.js';
import { addDirector, findDirector, generatePassword, listDirectors, setDirectorPassword } from '../../management/directors.js';
import { createKey, keyRoom } from '../../management/keys.js';
import { createSchool, findSchool } from '../../management/schools.js';
import { loadTls } from '../../tls.js';
import { CliError, holdSignals, refuseIfOutputDiscarded, RUN, table, withStore, type CommandContext } from '../context.js';

export const DEMO_SCHOOLS = [
  { id: 'demo-vip', name: 'Автошкола «Магистраль»', plan: 'VIP', timezone: 'Europe/Moscow', students: 320, seed: 1 },
  { id: 'demo-profi', name: 'Автошкола «Старт»', plan: 'Profi', timezone: 'Asia/Yekaterinburg', students: 180, seed: 2 },
  { id: 'demo-standart', name: 'Автошкола «Перекрёсток»', plan: 'Standart', timezone: 'Europe/Moscow', students: 80, seed: 3 },
] as const;

interface DemoSchoolResult {
  id: string;
  name: string;
  plan: string;
  timezone: string;
  students: number;
  key: string | null;
  key_id: string | null;
  /** The school's director's sign-in to the cabinet; the password is shown once. */
  director: { email: string; password: string };
}

/** The sign-in name of a demo school's director (`.example` is a domain reserved for examples). */
export const demoDirectorEmail = (schoolId: string) => `director@${schoolId}.example`;

/**
 * The demo school's director with a new password: added on the first run, given a new
 * password (and signed out) on a later one, as each run also makes a new key.
 */
async function demoDirector(db: Kysely<Database>, schoolId: string): Promise<{ email: string; password: string }> {
  const email = demoDirectorEmail(schoolId);
  const password = generatePassword();
  const exists = (await listDirectors(db, schoolId)).some((d) => d.email === email);
  const outcome = exists ? await setDirectorPassword(db, email, password) : await addDirector(db, { schoolId, email, password });
  if (!outcome.ok) throw new CliError(`the director of ${schoolId}: ${outcome.reason}`);
  return { email, password };
}

/** The currency of the demo's data, which a demo school must have for it to import. */
const DEMO_CURRENCY = 'RUB';

interface DemoPlace {
  existing: School | undefined;
  /** Whether it gets a key: its plan, as it is now, has API access. */
  keyed: boolean;
}

/**
 * Before anything is written: each demo school as stored (or undefined), or a refusal naming
 * the school and what to do, for whatever would stop the run halfway and leave keys and
 * passwords made and never shown: a stored demo school in another currency than the data's,
 * one with no room for its key, a demo director's email taken by another school's director.
 */
async function demoPlaces(db: Kysely<Database>): Promise<Map<string, DemoPlace>> {
  const places = new Map<string, DemoPlace>();
  const refuse = (schoolId: string, why: string) => new CliError(`${schoolId}: ${why}; nothing was written`);
  for (const spec of DEMO_SCHOOLS) {
    const existing = await findSchool(db, spec.id);
    if (existing && existing.currency !== DEMO_CURRENCY) {
      throw refuse(
        spec.id,
        `the school's currency is ${existing.currency}, the demo's data is in ${DEMO_CURRENCY}: run the demo on a database without this school (another SCHOOL_DATA_DIR or DATABASE_URL), or remove the school first (docs/operations.md, "Removing a school by hand")`,
      );
    }
    const keyed = API_PLANS.includes((existing?.plan ?? spec.plan) as Plan);
    if (existing && keyed) {
      const room = await keyRoom(db, spec.id);
      if (!room.ok) throw refuse(spec.id, `${room.reason} (${RUN} key list --school ${spec.id}): the demo makes one more key`);
    }
    const email = demoDirectorEmail(spec.id);
    const holder = await findDirector(db, email);
    if (holder && holder.school_id !== spec.id) {
      throw refuse(spec.id, `its director's email ${email} is the sign-in of a director of school ${holder.school_id}: remove that director first (${RUN} director remove --email ${email})`);
    }
    places.set(spec.id, { existing, keyed });
  }
  return places;
}

/** What the skipped demo says to do instead: commands for the demo school if it is there. */
async function skippedHint(db: Kysely<Database>): Promise<string> {
  const id = DEMO_SCHOOLS[0].id;
  if (!(await findSchool(db, id))) return `Create a key with: ${RUN} key create --school ID --name NAME`;
  const email = demoDirectorEmail(id);
  const director = (await listDirectors(db, id)).some((d) => d.email === email)
    ? `${RUN} director set-password --email ${email}`
    : `${RUN} director add --school ${id} --email ${email}`;
  return `Create a key with: ${RUN} key create --school ${id} --name try\nSign in to the cabinet with a new password: ${director}`;
}

/**
 * A Ctrl-C (or SIGTERM) while the demo runs stops it once its keys and passwords are written
 * and shown, never between: one made and never shown would hold one of the 10 places, or lock
 * the director out. A second one stops it at once (each school's data is one transaction).
 */
export async function demoCommand(ctx: CommandContext, opts: { ifEmpty?: boolean }): Promise<number> {
  const held = holdSignals('the demo stops once its keys and passwords are shown');
  try {
    const code = await loadDemo(ctx, opts);
    return held.release() ?? code;
  } finally {
    held.release();
  }
}

async function loadDemo(ctx: CommandContext, opts: { ifEmpty?: boolean }): Promise<number> {
  const { config, out } = ctx;
  const now = new Date();
  // Run again, it makes keys and new passwords for directors who may use the old ones. On an
  // empty store (`npm start`, which a service manager may start with no output) nothing that
  // was there is lost: its keys can be made with `key create`.
  if (!opts.ifEmpty) refuseIfOutputDiscarded('the demo keys and passwords');
  const results = await withStore(config, async (store) => {
    if (opts.ifEmpty) {
      const any = await store.db.selectFrom('schools').select('id').limit(1).executeTakeFirst();
      if (any) return { skipped: await skippedHint(store.db) };
    }
    // The certificate the curl line trusts, before anything is written: a configured file
    // that cannot be read would otherwise stop the run after keys and passwords were made.
    const tls = await loadTls(config);
    const places = await demoPlaces(store.db);
    // Every school's data before any key or password: a refusal the checks above did not
    // foresee then stops the run with no secret made and unshown.
    for (const spec of DEMO_SCHOOLS) {
      const { existing } = places.get(spec.id)!;
      if (!existing) {
        const created = await createSchool(store.db, { ...spec, currency: DEMO_CURRENCY });
        if (!created.ok) throw new CliError(created.reason);
      }
      // A school made by an earlier run keeps its time zone, as it keeps its plan.
      const data = generateSchoolData({ seed: spec.seed, students: spec.students, now, timezone: existing?.timezone ?? spec.timezone, currency: DEMO_CURRENCY });
      const imported = await importData(store.db, spec.id, data);
      if (!imported.ok) throw new CliError(`demo data for ${spec.id} did not import: ${imported.errors[0]?.reason ?? 'unknown error'}; no key or password was made`);
    }
    const loaded: DemoSchoolResult[] = [];
    for (const spec of DEMO_SCHOOLS) {
      const { existing, keyed } = places.get(spec.id)!;
      let key: { id: string; key: string } | null = null;
      if (keyed) {
        const created = await createKey(store.db, spec.id, `demo ${now.toISOString().slice(0, 10)}`);
        if (!created.ok) throw new CliError(created.reason);
        key = created.value;
      }
      const director = await demoDirector(store.db, spec.id);
      loaded.push({ id: spec.id, name: spec.name, plan: existing?.plan ?? spec.plan, timezone: existing?.timezone ?? spec.timezone, students: spec.students, key: key?.key ?? null, key_id: key?.id ?? null, director });
    }
    return { loaded, tls };
  });

  if ('skipped' in results) {
    out.result({ skipped: true, reason: 'the database already has schools' }, `Demo skipped: the database already has schools.\n${results.skipped}`);
    return 0;
  }

  // The curl line must work as printed: it trusts the certificate the server will use.
  const { loaded: schools, tls } = results;
  const cert = path.relative(process.cwd(), tls.certPath) || tls.certPath;
  const host = localUrlHost(config.host);
  const base = `https://${host}:${config.port}/api/public/v1/`;
  const demoKey = schools.find((r) => r.key)?.key ?? '';
  const curl = `curl --cacert ${cert} -H "Authorization: Bearer ${demoKey}" "${base}students?limit=2"`;
  const cabinet = `https://${host}:${config.cabinetPort}/`;
  out.result({ base_url: base, cabinet_url: cabinet, cert: tls.certPath, schools, curl }, () =>
    [
      'Demo data loaded:',
      table(
        ['SCHOOL', 'PLAN', 'TIME ZONE', 'STUDENTS', 'KEY (shown once)'],
        schools.map((r) => [r.id, r.plan, r.timezone, r.students, r.key ?? '(no API access on this plan)']),
      ),
      '',
      `Director's cabinet: ${cabinet} (sign in as a school's director to see its keys and make more)`,
      table(
        ['SCHOOL', 'EMAIL', 'PASSWORD (shown once)'],
        schools.map((r) => [r.id, r.director.email, r.director.password]),
      ),
      '',
      `Base URL: ${base}`,
      `Demo key: ${demoKey}`,
      `Once the server is up (${RUN} serve; npm start starts it for you), try:`,
      `  ${curl}`,
    ].join('\n'),
    {
      made: `the demo schools were loaded with new keys and directors' passwords`,
      remedy: `make a key with ${RUN} key create --school <id> --name <name>, and passwords with ${RUN} director set-password --email <email>`,
    },
  );
  return 0;
}
