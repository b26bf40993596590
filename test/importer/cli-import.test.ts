/**
 * `school-data import` as an operator runs it: files read as streams, their mistakes
 * (empty, bad JSON with line and column) in one line, --replace, the progress line only
 * when asked for off a terminal, and all or nothing when the process is killed (SIGKILL at
 * several moments) or its database connection is cut: the data and the change log are
 * exactly as before.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeImportFile, importShape } from '../../bench/dataset/import-file.js';
import { datasetShape } from '../../bench/dataset/shape.js';
import { importData, importFile } from '../../src/importer/index.js';
import { FaultProxy } from '../helpers/faultproxy.js';
import { BIN, runCli } from '../helpers/processes.js';
import { createTestStore, urlWithSchema, type TestStore } from '../helpers/store.js';
import { addSchool, sampleFile, snapshot } from './helpers.js';

describe('school-data import (the CLI)', () => {
  let store: TestStore;
  let env: NodeJS.ProcessEnv;
  let big: string;
  const cli = (...args: string[]) => runCli(args, env);

  before(async () => {
    store = await createTestStore();
    env = { ...process.env, SCHOOL_DATA_DIR: store.dataDir, DATABASE_URL: store.url ?? '', SCHOOL_DATA_LOG_LEVEL: 'warn' };
    big = path.join(store.dataDir, 'big.json');
    await writeImportFile(big, datasetShape(0.01, 1), importShape(60_000));
  });
  after(() => store.close());

  const write = (name: string, text: string | Buffer) => {
    const file = path.join(store.dataDir, name);
    fs.writeFileSync(file, text);
    return file;
  };

  /** Everything an import may change for a school: its rows, its change log, its day and month totals. */
  const state = async (school: string) => ({
    rows: await snapshot(store.db, school),
    school: await store.db.selectFrom('schools').selectAll().where('id', '=', school).executeTakeFirstOrThrow(),
    batches: await store.db.selectFrom('change_batches').selectAll().where('school_id', '=', school).orderBy('seq').execute(),
    tombstones: await store.db.selectFrom('tombstones').selectAll().where('school_id', '=', school).orderBy('resource').orderBy('id').execute(),
    days: await store.db.selectFrom('payment_days').selectAll().where('school_id', '=', school).orderBy('day').orderBy('method').execute(),
    months: await store.db.selectFrom('payment_months').selectAll().where('school_id', '=', school).orderBy('month').orderBy('method').execute(),
  });

  const bytes = (...parts: (string | number[])[]) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));

  it('says a file is empty, and where JSON goes wrong by line and column, in one line', async () => {
    const school = await addSchool(store.db);
    const cases: [string | Buffer, RegExp][] = [
      ['', /^school-data: import refused, nothing written: the file is empty$/],
      [bytes('{\n "leads": [{"id": "l', [0xff], '1"}]}'), /^school-data: import refused, nothing written: the file is not UTF-8 text at line 2, column 21: the bytes there are not UTF-8$/],
      ['{\n  "students": [\n    {"id": "st-1",, "full_name": "x"}\n  ]\n}', /^school-data: import refused, nothing written: the file is not valid JSON at line 3, column 19: unexpected ","$/],
      // A file of brackets: the parser would keep every open level, memory in proportion to the file.
      [`{"leads": ${'['.repeat(3_000_000)}`, /^school-data: import refused, nothing written: the file is not an import file at line 1, column 74: values are nested deeper than 64 levels, which no value of the format is$/],
    ];
    for (const [text, expected] of cases) {
      const r = await cli('import', '--school', school, write('bad.json', text));
      assert.equal(r.code, 1, String(expected));
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr.trim(), expected);
    }
  });

  // The command above prints the first error of importFile's result: the other places a file
  // goes wrong are read by the same function in this process, rather than by a process each.
  it('finds where a file goes wrong, by line and column, whatever the bytes, and writes nothing', async () => {
    const school = await addSchool(store.db);
    const before = await state(school);
    // A line over a chunk of the file (256 KiB) long, of two-byte characters, one of them cut
    // between two chunks (the prefix is an odd 37 bytes): its column counts characters.
    const long = `{"branches": [{"id": "b12", "name": "${'я'.repeat(200_000)}" x`;
    const cases: [string | Buffer, RegExp][] = [
      [long, /not valid JSON at line 1, column 200040: unexpected "x"$/],
      [bytes('{"leads": [{"full_name": "я', [0xd1], '"}]}'), /not UTF-8 text at line 1, column 28/],
      [bytes('{"leads": []}', [0xe2, 0x82]), /not UTF-8 text at line 1, column 14/],
      [bytes('{"x": "', [0xed, 0xa0, 0x80], '"}'), /not UTF-8 text at line 1, column 8/],
      [bytes('{"x": "', [0xc0, 0xaf], '"}'), /not UTF-8 text at line 1, column 8/],
      ['{"students": [', /not valid JSON at line 1, column 15: unexpected end of the file$/],
      // After a byte order mark, whether the parser or the tokenizer finds what is wrong.
      [bytes([0xef, 0xbb, 0xbf], '{\n "students": [\n {"id": "st-1",, "x": 1}]}'), /not valid JSON at line 3, column 16: unexpected ","$/],
      [bytes([0xef, 0xbb, 0xbf], '{\n"a": x, "b": 1}'), /not valid JSON at line 2, column 6: unexpected "x"$/],
      // The mark is no character of the first line.
      [bytes([0xef, 0xbb, 0xbf], '{"branches": x}'), /not valid JSON at line 1, column 14: unexpected "x"$/],
      // A record longer than any valid one is refused before it is held whole.
      [`{"branches": [{"id": "b0", "name": "Zero"},\n {"id": "b1", "name": "${'x'.repeat(1_100_000)}"}]}`, /line 2, column 2: the record that begins there takes more than 1 MiB of the file, which no record of the format does$/],
      ['{\n "branches": [{"id": "Ыы", "name": tru}]}', /not valid JSON at line 2, column 39: unexpected "}"$/],
      ['[]', /the file must be a JSON object/],
      ['{} {}', /not valid JSON at line 1, column 4/],
      // Nesting no import value has is refused where it passes 64 levels: the parser keeps
      // every open level, so a file of brackets would take memory in proportion to its size.
      [`{"branches": [{"id": "b1", "name": ${'['.repeat(62)}${']'.repeat(62)}}]}`, /line 1, column 97: values are nested deeper than 64 levels/],
    ];
    for (const [text, expected] of cases) {
      const result = await importFile(store.db, school, write('bad.json', text));
      assert.ok(!result.ok, String(expected));
      assert.equal(result.errors.length, 1, JSON.stringify(result.errors));
      assert.match(result.errors[0]!.reason, expected);
    }
    assert.deepEqual(await state(school), before);
  });

  it('refuses a record that gives a field twice, naming it', async () => {
    const school = await addSchool(store.db);
    const branch = '{"id": "b1", "name": "First", "name": "Second"}';
    const r = await cli('import', '--school', school, '--json', write('twice.json', `{"branches": [{"id": "b0", "name": "Zero"}, ${branch}]}`));
    assert.equal(r.code, 1, r.stderr);
    assert.deepEqual((JSON.parse(r.stdout) as { errors: unknown[] }).errors, [{ array: 'branches', index: 1, field: 'name', reason: 'is given twice in the record' }]);
    // A key of `deleted` given twice is refused too (a parser would apply both lists).
    const deleted = await cli('import', '--school', school, '--json', write('deleted-twice.json', '{"deleted": {"leads": ["ld-1"], "leads": ["ld-2"]}}'));
    assert.equal(deleted.code, 1, deleted.stderr);
    assert.deepEqual((JSON.parse(deleted.stdout) as { errors: unknown[] }).errors, [{ array: 'deleted.leads', index: null, field: null, reason: 'appears twice in deleted' }]);
    // Field names inside a value (an array of categories) are not the record's.
    const fine = await cli('import', '--school', school, write('fine.json', '{"branches": [{"id": "b0", "name": "Zero"}], "groups": [{"id": "g1", "name": "G", "category": "B", "branch_id": "b0"}]}'));
    assert.equal(fine.code, 0, fine.stderr);
  });

  it('keeps a U+FEFF inside a string, written as it is or escaped, as a file read in memory does', async () => {
    const school = await addSchool(store.db);
    // Only the file's own byte order mark, before the object, is not data.
    const text = '\ufeff{"branches": [{"id": "b1", "name": "\ufeffЦентр"}, {"id": "b2", "name": "a\\uFEFFb"}, {"id": "b3", "name": "c\ufeff"}]}';
    const r = await cli('import', '--school', school, write('feff.json', text));
    assert.equal(r.code, 0, r.stderr);
    const rows = await store.db.selectFrom('branches').select(['id', 'name']).where('school_id', '=', school).orderBy('id').execute();
    assert.deepEqual(rows, [
      { id: 'b1', name: '\ufeffЦентр' },
      { id: 'b2', name: 'a\ufeffb' },
      { id: 'b3', name: 'c\ufeff' },
    ]);
    // So an id or a key with one is what it is: not an id, not an array of the format.
    const id = await cli('import', '--school', school, '--json', write('feff-id.json', '{"branches": [{"id": "\\ufeffb1", "name": "B"}]}'));
    assert.equal(id.code, 1, id.stderr);
    assert.deepEqual((JSON.parse(id.stdout) as { errors: { field: string }[] }).errors.map((e) => e.field), ['id']);
  });

  it('reads a file of many-byte characters whole, however its pieces fall', async () => {
    const school = await addSchool(store.db);
    // 300 KB of one-, two-, three- and four-byte characters: the file is read and parsed in
    // pieces, and some of them must end inside a character.
    const name = (i: number) => `${'a'.repeat(i % 3)}я€😀`.repeat(1 + (i % 20)).slice(0, 150);
    const branches = Array.from({ length: 4000 }, (_, i) => ({ id: `b${i}`, name: name(i) }));
    const r = await cli('import', '--school', school, write('wide.json', JSON.stringify({ branches })));
    assert.equal(r.code, 0, r.stderr);
    const rows = await store.db.selectFrom('branches').select(['id', 'name']).where('school_id', '=', school).execute();
    const stored = new Map(rows.map((row) => [row.id, row.name]));
    assert.equal(stored.size, branches.length);
    for (const b of branches) assert.equal(stored.get(b.id), b.name, b.id);
  });

  it('says how many more errors there are, and that there may be others past the 50 it looks for', async () => {
    const school = await addSchool(store.db);
    const leads = (n: number) => JSON.stringify({ leads: Array.from({ length: n }, (_, i) => ({ id: `ld-${i}` })) });
    const few = await cli('import', '--school', school, write('few.json', leads(1)));
    assert.match(few.stderr, /^school-data: import refused, nothing written: leads\[0\]\.full_name: is required \(and \d+ more; --json lists them all\)$/m);
    const many = await cli('import', '--school', school, write('many.json', leads(60)));
    assert.match(many.stderr, /\(and at least 49 more; --json lists the first 50\)$/m);
    const listed = await cli('import', '--school', school, '--json', write('many.json', leads(60)));
    assert.equal((JSON.parse(listed.stdout) as { errors: unknown[] }).errors.length, 50);
    assert.match(listed.stderr, /\(and at least 49 more\)$/m);
  });

  it('replaces with --replace, and reports in --json what changed', async () => {
    const school = await addSchool(store.db);
    assert.ok((await importData(store.db, school, sampleFile())).ok);
    const file = sampleFile();
    const r = await cli('import', '--school', school, '--replace', '--json', write('replace.json', JSON.stringify({ leads: [file.leads![1]] })));
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '', 'no progress with --json');
    const out = JSON.parse(r.stdout) as { changes: number; seq: number; deleted: Record<string, number> };
    assert.deepEqual([out.changes, out.seq, out.deleted.leads], [1, 2, 1]);
    const again = await cli('import', '--school', school, '--replace', write('replace.json', JSON.stringify({ leads: [file.leads![1]] })));
    assert.match(again.stdout, /nothing changed, nothing written/);
    // An empty array read from a file deletes every record of its resource.
    const emptied = await cli('import', '--school', school, '--replace', '--json', write('replace.json', '{"leads": [], "payments": [\n]}'));
    assert.equal(emptied.code, 0, emptied.stderr);
    const gone = JSON.parse(emptied.stdout) as { deleted: Record<string, number> };
    assert.deepEqual([gone.deleted.leads, gone.deleted.payments], [1, 4]);
  });

  it('shows the progress line off a terminal only with --progress', async () => {
    const school = await addSchool(store.db);
    const quiet = await cli('import', '--school', school, write('sample.json', JSON.stringify(sampleFile())));
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.equal(quiet.stderr, '');
    const shown = await cli('import', '--school', school, '--progress', write('sample.json', JSON.stringify(sampleFile())));
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stderr, /read and staged \d+ records \(\d+ % of the file\)(, [\d,]+ written)?, [\d,]+ records\/s, \d+ s/);
  });

  /**
   * Starts an import of the large file and, once `when` has been seen on its output (and
   * `delayMs` more), does `act` to it (kill it, cut its connection); resolves when it exits.
   */
  function importUntil(school: string, when: RegExp, delayMs: number, act: (child: ChildProcess) => void, extraEnv: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; signal: string | null; output: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, 'import', '--school', school, '--progress', big], { env: { ...env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      let armed = false;
      const onData = (c: Buffer) => {
        output += c.toString();
        if (!armed && when.test(output)) {
          armed = true;
          setTimeout(() => act(child), delayMs);
        }
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.on('error', reject);
      child.on('exit', (code, signal) => resolve({ code, signal, output }));
    });
  }

  it('leaves data and change log exactly as before when killed at any moment', async () => {
    const school = await addSchool(store.db);
    assert.ok((await importData(store.db, school, sampleFile())).ok);
    const before = await state(school);
    const moments: [string, RegExp, number][] = [
      ['while reading, early', /read and staged/, 0],
      ['while reading, halfway', /\b[3-6]\d % of the file/, 0],
      ['as the merge starts', /writing them/, 0],
      ['during the merge', /writing them/, 150],
      ['later in the merge', /writing them/, 600],
    ];
    let killed = 0;
    for (const [moment, when, delay] of moments) {
      const run = await importUntil(school, when, delay, (child) => child.kill('SIGKILL'));
      if (run.signal === 'SIGKILL') killed += 1;
      assert.deepEqual(await state(school), before, `killed ${moment}: ${run.output.slice(-300)}`);
    }
    assert.ok(killed >= 4, `the import was killed ${killed} times of ${moments.length}`);
    // The same file, left to finish, imports: the kills stopped a valid import. Its
    // progress line went on through the write, naming its steps.
    const done = await cli('import', '--school', school, '--json', '--progress', big);
    assert.equal(done.code, 0, done.stderr);
    assert.equal((JSON.parse(done.stdout) as { seq: number }).seq, 2);
    assert.match(done.stderr, /all [\d,]+ records read; writing them: [a-z ]+, [\d,]+ written, [\d,]+ records\/s, \d+ s/);
  });

  it('leaves everything as before when the database connection is cut (PostgreSQL)', async (t) => {
    if (!store.url) {
      t.skip('PostgreSQL only: SQLite has no connection to cut (a failure midway is in import.error.test.ts)');
      return;
    }
    const school = await addSchool(store.db);
    assert.ok((await importData(store.db, school, sampleFile())).ok);
    const before = await state(school);
    const base = new URL(process.env.DATABASE_URL!);
    const proxy = await FaultProxy.start({ host: base.hostname, port: Number(base.port || 5432) });
    try {
      const through = new URL(base);
      through.hostname = proxy.address.host;
      through.port = String(proxy.address.port);
      const schema = new URL(store.url).searchParams.get('options')!.replace('-c search_path=', '');
      const url = urlWithSchema(through.toString(), schema);
      for (const when of [/\b[2-6]\d % of the file/, /writing them/]) {
        const result = await importUntil(school, when, 100, () => proxy.cut(), { DATABASE_URL: url });
        assert.notEqual(result.code, 0, result.output.slice(-300));
        assert.match(result.output, /school-data: the data store is unavailable|school-data: unexpected error|Connection terminated/);
        assert.ok(!result.output.includes('    at '), 'no stack trace');
        assert.deepEqual(await state(school), before, `cut at ${when}`);
      }
    } finally {
      await proxy.close();
    }
  });
});
