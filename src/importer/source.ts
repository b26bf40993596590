/**
 * Where an import's records come from: a file read as a stream (one record at a time, so
 * memory does not grow with the file), or a value already in memory (the demo, tests).
 * Both hand the same calls to an `Intake` (intake.ts) and apply the same rules to the
 * file's top level: one object, known keys, each once, arrays of records, and `deleted`
 * an object of arrays of ids. A file is read plainly (scan.ts) and, where that stops,
 * exactly: a JSON syntax error is reported with its line and column.
 */
import { isUtf8 } from 'node:buffer';
import fs from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { Tokenizer, TokenParser, TokenType, type ParsedElementInfo, type ParsedTokenInfo } from '@streamparser/json';
import type { ImportError } from './errors.js';
import { isSpace, MIB, NotPlain, PlainScanner, SPAN_LIMITS, type SpanLimits } from './scan.js';
import { ARRAY_NAMES, type ArrayName } from './schema.js';
import { isObject } from './validate.js';

/**
 * What a source hands over, in the file's order. The calls are synchronous; the source
 * awaits `settle()` every so often, so the writes they start keep pace with the reading.
 */
export interface Intake {
  /** True once no more problems can be reported: the source may stop reading. */
  readonly full: boolean;
  problem(error: ImportError): void;
  /** The array `array` is there but cannot be read as records: references into it are not judged. */
  unreadable(array: ArrayName): void;
  record(array: ArrayName, index: number, value: unknown): void;
  deleted(resource: string, ids: unknown): void;
  /** The array `array` of the file has ended. */
  arrayEnd(array: ArrayName): void;
  settle(): Promise<void>;
}

export interface Progress {
  records: number;
  bytes: number;
  /** The file's size; null for a value in memory. */
  totalBytes: number | null;
}

export interface Source {
  /** About how many records it holds, before it is read. */
  readonly estimate: number;
  feed(intake: Intake, onProgress?: (progress: Progress) => void): Promise<void>;
}

/** Bytes a record takes in a file, about: a file's size over this is its estimate. */
const RECORD_BYTES = 250;

const fileError = (reason: string): ImportError => ({ array: null, index: null, field: null, reason });

const NOT_AN_OBJECT = `the file must be a JSON object with the arrays ${ARRAY_NAMES.join(', ')} (and deleted)`;

type Kind = 'array' | 'object' | 'other';

/** What the top-level key `name` holds decides what is done with its content. */
type Role = { array: ArrayName } | 'deleted' | 'skip';

/** The rules of the file's top level, shared by both sources. */
class TopLevel {
  private readonly seen = new Set<string>();

  private readonly intake: Intake;

  constructor(intake: Intake) {
    this.intake = intake;
  }

  key(name: string, kind: Kind): Role {
    if (this.seen.has(name)) {
      this.intake.problem({ array: name, index: null, field: null, reason: 'appears twice in the file' });
      return 'skip';
    }
    this.seen.add(name);
    if (name === 'deleted') {
      if (kind === 'object') return 'deleted';
      this.intake.problem({ array: 'deleted', index: null, field: null, reason: 'must be an object of arrays of ids, by resource' });
      return 'skip';
    }
    if (!(ARRAY_NAMES as string[]).includes(name)) {
      this.intake.problem({ array: name, index: null, field: null, reason: `is not an array of the import format (${ARRAY_NAMES.join(', ')}, deleted)` });
      return 'skip';
    }
    if (kind !== 'array') {
      this.intake.problem({ array: name, index: null, field: null, reason: 'must be an array of records' });
      this.intake.unreadable(name as ArrayName);
      return 'skip';
    }
    return { array: name as ArrayName };
  }
}

/** Records handed over between two waits for the writes to keep pace. */
const SETTLE_EVERY = 1000;

const kindOf = (value: unknown): Kind => (Array.isArray(value) ? 'array' : typeof value === 'object' && value !== null ? 'object' : 'other');

/** A parsed value in memory. */
export function valueSource(input: unknown): Source {
  const arrays = kindOf(input) === 'object' ? Object.values(input as Record<string, unknown>).filter((v) => Array.isArray(v)) : [];
  return {
    estimate: arrays.reduce((n, values) => n + (values as unknown[]).length, 0),
    async feed(intake, onProgress) {
      if (kindOf(input) !== 'object') {
        intake.problem(fileError(NOT_AN_OBJECT));
        return;
      }
      const top = new TopLevel(intake);
      let records = 0;
      for (const [name, value] of Object.entries(input as Record<string, unknown>)) {
        if (intake.full) break;
        const role = top.key(name, kindOf(value));
        if (role === 'deleted') {
          for (const [resource, ids] of Object.entries(value as Record<string, unknown>)) intake.deleted(resource, ids);
        } else if (role !== 'skip') {
          const values = value as unknown[];
          for (let index = 0; index < values.length && !intake.full; index++) {
            intake.record(role.array, index, values[index]);
            records += 1;
            if (records % SETTLE_EVERY === 0) await intake.settle();
          }
          intake.arrayEnd(role.array);
        }
      }
      await intake.settle();
      onProgress?.({ records, bytes: 0, totalBytes: null });
    },
  };
}

/** Bytes read from the file per chunk. */
const CHUNK_BYTES = 1 << 18;
/**
 * Bytes parsed between two turns of the event loop. Parsing a whole chunk takes tens of
 * milliseconds, and the answers of the statements that merge an array while the file is
 * read (PostgreSQL) wait for the turn: the database would idle that long after each.
 */
const SLICE_BYTES = 1 << 14;

/** Lets the event loop take what has arrived (the database's answers) before the reading goes on. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
const isContinuation = (byte: number) => (byte & 0xc0) === 0x80;

/** The characters of UTF-8 bytes as JavaScript counts them: a 4-byte sequence is two. */
function charactersIn(bytes: Buffer): number {
  let n = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (!isContinuation(byte)) n += byte >= 0xf0 ? 2 : 1;
  }
  return n;
}

/**
 * A file's chunks cut where characters end: the bytes of a character cut at the end of a
 * chunk wait for the next, so each piece can be checked as UTF-8 on its own.
 */
class CharacterPieces {
  private carry = Buffer.alloc(0);

  next(chunk: Buffer): Buffer {
    const data = this.carry.length === 0 ? chunk : Buffer.concat([this.carry, chunk]);
    const end = completeEnd(data);
    this.carry = Buffer.from(data.subarray(end));
    return data.subarray(0, end);
  }

  /** Bytes at the end of the file that began a character and did not finish it. */
  get unfinished(): number {
    return this.carry.length;
  }
}

/** Where the last complete character of `data` ends: before a lead byte whose continuation bytes are still to come. */
function completeEnd(data: Buffer): number {
  for (let i = data.length - 1; i >= Math.max(0, data.length - 3); i--) {
    const byte = data[i]!;
    if (isContinuation(byte)) continue;
    const size = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return data.length - i < size ? i : data.length;
  }
  return data.length;
}

/** The offset of the first byte of `data` that does not begin a well-formed UTF-8 character (as isUtf8 judges), or -1. */
function firstInvalid(data: Buffer): number {
  for (let i = 0; i < data.length; ) {
    const lead = data[i]!;
    if (lead < 0x80) {
      i += 1;
      continue;
    }
    const more = lead >= 0xc2 && lead <= 0xdf ? 1 : lead >= 0xe0 && lead <= 0xef ? 2 : lead >= 0xf0 && lead <= 0xf4 ? 3 : 0;
    if (more === 0 || i + more >= data.length) return i;
    let code = lead & (0x3f >> more);
    for (let k = 1; k <= more; k++) {
      const byte = data[i + k]!;
      if (!isContinuation(byte)) return i;
      code = (code << 6) | (byte & 0x3f);
    }
    const overlong = code < [0, 0x80, 0x800, 0x10000][more]!;
    if (overlong || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return i;
    i += more + 1;
  }
  return -1;
}

/**
 * A piece of the file: its offset and bytes, the line it begins on, the characters of that
 * line before it, and whether the byte before it was a CR (whose LF, first in this piece,
 * ends the same line break).
 */
interface LinePiece {
  offset: number;
  bytes: Buffer;
  line: number;
  column: number;
  afterCr: boolean;
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * The line breaks in `bytes` (LF, CRLF, or a CR alone, as editors count them) and the index
 * just past the last one (-1: none). `afterCr`: the byte before `bytes` was a CR, so an LF
 * first in them ends that break.
 */
function lineBreaks(bytes: Buffer, afterCr: boolean): { count: number; after: number } {
  let count = 0;
  let after = -1;
  let i = 0;
  if (afterCr && bytes[0] === LF) {
    i = 1;
    after = 1;
  }
  let lf = bytes.indexOf(LF, i);
  let cr = bytes.indexOf(CR, i);
  while (lf !== -1 || cr !== -1) {
    count += 1;
    if (cr !== -1 && (lf === -1 || cr < lf)) {
      after = cr + (lf === cr + 1 ? 2 : 1);
      if (lf === cr + 1) lf = bytes.indexOf(LF, after);
      cr = bytes.indexOf(CR, cr + 1);
    } else {
      after = lf + 1;
      lf = bytes.indexOf(LF, after);
    }
  }
  return { count, after };
}

/**
 * Line and column (from 1, in characters) of a byte offset in the pieces fed since the
 * oldest one kept (`keepFrom`): a token is handed over when it ends, and the place to
 * report may lie pieces before.
 */
class Lines {
  private pieces: LinePiece[] = [];
  private end = 0;
  private line = 1;
  private column = 0;
  private afterCr = false;

  next(piece: Buffer): void {
    // The file's byte order mark is no character of its first line (as an editor shows it).
    if (this.end === 0 && piece[0] === 0xef && piece[1] === 0xbb && piece[2] === 0xbf) this.column = -1;
    this.pieces.push({ offset: this.end, bytes: piece, line: this.line, column: this.column, afterCr: this.afterCr });
    this.end += piece.length;
    const { count, after } = lineBreaks(piece, this.afterCr);
    if (piece.length > 0) this.afterCr = piece[piece.length - 1] === CR;
    if (after === -1) {
      this.column += charactersIn(piece);
      return;
    }
    this.line += count;
    this.column = charactersIn(piece.subarray(after));
  }

  /** Lets the pieces before the one holding `offset` go: no place before it will be asked for. */
  keepFrom(offset: number): void {
    let drop = 0;
    while (drop + 1 < this.pieces.length && this.pieces[drop + 1]!.offset <= offset) drop += 1;
    if (drop > 0) this.pieces = this.pieces.slice(drop);
  }

  at(offset: number): { line: number; column: number } {
    let index = this.pieces.length - 1;
    while (index > 0 && this.pieces[index]!.offset > offset) index -= 1;
    const piece = this.pieces[index];
    if (piece === undefined) return { line: 1, column: 1 };
    const head = piece.bytes.subarray(0, Math.max(0, Math.min(offset - piece.offset, piece.bytes.length)));
    const { count, after } = lineBreaks(head, piece.afterCr);
    if (after === -1) return { line: piece.line, column: piece.column + charactersIn(head) + 1 };
    return { line: piece.line + count, column: charactersIn(head.subarray(after)) + 1 };
  }
}

const PUNCTUATION: Partial<Record<TokenType, string>> = {
  [TokenType.LEFT_BRACE]: '"{"',
  [TokenType.RIGHT_BRACE]: '"}"',
  [TokenType.LEFT_BRACKET]: '"["',
  [TokenType.RIGHT_BRACKET]: '"]"',
  [TokenType.COLON]: '":"',
  [TokenType.COMMA]: '","',
};

/** A token as a message shows it: a long string cut short (a number comes as JavaScript reads it). */
function describeToken(info: ParsedTokenInfo): string {
  const text = PUNCTUATION[info.token] ?? JSON.stringify(info.value);
  return text.length > 60 ? `${text.slice(0, 56)}..."` : text;
}

/** The character the tokenizer stopped at, from its message (`Unexpected "x" at ...`). */
function unexpected(message: string): string {
  const match = /^Unexpected "(.*)" at /s.exec(message);
  if (!match) return 'unexpected input';
  const char = match[1]!;
  if (char === '') return 'a control character inside a string';
  return `unexpected ${JSON.stringify(char)}`;
}

class JsonSyntaxError extends Error {}

/**
 * Levels of objects and arrays a file may open (the format's values use four). The parser
 * keeps every open level, so without a bound a file of brackets takes memory in
 * proportion to its size.
 */
const MAX_DEPTH = 64;

/**
 * A tokenizer that keeps every U+FEFF inside strings: @streamparser/json's decoder drops one
 * at the start of each piece of a string it decodes, so `"a\uFEFFb"` was read as `"ab"`
 * (docs/decisions.md, "Imports at scale and the change log"). The file's own byte order mark it still skips.
 */
function newTokenizer(): Tokenizer {
  const tokenizer = new Tokenizer();
  const strings = (tokenizer as unknown as { bufferedString: { decoder: unknown } }).bufferedString;
  strings.decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  return tokenizer;
}

/**
 * Hands what it is given on to `to`, counting it, after dropping the first `skip`: those
 * the plain reading handed over already when the exact one reads the file again.
 */
class Handover implements Intake {
  count = 0;

  private readonly to: Intake;
  private readonly skip: number;

  constructor(
    to: Intake,
    skip: number,
  ) {
    this.to = to;
    this.skip = skip;
  }

  get full(): boolean {
    return this.to.full;
  }

  private pass(): boolean {
    return this.count++ >= this.skip;
  }

  problem(error: ImportError): void {
    if (this.pass()) this.to.problem(error);
  }

  unreadable(array: ArrayName): void {
    if (this.pass()) this.to.unreadable(array);
  }

  record(array: ArrayName, index: number, value: unknown): void {
    if (this.pass()) this.to.record(array, index, value);
  }

  deleted(resource: string, ids: unknown): void {
    if (this.pass()) this.to.deleted(resource, ids);
  }

  arrayEnd(array: ArrayName): void {
    if (this.pass()) this.to.arrayEnd(array);
  }

  settle(): Promise<void> {
    return this.to.settle();
  }
}

export interface FileReading {
  /** Bytes read from the file per chunk (tests cut values across chunks with a few). */
  chunkBytes?: number;
  /** How far the file may run on between the marks of its top two levels (scan.ts; tests make them small). */
  limits?: SpanLimits;
}

/**
 * A JSON file read as a stream of records: by the plain reading (scan.ts), several times
 * faster, and where that stops, by the exact one, which reads the file again from the
 * start, hands over only what the plain one had not, and says what is wrong, if anything.
 * Both read the same open file; one whose size or times change meanwhile is refused. A
 * pipe, which cannot be read twice, is read exactly, once.
 */
export function fileSource(file: string, size: number, reading: FileReading = {}): Source {
  return {
    estimate: Math.ceil(size / RECORD_BYTES),
    async feed(intake, onProgress) {
      // What cannot be read twice (a pipe) is read once, as it comes: exactly.
      if (!fs.statSync(file).isFile()) return readExact(file, size, intake, onProgress, reading);
      const handle = await fs.promises.open(file);
      try {
        const opened = await handle.stat();
        const unchanged = async () => {
          const now = await handle.stat();
          return now.size === opened.size && now.mtimeMs === opened.mtimeMs && now.ctimeMs === opened.ctimeMs;
        };
        const handed = new Handover(intake, 0);
        const read = await readPlain(handle, size, handed, onProgress, reading);
        if (await unchanged()) {
          // A full intake takes nothing more: the exact reading would only be lost on it.
          if (read || intake.full) return;
          await readExact(handle, size, new Handover(intake, handed.count), onProgress, reading);
          if (await unchanged()) return;
        }
        intake.problem(fileError('the file changed while it was read'));
      } finally {
        await handle.close();
      }
    },
  };
}

/** A file to read: its path, or a handle open on it, read from its start each time. */
export type FileBytes = string | FileHandle;

/**
 * The file's chunks, each a buffer of its own, from its start: a handle opened here reads on
 * from where it is (a pipe too), the handle given, by position.
 */
async function* chunksOf(file: FileBytes, reading: FileReading): AsyncGenerator<Buffer> {
  const handle = typeof file === 'string' ? await fs.promises.open(file) : file;
  const size = reading.chunkBytes ?? CHUNK_BYTES;
  try {
    for (let position = 0; ; ) {
      const chunk = Buffer.allocUnsafe(size);
      const { bytesRead } = await handle.read(chunk, 0, size, handle === file ? position : null);
      if (bytesRead === 0) return;
      position += bytesRead;
      // A short read (a pipe's) is copied: a piece kept for a while must not hold the whole chunk.
      yield bytesRead < size / 2 ? Buffer.from(chunk.subarray(0, bytesRead)) : chunk.subarray(0, bytesRead);
    }
  } finally {
    if (handle !== file) await handle.close();
  }
}

/**
 * The plain reading of a file (scan.ts): true once the file is read (or the intake is
 * full), false if it stopped at what it does not read.
 */
export async function readPlain(file: FileBytes, size: number, intake: Intake, onProgress: ((progress: Progress) => void) | undefined, reading: FileReading): Promise<boolean> {
  const top = new TopLevel(intake);
  let role: Role = 'skip';
  let records = 0;
  const scanner = new PlainScanner(
    {
      member(name, kind) {
        role = top.key(name, kind);
      },
      value(key, value) {
        if (typeof role === 'object') {
          if (intake.full) return;
          records += 1;
          intake.record(role.array, key as number, value);
        } else if (role === 'deleted') {
          intake.deleted(key as string, value);
        }
      },
      memberEnd() {
        if (typeof role === 'object') intake.arrayEnd(role.array);
        role = 'skip';
      },
    },
    reading.limits,
  );
  const pieces = new CharacterPieces();
  let bytes = 0;
  try {
    for await (const chunk of chunksOf(file, reading)) {
      const piece = pieces.next(chunk);
      if (!isUtf8(piece)) return false;
      for (let at = 0; at < piece.length; at += SLICE_BYTES) {
        if (at > 0) await turn();
        scanner.write(piece.subarray(at, at + SLICE_BYTES));
      }
      bytes += chunk.length;
      await intake.settle();
      onProgress?.({ records, bytes, totalBytes: size });
      if (intake.full) return true;
    }
    if (pieces.unfinished > 0) return false;
    scanner.end();
  } catch (err) {
    if (err instanceof NotPlain) return false;
    throw err;
  }
  await intake.settle();
  onProgress?.({ records, bytes, totalBytes: size });
  return true;
}

/**
 * The exact reading of a file: every token through @streamparser/json, with the line and
 * column of what is wrong. Reports what the file breaks of JSON or of the top level's rules.
 */
export async function readExact(file: FileBytes, size: number, intake: Intake, onProgress: ((progress: Progress) => void) | undefined, reading: FileReading): Promise<void> {
  const lines = new Lines();
  const tokenizer = newTokenizer();
  const parser = new TokenParser({ paths: ['$.*.*'], keepStack: false });
  const top = new TopLevel(intake);

  let depth = 0;
  let sawValue = false;
  let expectKey = false;
  let key: string | null = null;
  let role: Role = 'skip';
  let lastOffset = 0;
  /** The bytes of the file's byte order mark, which the tokenizer skips: 3, or 0 without one (known at the first piece). */
  let bom = 0;
  let lastToken: ParsedTokenInfo | null = null;
  let records = 0;
  // The last mark of the top two levels (scan.ts, SpanLimits): no place before it is reported.
  const limits = reading.limits ?? SPAN_LIMITS;
  let mark = 0;
  let objectMember = false;
  // Outside the file's object (before it, after it) the mark is where white space ends:
  // there a token has begun once anything else has come, and is then measured from its start.
  let tokenOutside = false;

  const syntax = (offset: number, what: string): JsonSyntaxError => {
    const { line, column } = lines.at(offset);
    return new JsonSyntaxError(`the file is not valid JSON at line ${line}, column ${column}: ${what}`);
  };

  // The field names of the record being read, to find one given twice (the parser
  // would keep the last silently): one set, emptied at each record.
  const fields = new Set<string>();
  let expectField = false;
  let repeated: string | null = null;

  // Follows the top level (which key holds which value) and the field names of each
  // record on the tokens; the parser assembles the records themselves.
  tokenizer.onToken = (info) => {
    // The tokenizer counts from after the file's byte order mark.
    const offset = info.offset + bom;
    lastOffset = offset;
    lastToken = info;
    const token = info.token;
    if (depth <= 2) mark = offset;
    if (depth === 2 && token === TokenType.LEFT_BRACE) {
      fields.clear();
      expectField = true;
      repeated = null;
    } else if (depth === 3) {
      if (expectField && token === TokenType.STRING) {
        const field = info.value as string;
        if (fields.has(field)) repeated ??= field;
        else fields.add(field);
        expectField = false;
      } else if (token === TokenType.COMMA) {
        expectField = true;
      }
    } else if (depth === 0) {
      if (sawValue) throw syntax(offset, `unexpected ${describeToken(info)} after the end of the object`);
      if (token !== TokenType.LEFT_BRACE) throw new JsonSyntaxError(NOT_AN_OBJECT);
      sawValue = true;
      expectKey = true;
    } else if (depth === 1) {
      if (expectKey) {
        if (token === TokenType.STRING) key = info.value as string;
        expectKey = false;
      } else if (token === TokenType.COMMA) {
        expectKey = true;
      } else if (token !== TokenType.COLON && key !== null) {
        role = top.key(key, token === TokenType.LEFT_BRACKET ? 'array' : token === TokenType.LEFT_BRACE ? 'object' : 'other');
        objectMember = token === TokenType.LEFT_BRACE;
        key = null;
      }
    }
    const opens = token === TokenType.LEFT_BRACE || token === TokenType.LEFT_BRACKET;
    if (opens && depth === MAX_DEPTH) {
      const { line, column } = lines.at(offset);
      throw new JsonSyntaxError(`the file is not an import file at line ${line}, column ${column}: values are nested deeper than ${MAX_DEPTH} levels, which no value of the format is`);
    }
    parser.write(info);
    if (opens) depth += 1;
    else if (token === TokenType.RIGHT_BRACE || token === TokenType.RIGHT_BRACKET) depth -= 1;
    else return;
    // A value below the top two levels has ended.
    if (depth === 2 && !opens) mark = offset;
    if (depth === 0) {
      mark = offset + 1;
      tokenOutside = false;
    }
    if (depth === 1) {
      if (typeof role === 'object') intake.arrayEnd(role.array);
      role = 'skip';
    }
  };
  parser.onValue = (element: ParsedElementInfo) => {
    if (typeof role === 'object') {
      if (typeof element.key !== 'number' || intake.full) return;
      records += 1;
      if (repeated !== null && isObject(element.value)) {
        intake.problem({ array: role.array, index: element.key, field: repeated, reason: 'is given twice in the record' });
      }
      intake.record(role.array, element.key, element.value);
    } else if (role === 'deleted' && typeof element.key === 'string') {
      intake.deleted(element.key, element.value);
    }
  };

  const notUtf8 = (offset: number): JsonSyntaxError => {
    const { line, column } = lines.at(offset);
    return new JsonSyntaxError(`the file is not UTF-8 text at line ${line}, column ${column}: the bytes there are not UTF-8`);
  };

  // The file read up to the end of `slice` (from `start`) runs on too far from the last mark:
  // said as the plain reading measures it. Outside the file's object only white space may
  // come, which neither reading holds and which moves the mark on; a token there (an error
  // once it ends) counts from its start.
  const checkSpan = (start: number, slice: Buffer) => {
    const end = start + slice.length;
    if (depth === 0 && !tokenOutside) {
      let i = Math.max(0, mark - start);
      while (i < slice.length && isSpace(slice[i]!)) i += 1;
      mark = start + i;
      if (i === slice.length) return;
      tokenOutside = true;
    }
    const inValue = depth > 2;
    const limit = inValue && objectMember ? limits.list : limits.value;
    if (end - mark <= limit) return;
    const { line, column } = lines.at(mark);
    const most = limit % MIB === 0 ? `${limit / MIB} MiB` : `${limit} bytes`;
    const what = !inValue
      ? `the file runs on from there for more than ${most} with no record or name ending, which no import file does`
      : role === 'deleted'
        ? `the id list that begins there takes more than ${most} of the file: delete fewer records in one import`
        : `the ${typeof role === 'object' ? 'record' : 'value'} that begins there takes more than ${most} of the file, which no record of the format does`;
    throw new JsonSyntaxError(`the file is not an import file at line ${line}, column ${column}: ${what}`);
  };

  const pieces = new CharacterPieces();
  let bytes = 0;
  let fed = 0;
  try {
    for await (const chunk of chunksOf(file, reading)) {
      const piece = pieces.next(chunk);
      if (fed === 0 && piece[0] === 0xef && piece[1] === 0xbb && piece[2] === 0xbf) mark = bom = 3;
      lines.keepFrom(mark);
      lines.next(piece);
      if (!isUtf8(piece)) throw notUtf8(fed + Math.max(0, firstInvalid(piece)));
      const start = fed;
      fed += piece.length;
      try {
        // The tokenizer keeps the bytes of a character cut at the end of a write for the next one.
        for (let at = 0; at < piece.length; at += SLICE_BYTES) {
          if (at > 0) await turn();
          const slice = piece.subarray(at, at + SLICE_BYTES);
          tokenizer.write(slice);
          checkSpan(start + at, slice);
        }
      } catch (err) {
        if (err instanceof JsonSyntaxError) throw err;
        const message = (err as Error).message;
        // The tokenizer's own positions count the byte order mark.
        const absolute = /absolute position "(\d+)"/.exec(message);
        throw absolute ? syntax(Number(absolute[1]), unexpected(message)) : syntax(lastOffset, `unexpected ${lastToken ? describeToken(lastToken) : 'input'}`);
      }
      bytes += chunk.length;
      await intake.settle();
      onProgress?.({ records, bytes, totalBytes: size });
      if (intake.full) return;
    }
    if (pieces.unfinished > 0) throw notUtf8(fed);
    try {
      // A number at the file's end is a token only now: what it makes wrong is said as for any other.
      tokenizer.end();
    } catch (err) {
      if (err instanceof JsonSyntaxError) throw err;
      if (sawValue) throw syntax(bytes, 'unexpected end of the file');
    }
    if (!sawValue) {
      intake.problem(fileError(bytes === 0 ? 'the file is empty' : 'the file holds nothing but white space'));
      return;
    }
    if (!parser.isEnded) throw syntax(bytes, 'unexpected end of the file');
    await intake.settle();
    onProgress?.({ records, bytes, totalBytes: size });
  } catch (err) {
    if (!(err instanceof JsonSyntaxError)) throw err;
    intake.problem(fileError(err.message));
  }
}
