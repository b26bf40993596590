/**
 * The key commands of docs/api/keys.md as a real process against the real store: options
 * at creation, roll, allow, log, audit list and the list's options; every bad value one
 * line on stderr, a non-zero exit, and nothing written.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { keyCreate } from '../../src/cli/commands/key/create.js';
import { createOutput } from '../../src/cli/context.js';
import { loadConfig } from '../../src/config/index.js';
import { parseKeyOptions } from '../../src/management/keys.js';
import { runCli, type CliResult } from '../helpers/processes.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

describe('school-data key options (CLI)', () => {
  let store: TestStore;
  let env: NodeJS.ProcessEnv;
  const cli = (...args: string[]) => runCli(args, env);
  const json = async <T>(...args: string[]): Promise<T> => {
    const r = await cli(...args, '--json');
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as T;
  };
  const fails = (r: CliResult, pattern: RegExp) => {
    assert.notEqual(r.code, 0);
    assert.equal(r.stderr.trim().split('\n').length, 1, `not one line: ${r.stderr}`);
    assert.match(r.stderr, /^school-data: /);
    assert.match(r.stderr, pattern);
  };
  interface Card { id: string; status: string; scopes: string[]; expires_at: string | null; allow: string[] | null; unused_revoke_at: string | null; revoke_reason: string | null; retires_at: string | null }
  const keys = () => json<Card[]>('key', 'list', '--school', 'ko-school');
  const events = () => json<{ event: string; actor: string; key_id: string }[]>('audit', 'list', '--school', 'ko-school');

  before(async () => {
    store = await createTestStore();
    env = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, DATABASE_URL: store.url ?? '', SCHOOL_DATA_LOG_LEVEL: 'warn' };
    await json('school', 'create', '--name', 'Options', '--plan', 'VIP', '--id', 'ko-school');
  });
  after(() => store.close());

  it('creates a key with scopes, expiry and allowlist, and lists them with the unused revocation date', async () => {
    const created = await json<{ id: string; key: string; scopes: string[]; expires_at: string; allow: string[] }>(
      'key', 'create', '--school', 'ko-school', '--name', 'BI', '--scopes', 'payments,finance', '--expires', '2099-01-01T03:00:00+03:00', '--allow', '203.0.113.7, 10.0.0.0/8,2001:DB8::/32',
    );
    assert.match(created.key, /^service_pk_[0-9a-f]{32}$/);
    assert.deepEqual(created.scopes, ['payments', 'finance']);
    assert.equal(created.expires_at, '2099-01-01T00:00:00Z');
    assert.deepEqual(created.allow, ['203.0.113.7', '10.0.0.0/8', '2001:db8::/32']);
    const listed = (await keys()).find((k) => k.id === created.id)!;
    assert.deepEqual(listed.scopes, ['payments', 'finance']);
    assert.equal(listed.status, 'active');
    assert.ok(listed.unused_revoke_at !== null);
    const human = await cli('key', 'list', '--school', 'ko-school');
    assert.match(human.stdout, /payments,finance/);
    assert.match(human.stdout, /REVOKED IF UNUSED BY/);
    assert.ok(!human.stdout.includes(created.key));
  });

  it('refuses bad options with one line and writes nothing', async () => {
    const before = (await keys()).length;
    const eventsBefore = (await events()).length;
    fails(await cli('key', 'create', '--school', 'ko-school', '--name', 'x', '--scopes', 'students,money'), /scopes/);
    fails(await cli('key', 'create', '--school', 'ko-school', '--name', 'x', '--expires', 'tomorrow'), /RFC 3339/);
    // Address bits past the prefix: a slip for one address or for the range, never read as the range.
    fails(await cli('key', 'create', '--school', 'ko-school', '--name', 'x', '--allow', '203.0.113.7, 10.0.0.1/8'), /"10\.0\.0\.1\/8" has address bits past its \/8: write 10\.0\.0\.0\/8 for the range, or 10\.0\.0\.1 alone/);
    // The command prints parseKeyOptions' reason, checked before the store is opened: the
    // other values by the same function, in this process rather than a process each.
    const refused = (raw: { scopes?: string; expires?: string; allow?: string }, reason: RegExp) => {
      const parsed = parseKeyOptions(raw);
      assert.ok(!parsed.ok, JSON.stringify(raw));
      assert.match(parsed.reason, reason);
    };
    refused({ scopes: 'students,students' }, /twice/);
    refused({ expires: '2020-01-01T00:00:00Z' }, /future/);
    refused({ expires: '2099-02-30T00:00:00Z' }, /RFC 3339/);
    refused({ allow: '10.0.0.0/33' }, /allow/);
    refused({ allow: 'example.com' }, /allow/);
    refused({ allow: '2001:db8::1/32' }, /write 2001:db8::\/32 for the range/);
    fails(await cli('key', 'roll', '--key', 'key_nope', '--overlap', '1h'), /no key/);
    fails(await cli('key', 'roll', '--key', 'key_nope', '--overlap', '2h'), /overlap/);
    fails(await cli('key', 'roll', '--key', 'key_nope'), /overlap/);
    fails(await cli('key', 'allow', '--key', 'key_nope', '--allow', '1.2.3.4'), /no key/);
    fails(await cli('key', 'allow', '--key', 'key_nope', '--allow', '1.2.3.400'), /allow/);
    for (const usage of [['--key', 'key_nope'], ['--key', 'key_nope', '--any', '--allow', '1.2.3.4']]) {
      const r = await cli('key', 'allow', ...usage);
      fails(r, /--allow.*--any|--any.*--allow/);
      assert.equal(r.code, 2, 'a usage error');
      assert.match(r.stderr, /\(see npx school-data key allow --help\)$/m);
    }
    fails(await cli('key', 'log', '--key', 'key_nope'), /no key/);
    // A key's value pasted where its id is asked for is not echoed to the terminal or a job's log.
    const pasted = `service_pk_${'ab12'.repeat(8)}`;
    for (const command of [['key', 'revoke', '--key', pasted], ['key', 'roll', '--key', pasted, '--overlap', 'now'], ['key', 'log', '--key', pasted], ['key', 'list', '--school', pasted]]) {
      const r = await cli(...command);
      fails(r, /\[redacted-key\]/);
      assert.ok(!r.stderr.includes(pasted.slice(11)), r.stderr);
    }
    fails(await cli('audit', 'list', '--school', 'nope'), /no school/);
    fails(await cli('audit', 'list', '--school', 'ko-school', '--key', 'key_nope'), /no key/);
    // An option given empty (a script's unset variable) is not "no limit" on the command line.
    fails(await cli('key', 'create', '--school', 'ko-school', '--name', 'x', '--allow', ' '), /--allow is empty/);
    const ctx = { config: loadConfig(env), out: createOutput(false) };
    for (const [option, given] of [['scopes', { scopes: '' }], ['expires', { expires: '' }]] as const) {
      await assert.rejects(keyCreate(ctx, { school: 'ko-school', name: 'x', ...given }), { name: 'CliError', message: `--${option} is empty: leave the option out for no limit` });
    }
    fails(await cli('key', 'create', '--school', 'ko-school', '--name', '🚗'.repeat(101)), /1-100 characters/);
    assert.equal((await keys()).length, before);
    assert.equal((await events()).length, eventsBefore);
  });

  it('rolls a key: the new one printed once with the old one\'s options, the old one ending after the overlap', async () => {
    const old = await json<{ id: string; key: string }>('key', 'create', '--school', 'ko-school', '--name', 'Site', '--scopes', 'students', '--allow', '127.0.0.1');
    const human = await cli('key', 'roll', '--key', old.id, '--overlap', '24h');
    assert.equal(human.code, 0, human.stderr);
    const printed = human.stdout.match(/service_pk_[0-9a-f]{32}/g) ?? [];
    assert.equal(printed.length, 1, 'the new key once, the old one never');
    assert.notEqual(printed[0], old.key);
    assert.match(human.stdout, /shown only this once/);
    const list = await keys();
    const oldCard = list.find((k) => k.id === old.id)!;
    assert.ok(oldCard.retires_at !== null);
    const fresh = list.find((k) => k.id !== old.id && k.scopes.join() === 'students' && k.allow?.join() === '127.0.0.1' && k.status === 'active' && k.retires_at === null)!;
    assert.ok(fresh, 'the new key has the old one\'s options');
    fails(await cli('key', 'roll', '--key', old.id, '--overlap', 'now'), /already rolled/);
    const rolledNow = await json<{ id: string; old_key: { status: string } }>('key', 'roll', '--key', fresh.id, '--overlap', 'now');
    assert.equal(rolledNow.old_key.status, 'revoked');
    // A key that ended says how.
    fails(await cli('key', 'roll', '--key', fresh.id, '--overlap', 'now'), /was rolled; only an active key can be rolled/);
    const ending = await json<{ id: string }>('key', 'create', '--school', 'ko-school', '--name', 'Ending');
    await store.db.updateTable('api_keys').set({ expires_at: '2020-01-01T00:00:00Z' }).where('id', '=', ending.id).execute();
    fails(await cli('key', 'roll', '--key', ending.id, '--overlap', 'now'), /has expired; only an active key can be rolled/);
    const revoked = await json<{ id: string }>('key', 'create', '--school', 'ko-school', '--name', 'Revoked');
    assert.equal((await cli('key', 'revoke', '--key', revoked.id)).code, 0);
    fails(await cli('key', 'roll', '--key', revoked.id, '--overlap', '1h'), /is revoked; only an active key can be rolled/);
  });

  it('changes a key\'s allowlist, and the audit lists every event with its actor', async () => {
    const k = await json<{ id: string }>('key', 'create', '--school', 'ko-school', '--name', 'Accounting');
    const changed = await json<{ allow: string[] }>('key', 'allow', '--key', k.id, '--allow', '192.0.2.10');
    assert.deepEqual(changed.allow, ['192.0.2.10']);
    assert.equal((await json<{ allow: null }>('key', 'allow', '--key', k.id, '--any')).allow, null);
    await json('key', 'revoke', '--key', k.id);
    const mine = (await events()).filter((e) => e.key_id === k.id);
    assert.deepEqual(mine.map((e) => e.event), ['revoked', 'options_changed', 'options_changed', 'created']);
    assert.ok(mine.every((e) => e.actor === 'operator'));
    const human = await cli('audit', 'list', '--school', 'ko-school');
    assert.match(human.stdout, /options_changed/);
  });

  it('counts no ended key among a school\'s active keys, even before anything marked it', async () => {
    const active = async () => (await json<{ id: string; active_keys: number }[]>('school', 'list')).find((s) => s.id === 'ko-school')!.active_keys;
    const before = await active();
    const k = await json<{ id: string }>('key', 'create', '--school', 'ko-school', '--name', 'Soon over', '--expires', '2099-01-01T00:00:00Z');
    assert.equal(await active(), before + 1);
    // Its expiry passes with no server running to mark it.
    await store.db.updateTable('api_keys').set({ expires_at: '2020-01-01T00:00:00Z' }).where('id', '=', k.id).execute();
    assert.equal(await active(), before, 'the expired key is not counted');
    assert.deepEqual((await events()).filter((e) => e.key_id === k.id).map((e) => e.event), ['created'], 'and the list marked nothing');
  });

  it('marks no key revoked as unused by its shell\'s setting, which may not be the servers\' (the key commands leave that to them)', async () => {
    const idle = await json<{ id: string }>('key', 'create', '--school', 'ko-school', '--name', 'Idle');
    const other = await json<{ id: string }>('key', 'create', '--school', 'ko-school', '--name', 'Other');
    // Made in 2020 and never used: past this shell's 90 days (the default).
    await store.db.updateTable('api_keys').set({ created_at: '2020-01-01T00:00:00Z' }).where('id', '=', idle.id).execute();
    const card = (await keys()).find((c) => c.id === idle.id)!;
    assert.equal(card.revoke_reason, 'unused', 'shown as this shell judges it');
    await json('key', 'create', '--school', 'ko-school', '--name', 'Another');
    await json('key', 'allow', '--key', other.id, '--allow', '203.0.113.9');
    await json('key', 'roll', '--key', other.id, '--overlap', 'now');
    await json('key', 'revoke', '--key', (await json<{ id: string }>('key', 'create', '--school', 'ko-school', '--name', 'Gone')).id);
    const row = await store.db.selectFrom('api_keys').select(['revoked_at', 'revoke_reason']).where('id', '=', idle.id).executeTakeFirstOrThrow();
    assert.deepEqual(row, { revoked_at: null, revoke_reason: null }, 'not marked');
    assert.deepEqual((await events()).filter((e) => e.key_id === idle.id).map((e) => e.event), ['created']);
    // An expiry is no setting: the commands still mark it.
    await store.db.updateTable('api_keys').set({ expires_at: '2020-06-01T00:00:00Z' }).where('id', '=', idle.id).execute();
    await keys();
    assert.deepEqual((await events()).filter((e) => e.key_id === idle.id).map((e) => e.event), ['expired', 'created']);
  });

  it('lists every event of a long history, the first one too', async () => {
    const k = await json<{ id: string }>('key', 'create', '--school', 'ko-school', '--name', 'Busy');
    // 1,200 allowlist changes, written as the command writes each (one event per change).
    const at = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const changes = Array.from({ length: 1200 }, (_, i) => ({ school_id: 'ko-school', key_id: k.id, event: 'options_changed', actor: 'operator', at, detail: JSON.stringify({ allow: { from: null, to: [`192.0.2.${i % 250}`] } }) }));
    for (let i = 0; i < changes.length; i += 200) await store.db.insertInto('key_events').values(changes.slice(i, i + 200)).execute();
    const listed = await json<{ event: string }[]>('audit', 'list', '--school', 'ko-school', '--key', k.id);
    assert.equal(listed.length, 1201);
    assert.equal(listed.at(-1)!.event, 'created', 'the oldest event is listed, last');
    assert.ok((await events()).length > 1201, 'and in the school\'s whole audit');
  });

  it('prints a key\'s last requests (an empty log for a key not used yet)', async () => {
    const k = await json<{ id: string }>('key', 'create', '--school', 'ko-school', '--name', 'Quiet');
    assert.deepEqual(await json('key', 'log', '--key', k.id), []);
    const human = await cli('key', 'log', '--key', k.id);
    assert.equal(human.code, 0);
  });
});
