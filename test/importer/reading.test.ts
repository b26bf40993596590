/**
 * The two readings of an import file agree: whatever the bytes (a valid file, or one
 * broken by random edits), the plain reading followed, where it stops, by the exact one
 * hands the intake what the exact reading alone does, in the same order, whatever the
 * chunk size; and a valid file is read by the plain reading alone.
 * @store-free
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import type { ImportError } from '../../src/importer/index.js';
import { fileSource, readExact, readPlain, type FileReading, type Intake } from '../../src/importer/source.js';
import { checkProperty } from '../helpers/fuzz.js';
import { sampleFile } from './helpers.js';

/**
 * An intake that writes down what it is handed until it is full, after a few problems, as
 * the real one takes nothing more past its maximum.
 */
class Recorder implements Intake {
  readonly events: unknown[] = [];
  private problems = 0;

  private readonly maxProblems: number;

  constructor(maxProblems = 5) {
    this.maxProblems = maxProblems;
  }

  get full(): boolean {
    return this.problems >= this.maxProblems;
  }

  private add(event: unknown[]): void {
    if (!this.full) this.events.push(event);
  }

  problem(error: ImportError): void {
    this.add(['problem', error]);
    this.problems += 1;
  }

  unreadable(array: string): void {
    this.add(['unreadable', array]);
  }

  record(array: string, index: number, value: unknown): void {
    this.add(['record', array, index, value]);
  }

  deleted(resource: string, ids: unknown): void {
    this.add(['deleted', resource, ids]);
  }

  arrayEnd(array: string): void {
    this.add(['arrayEnd', array]);
  }

  settle(): Promise<void> {
    return Promise.resolve();
  }
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-reading-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));
let files = 0;

function writeFile(bytes: Buffer): string {
  const file = path.join(dir, `file-${(files += 1)}.json`);
  fs.writeFileSync(file, bytes);
  return file;
}

async function bothReadings(bytes: Buffer, reading: FileReading, maxProblems = 5): Promise<{ combined: unknown[]; exact: unknown[] }> {
  const file = writeFile(bytes);
  const combined = new Recorder(maxProblems);
  await fileSource(file, bytes.length, reading).feed(combined);
  const exact = new Recorder(maxProblems);
  await readExact(file, bytes.length, exact, undefined, reading);
  return { combined: combined.events, exact: exact.events };
}

/** A valid file of every array and `deleted`, with escapes, a name to skip and white space of every kind. */
function validText(): string {
  const file = { ...sampleFile(), deleted: { students: ['st-old-1', 'st-old-2'], lessons: [] } } as Record<string, unknown>;
  const students = file.students as Record<string, unknown>[];
  students[0]!.notes = 'кавычки " и \\ обратная черта, \u2028, \uFEFF, \ud83d\ude97, \t';
  // Past 16 KiB, so that values are cut where the reading slices a chunk, too.
  for (let i = 0; i < 60; i++) students.push({ ...students[i % 2]!, id: `st-more-${i}`, full_name: `Ученик ${i} «${'ё'.repeat(i)}»` });
  return JSON.stringify(file, null, '\t').replaceAll('\n\t\t', '\r\n\t\t ');
}

/** Pieces an edit inserts: JSON's punctuation, bits of values, and bytes that are not UTF-8 or not allowed. */
const SNIPPETS = [
  ...['{', '}', '[', ']', ',', ':', '"', '\\', ' ', '\n', '\f', '\v', '\u00a0', 'x', '1', '-', '0.', '1e', '-0', '1e400', 'tru', 'null', '{}', '[]', '\uFEFF', '\u0000', 'é', '\ud83d\ude97'],
  ...['"a":1,', '"id":"dup",', '"__proto__":{"x":1},', '"\\u00e9\\ud83d":"\\ud800",', '"students":[],', '"deleted":{"students":["a"]},', '"zz":[{"a":1}],', '"x":1,'],
  '['.repeat(40) + ']'.repeat(40),
].map((s) => Buffer.from(s, 'utf8'));
const INVALID = [Buffer.from([0xff]), Buffer.from([0xc3]), Buffer.from([0xe2, 0x82]), Buffer.from([0xef, 0xbb])];

const edit = fc.oneof(
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), what: fc.constantFrom(...SNIPPETS, ...INVALID) }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), length: fc.integer({ min: 1, max: 12 }) }),
  fc.record({ kind: fc.constant('repeatName' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('cut' as const), at: fc.nat() }),
  // Where a top-level member begins: the structure the plain reading follows itself.
  fc.record({ kind: fc.constant('topLevel' as const), at: fc.nat(), what: fc.constantFrom(...SNIPPETS, ...INVALID) }),
  fc.record({ kind: fc.constant('bom' as const), at: fc.constant(0) }),
);
type Edit = typeof edit extends fc.Arbitrary<infer T> ? T : never;
/** The service's limits, and limits some records and stretches of the valid file pass (its records take 50-450 bytes). */
const LIMITS = fc.constantFrom(undefined, { value: 300, list: 60 }, { value: 600, list: 300 });

function apply(bytes: Buffer, change: Edit): Buffer {
  const at = change.at % (bytes.length + 1);
  switch (change.kind) {
    case 'insert':
      return Buffer.concat([bytes.subarray(0, at), change.what, bytes.subarray(at)]);
    case 'delete':
      return Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + change.length)]);
    case 'cut':
      return bytes.subarray(0, at);
    case 'bom':
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]);
    case 'topLevel': {
      const starts = [...bytes.toString('latin1').matchAll(/\n\t"/g)].map((m) => m.index + 1);
      const where = starts.length === 0 ? at : starts[change.at % starts.length]!;
      return Buffer.concat([bytes.subarray(0, where), change.what, bytes.subarray(where)]);
    }
    case 'repeatName': {
      // The first field of the next record given again at its end: a name given twice.
      const open = bytes.indexOf('{"', at) === -1 ? bytes.indexOf('{\r\n', at) : bytes.indexOf('{"', at);
      if (open === -1) return bytes;
      const close = bytes.indexOf('}', open);
      const comma = bytes.indexOf(',', open);
      if (close === -1 || comma === -1 || comma > close) return bytes;
      return Buffer.concat([bytes.subarray(0, close), Buffer.from(','), bytes.subarray(open + 1, comma), bytes.subarray(close)]);
    }
  }
}

describe('reading an import file', () => {
  const valid = Buffer.from(validText(), 'utf8');

  it('reads a valid file by the plain reading alone, as the exact reading does', async () => {
    for (const bytes of [valid, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), valid, Buffer.from(' \n')])]) {
      for (const chunkBytes of [1 << 18, 2, 17]) {
        const file = writeFile(bytes);
        const plain = new Recorder();
        assert.equal(await readPlain(file, bytes.length, plain, undefined, { chunkBytes }), true, `chunks of ${chunkBytes}`);
        const exact = new Recorder();
        await readExact(file, bytes.length, exact, undefined, { chunkBytes });
        assert.deepEqual(plain.events, exact.events);
        assert.equal(plain.events.filter((e) => (e as unknown[])[0] === 'problem').length, 0);
        assert.ok(plain.events.length > 20);
      }
    }
  });

  it('stops the plain reading at a name given twice in a record, and the exact one reports it', async () => {
    const text = validText().replace('"id": "br-1"', '"id": "br-1",\r\n\t\t "id": "br-9"');
    assert.notEqual(text, validText());
    const bytes = Buffer.from(text, 'utf8');
    assert.equal(await readPlain(writeFile(bytes), bytes.length, new Recorder(), undefined, {}), false);
    const { combined, exact } = await bothReadings(bytes, {});
    assert.deepEqual(combined, exact);
    assert.ok(combined.some((e) => JSON.stringify(e).includes('is given twice in the record')));
  });

  it('counts lines as an editor does: LF, CRLF and a CR alone each end one, wherever a chunk ends', async () => {
    for (const end of ['\n', '\r\n', '\r']) {
      const text = `{${end} "leads": [${end}${end} {"id": "l1",, "x": 1}]}`;
      for (const chunkBytes of [1 << 18, 1, 2, 3]) {
        const { combined, exact } = await bothReadings(Buffer.from(text), { chunkBytes });
        assert.deepEqual(combined, exact, JSON.stringify(text));
        const problems = exact.filter((e) => (e as unknown[])[0] === 'problem').map((e) => ((e as unknown[])[1] as ImportError).reason);
        assert.deepEqual(problems, ['the file is not valid JSON at line 4, column 14: unexpected ","'], `${JSON.stringify(end)} in chunks of ${chunkBytes}`);
      }
    }
    // A place right after a CRLF split between two chunks (the place is found in the piece that
    // begins with the LF).
    for (const [text, place] of [['{\r\n,"leads": []}', 'line 2, column 1'], ['{"leads": [\r\n\r\n,1]}', 'line 3, column 1']] as const) {
      const { exact } = await bothReadings(Buffer.from(text), { chunkBytes: 2 });
      const problems = exact.filter((e) => (e as unknown[])[0] === 'problem').map((e) => ((e as unknown[])[1] as ImportError).reason);
      assert.deepEqual(problems, [`the file is not valid JSON at ${place}: unexpected ","`], JSON.stringify(text));
    }
  });

  it('stops where a record, an id list or a stretch between them runs past its limit, saying where, as both readings measure it', async () => {
    // Past a piece the readings check at (16 KiB), so that every chunk size sees them.
    const limits = { value: 20_000, list: 50_000 };
    const ids = (bytes: number) => JSON.stringify(Array.from({ length: Math.ceil(bytes / 10) }, (_, i) => `ld-${String(i).padStart(4, '0')}`));
    const cases: [string, string | null][] = [
      [`{"leads": [{"id": "l1"},\n {"id": "l2", "notes": "${'ж'.repeat(20_000)}"}]}`, 'line 2, column 2: the record that begins there takes more than 20000 bytes of the file, which no record of the format does'],
      [`{"zz": [1, {"a": "${'x'.repeat(40_000)}"}]}`, 'line 1, column 12: the value that begins there takes more than 20000 bytes'],
      [`{"deleted": {"leads": ${ids(40_000)}}}`, null],
      [`{"deleted": {"leads": ["a"],\n"students": ${ids(90_000)}}}`, 'line 2, column 13: the id list that begins there takes more than 50000 bytes of the file: delete fewer records in one import'],
      [`{"leads": []${' '.repeat(40_000)}, "students": []}`, 'line 1, column 12: the file runs on from there for more than 20000 bytes with no record or name ending'],
      [`{"leads": [], "${'n'.repeat(40_000)}": []}`, 'line 1, column 13: the file runs on from there'],
      [`{"leads": [{"id": "l1"}\n\n, "${'x'.repeat(40_000)}"]}`, 'line 3, column 1: the file runs on from there'],
      // The place of a name read across pieces of the file is where it begins.
      [`{"leads": [], "students"${' '.repeat(40_000)}: []}`, 'line 1, column 15: the file runs on from there'],
      [`{"leads": [123456${' '.repeat(40_000)}]}`, 'line 1, column 12: the file runs on from there'],
      // White space before the file's object and after it holds nothing, and is not measured;
      // a token there is held until it ends, up to the larger limit.
      [`${' '.repeat(40_000)}{"leads": []}${'\n'.repeat(40_000)}`, null],
      [`\uFEFF${' '.repeat(40_000)}{"leads": []}`, null],
      [`{"leads": []} "${'x'.repeat(40_000)}"`, 'line 1, column 15: the file runs on from there for more than 20000 bytes'],
      [`"${'x'.repeat(40_000)}"`, 'line 1, column 1: the file runs on from there'],
      // An id long enough to pass the value limit, in a list under its own: nothing refused after it.
      [`{"deleted": {"leads": ["${'x'.repeat(30_000)}"]}}${' '.repeat(40_000)}`, null],
    ];
    // Chunks of 64 and 509 bytes (odd: a boundary falls inside a two-byte character too); the
    // smaller sizes, which read these long texts thousands of times, are the short texts' above.
    for (const [text, reason] of cases) {
      for (const chunkBytes of [1 << 18, 64, 509]) {
        const bytes = Buffer.from(text, 'utf8');
        const { combined, exact } = await bothReadings(bytes, { chunkBytes, limits });
        assert.deepEqual(combined, exact, text.slice(0, 40));
        const problems = combined.filter((e) => (e as unknown[])[0] === 'problem').map((e) => ((e as unknown[])[1] as ImportError).reason);
        if (reason === null) assert.deepEqual(problems, []);
        else assert.match(problems.at(-1) ?? '', new RegExp(`^the file is not an import file at ${reason.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`), text.slice(0, 40));
      }
    }
    // A token quoted in a message is cut short.
    for (const [tail, quoted] of [[`"${'x'.repeat(100)}"`, `"${'x'.repeat(55)}..."`], ['1'.repeat(100), '1.111111111111111e+99']] as const) {
      const { exact } = await bothReadings(Buffer.from(`{"leads": []} ${tail}\n`), {});
      assert.deepEqual(exact, [['arrayEnd', 'leads'], ['problem', { array: null, index: null, field: null, reason: `the file is not valid JSON at line 1, column 15: unexpected ${quoted} after the end of the object` }]]);
    }
    // A number at the very end of the file is a token too: said as any other value would be.
    for (const [text, reason] of [
      ['42', 'the file must be a JSON object'],
      ['{} 5', 'the file is not valid JSON at line 1, column 4: unexpected 5 after the end of the object'],
      ['{"leads": []}\n12', 'the file is not valid JSON at line 2, column 1: unexpected 12 after the end of the object'],
    ] as const) {
      const { combined, exact } = await bothReadings(Buffer.from(text), {});
      assert.deepEqual(combined, exact, text);
      const problems = exact.filter((e) => (e as unknown[])[0] === 'problem').map((e) => ((e as unknown[])[1] as ImportError).reason);
      assert.ok(problems.length === 1 && problems[0]!.startsWith(reason), `${text}: ${problems.join('; ')}`);
    }
    const blank = Buffer.from(' '.repeat(100_000));
    const { combined } = await bothReadings(blank, { limits });
    assert.deepEqual(combined, [['problem', { array: null, index: null, field: null, reason: 'the file holds nothing but white space' }]]);
    // At the limits of the service, a record of 2 MiB is refused before it is read whole.
    const huge = Buffer.from(`{"leads": [{"id": "l1", "notes": "${'x'.repeat(2 << 20)}"}]}`);
    assert.equal(await readPlain(writeFile(huge), huge.length, new Recorder(), undefined, {}), false);
    const recorder = new Recorder();
    await fileSource(writeFile(huge), huge.length).feed(recorder);
    assert.deepEqual(recorder.events, [['problem', { array: null, index: null, field: null, reason: 'the file is not an import file at line 1, column 12: the record that begins there takes more than 1 MiB of the file, which no record of the format does' }]]);
  });

  it('refuses a file changed between the plain reading and the exact one', async () => {
    const bytes = Buffer.concat([valid.subarray(0, -1), Buffer.from(',}')]);
    const file = writeFile(bytes);
    // Whole seconds, which the file system keeps exactly, so that the time put back is the same.
    const [atime, mtime] = [new Date(Date.UTC(2020, 0, 1)), new Date(Date.UTC(2020, 0, 2))];
    fs.utimesSync(file, atime, mtime);
    // Written again while the plain reading runs, as long and with its time put back: only its change time tells.
    const recorder = new (class extends Recorder {
      private written = false;

      override async settle(): Promise<void> {
        if (this.written) return;
        this.written = true;
        // Past the file system's clock tick, so that the change time moves.
        await new Promise((resolve) => setTimeout(resolve, 30));
        fs.writeFileSync(file, Buffer.from(bytes.toString('latin1').replace('br-1', 'br-9'), 'latin1'));
        fs.utimesSync(file, atime, mtime);
      }
    })();
    await fileSource(file, bytes.length, { chunkBytes: 64 }).feed(recorder);
    assert.deepEqual(recorder.events.at(-1), ['problem', { array: null, index: null, field: null, reason: 'the file changed while it was read' }]);
    assert.ok(recorder.events.some((e) => (e as unknown[])[0] === 'record'));
  });

  it('hands over what the exact reading alone does, for any edits of a valid file, in chunks of any size', async (t) => {
    await checkProperty(
      t,
      'import file readings agree',
      150,
      fc.asyncProperty(fc.array(edit, { minLength: 1, maxLength: 4 }), fc.oneof(fc.constant(1 << 18), fc.integer({ min: 7, max: 20_000 })), fc.constantFrom(1, 2, 5), LIMITS, async (edits, chunkBytes, maxProblems, limits) => {
        const bytes = edits.reduce(apply, valid);
        const { combined, exact } = await bothReadings(bytes, { chunkBytes, limits }, maxProblems);
        assert.deepEqual(combined, exact);
      }),
    );
  });
});
