/**
 * Demo data: three schools (VIP, Profi, Standart) with a year of realistic data,
 * loaded through the importer like any other data, and one fresh key for each
 * school whose plan has API access. Prints the keys (shown once) and a curl line.
 */
import path from 'node:path';
import { generateSchoolData } from '../../demo/generate.js';
import { importData } from '../../importer/index.js';
import { createKey } from '../../management/keys.js';
import { createSchool, findSchool } from '../../management/schools.js';
import { loadTls } from '../../tls.js';
import { CliError, table, withStore, type CommandContext } from '../context.js';

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
}

export async function demoCommand(ctx: CommandContext, opts: { ifEmpty?: boolean }): Promise<number> {
  const { config, out } = ctx;
  const now = new Date();
  const results = await withStore(config, async (store) => {
    if (opts.ifEmpty) {
      const any = await store.db.selectFrom('schools').select('id').limit(1).executeTakeFirst();
      if (any) return null;
    }
    const loaded: DemoSchoolResult[] = [];
    for (const spec of DEMO_SCHOOLS) {
      if (!(await findSchool(store.db, spec.id))) {
        const created = await createSchool(store.db, spec);
        if (!created.ok) throw new CliError(created.reason);
      }
      const data = generateSchoolData({ seed: spec.seed, students: spec.students, now, timezone: spec.timezone });
      const imported = await importData(store.db, spec.id, data);
      if (!imported.ok) throw new CliError(`demo data for ${spec.id} did not import: ${imported.errors[0]?.reason ?? 'unknown error'}`);
      let key: { id: string; key: string } | null = null;
      if (spec.plan !== 'Standart') {
        const created = await createKey(store.db, spec.id, `demo ${now.toISOString().slice(0, 10)}`);
        if (!created.ok) throw new CliError(created.reason);
        key = created.value;
      }
      loaded.push({ id: spec.id, name: spec.name, plan: spec.plan, timezone: spec.timezone, students: spec.students, key: key?.key ?? null, key_id: key?.id ?? null });
    }
    return loaded;
  });

  if (results === null) {
    out.result({ skipped: true, reason: 'the database already has schools' }, 'Demo skipped: the database already has schools. Create a key with: school-data key create --school demo-vip --name try');
    return 0;
  }

  // The curl line must work as printed: it trusts the certificate the server will use.
  const tls = await loadTls(config);
  const cert = path.relative(process.cwd(), tls.certPath) || tls.certPath;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const base = `https://${host}:${config.port}/api/public/v1/`;
  const demoKey = results.find((r) => r.key)?.key ?? '';
  const curl = `curl --cacert ${cert} -H "Authorization: Bearer ${demoKey}" "${base}students?limit=2"`;
  out.result({ base_url: base, cert: tls.certPath, schools: results, curl }, () =>
    [
      'Demo data loaded:',
      table(
        ['SCHOOL', 'PLAN', 'TIME ZONE', 'STUDENTS', 'KEY (shown once)'],
        results.map((r) => [r.id, r.plan, r.timezone, r.students, r.key ?? '(no API access on this plan)']),
      ),
      '',
      `Base URL: ${base}`,
      `Demo key: ${demoKey}`,
      'Try it once the server is up:',
      `  ${curl}`,
    ].join('\n'),
  );
  return 0;
}
