/**
 * The plain reading of an import file: the top level followed byte by byte, and each value
 * one level below it (a record of an array, an id list of `deleted`) cut out by its
 * brackets and read by JSON.parse. It takes only the layout of a valid file: at anything
 * else (a syntax error, a record naming a field twice, a top-level value that is neither an
 * array nor an object, a value below it that is not one either) it throws NotPlain, having
 * handed over nothing of what it could not read, and the exact reader (source.ts) goes on.
 * It throws NotPlain too where the file runs on for more than its limits (`SpanLimits`)
 * from the last mark of the top two levels: it holds no more bytes than that, and the
 * exact reader, which measures the same spans, says where.
 */

/** The file is not in the plain layout here: the exact reader says why, or reads it. */
export class NotPlain extends Error {}

/**
 * How far the file may run on from the last mark of its top two levels (the file's braces,
 * a member's name, its colon and brackets, the commas, colons and names between the values
 * below it, each such value's end): a value below them may take `value` bytes of the file,
 * from its bracket, and `list` in an object member (the id lists of `deleted`); anything
 * else between two marks, white space included, `value`. White space before the file's
 * object and after it is not measured.
 */
export interface SpanLimits {
  value: number;
  list: number;
}

export const MIB = 1 << 20;
/** Far more than any valid record takes (a few kilobytes: text is at most 1,000 characters); an id list of about a million ids. */
export const SPAN_LIMITS: SpanLimits = { value: MIB, list: 16 * MIB };

export interface ScanEvents {
  /** A top-level member begins: its name, and its value, an array or an object. */
  member(name: string, kind: 'array' | 'object'): void;
  /** A value inside the current member: an array's element by index, an object's by name. */
  value(key: number | string, value: unknown): void;
  /** The current member's value has ended. */
  memberEnd(): void;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const LEFT_BRACE = 0x7b;
const RIGHT_BRACE = 0x7d;
const LEFT_BRACKET = 0x5b;
const RIGHT_BRACKET = 0x5d;
/** A closing bracket is its opening one plus two, for both kinds. */
const CLOSES = 2;

export const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const opens = (b: number) => b === LEFT_BRACE || b === LEFT_BRACKET;

/** Levels a value below the top may open: more than any value of the format, fewer than the exact reader allows. */
const VALUE_DEPTH = 32;

// Where the scan is, outside a value being cut out.
const START = 0; // before the file's object (a byte order mark may come first)
const NAME = 1; // a member's name must come (after "{" or ",")
const NAME_OR_END = 2; // after the file's "{"
const NAME_COLON = 3;
const MEMBER = 4; // a member's value must come
const AFTER_MEMBER = 5;
const DONE = 6; // after the file's "}": only white space
const ENTRY_OR_END = 7; // after the member's "[" or "{"
const ENTRY = 8; // after a "," inside the member
const ENTRY_COLON = 9; // after an entry's name, in an object member
const ENTRY_VALUE = 10; // an object member's entry value must come
const AFTER_ENTRY = 11;

// What is being cut out.
const NOTHING = 0;
const MEMBER_NAME = 1;
const ENTRY_NAME = 2;
const ENTRY_VALUE_BYTES = 3;

export class PlainScanner {
  private state = START;
  private atFileStart = true;
  private memberIsArray = false;
  /** The byte that ends the current member's value. */
  private closer = RIGHT_BRACKET;
  private memberName = '';
  private entryName = '';
  private index = 0;

  // The value being cut out: its kind, its bytes so far, and where it is in them.
  private cutting = NOTHING;
  private parts: Buffer[] = [];
  private depth = 0;
  private readonly stack = new Uint8Array(VALUE_DEPTH);
  private inString = false;
  private escaped = false;
  /** Names at the record's own level: fewer fields once read means a name given twice. */
  private names = 0;
  private expectName = false;
  /**
   * The file's offset of the current buffer, and of the last mark of the top two levels
   * (see SpanLimits). A name marks where it begins once it has ended (the exact reader's
   * tokenizer hands it over then): till then `nameAt` holds that place.
   */
  private base = 0;
  private mark = 0;
  private nameAt = 0;

  private readonly events: ScanEvents;
  private readonly limits: SpanLimits;

  constructor(
    events: ScanEvents,
    limits: SpanLimits = SPAN_LIMITS,
  ) {
    this.events = events;
    this.limits = limits;
  }

  /** Takes the file's next bytes (a character may be cut between two writes). */
  write(buffer: Buffer): void {
    this.scan(buffer);
    this.base += buffer.length;
    // Before the file's object and after it, only white space is taken, and nothing held.
    if (this.state === START || this.state === DONE) return;
    const limit = this.cutting === ENTRY_VALUE_BYTES && !this.memberIsArray ? this.limits.list : this.limits.value;
    if (this.base - this.mark > limit) throw new NotPlain();
  }

  private scan(buffer: Buffer): void {
    const fileStart = this.atFileStart;
    this.atFileStart = false;
    let i = 0;
    const n = buffer.length;
    if (this.cutting !== NOTHING) {
      i = this.cut(buffer, 0);
      if (i === n) return;
      i += 1;
    }
    for (; i < n; i++) {
      const b = buffer[i]!;
      if (isSpace(b)) continue;
      const marked = this.mark;
      this.mark = this.base + i;
      switch (this.state) {
        case START:
          if (b === 0xef && fileStart && i === 0 && buffer[1] === 0xbb && buffer[2] === 0xbf) {
            i += 2;
            continue;
          }
          if (b !== LEFT_BRACE) throw new NotPlain();
          this.state = NAME_OR_END;
          continue;
        case NAME_OR_END:
        case NAME:
          if (b === RIGHT_BRACE && this.state === NAME_OR_END) {
            this.state = DONE;
            continue;
          }
          if (b !== QUOTE) throw new NotPlain();
          this.begin(MEMBER_NAME);
          break;
        case NAME_COLON:
          if (b !== COLON) throw new NotPlain();
          this.state = MEMBER;
          continue;
        case MEMBER:
          if (!opens(b)) throw new NotPlain();
          this.memberIsArray = b === LEFT_BRACKET;
          this.closer = b + CLOSES;
          this.index = 0;
          this.state = ENTRY_OR_END;
          this.events.member(this.memberName, this.memberIsArray ? 'array' : 'object');
          continue;
        case AFTER_MEMBER:
          if (b === COMMA) this.state = NAME;
          else if (b === RIGHT_BRACE) this.state = DONE;
          else throw new NotPlain();
          continue;
        case ENTRY_OR_END:
        case ENTRY:
          if (this.state === ENTRY_OR_END && b === this.closer) {
            this.endMember();
            continue;
          }
          if (!(this.memberIsArray ? opens(b) : b === QUOTE)) throw new NotPlain();
          this.begin(this.memberIsArray ? ENTRY_VALUE_BYTES : ENTRY_NAME);
          break;
        case ENTRY_COLON:
          if (b !== COLON) throw new NotPlain();
          this.state = ENTRY_VALUE;
          continue;
        case ENTRY_VALUE:
          if (!opens(b)) throw new NotPlain();
          this.begin(ENTRY_VALUE_BYTES);
          break;
        case AFTER_ENTRY:
          if (b === COMMA) this.state = ENTRY;
          else if (b === this.closer) this.endMember();
          else throw new NotPlain();
          continue;
        default:
          throw new NotPlain();
      }
      // A value or a name begins at `i`: cut it out, here or in the writes to come.
      if (this.cutting !== ENTRY_VALUE_BYTES) {
        this.nameAt = this.mark;
        this.mark = marked;
      }
      i = this.cut(buffer, i);
      if (i === n) return;
    }
  }

  /** The file has ended. */
  end(): void {
    if (this.state !== DONE || this.cutting !== NOTHING) throw new NotPlain();
  }

  private endMember(): void {
    this.state = AFTER_MEMBER;
    this.events.memberEnd();
  }

  private begin(what: number): void {
    this.cutting = what;
    this.parts = [];
    this.depth = 0;
    this.inString = false;
    this.escaped = false;
    this.names = 0;
    this.expectName = false;
  }

  /**
   * Follows the value being cut out from `from` in `buffer`: returns the index of its last
   * byte once it ends there (and hands it over), else the buffer's length (the bytes kept).
   */
  private cut(buffer: Buffer, from: number): number {
    const n = buffer.length;
    let inString = this.inString;
    let escaped = this.escaped;
    let depth = this.depth;
    let names = this.names;
    let expectName = this.expectName;
    const stack = this.stack;
    const isName = this.cutting !== ENTRY_VALUE_BYTES;
    let i = from;
    let ended = false;
    for (; i < n; i++) {
      const b = buffer[i]!;
      if (inString) {
        if (escaped) escaped = false;
        else if (b === BACKSLASH) escaped = true;
        else if (b === QUOTE) {
          inString = false;
          if (isName) {
            ended = true;
            break;
          }
        }
        continue;
      }
      if (b === QUOTE) {
        inString = true;
        if (expectName && depth === 1) {
          names += 1;
          expectName = false;
        }
      } else if (opens(b)) {
        if (depth === VALUE_DEPTH) throw new NotPlain();
        stack[depth++] = b;
        if (depth === 1) expectName = b === LEFT_BRACE;
      } else if (b === RIGHT_BRACE || b === RIGHT_BRACKET) {
        if (depth === 0 || stack[--depth] !== b - CLOSES) throw new NotPlain();
        if (depth === 0) {
          ended = true;
          break;
        }
      } else if (b === COMMA && depth === 1) {
        expectName = stack[0] === LEFT_BRACE;
      }
    }
    if (!ended) {
      this.parts.push(buffer.subarray(from, n));
      this.inString = inString;
      this.escaped = escaped;
      this.depth = depth;
      this.names = names;
      this.expectName = expectName;
      return n;
    }
    const bytes = this.parts.length === 0 ? buffer.subarray(from, i + 1) : Buffer.concat([...this.parts, buffer.subarray(from, i + 1)]);
    this.parts = [];
    const what = this.cutting;
    this.cutting = NOTHING;
    let value: unknown;
    try {
      value = JSON.parse(bytes.toString('utf8'));
    } catch {
      throw new NotPlain();
    }
    if (what !== ENTRY_VALUE_BYTES) this.mark = this.nameAt;
    if (what === MEMBER_NAME) {
      this.memberName = value as string;
      this.state = NAME_COLON;
    } else if (what === ENTRY_NAME) {
      this.entryName = value as string;
      this.state = ENTRY_COLON;
    } else {
      this.mark = this.base + i;
      // JSON.parse keeps the last of a name given twice: the exact reader reports it.
      if (bytes[0] === LEFT_BRACE && Object.keys(value as object).length !== names) throw new NotPlain();
      this.state = AFTER_ENTRY;
      this.events.value(this.memberIsArray ? this.index++ : this.entryName, value);
    }
    return i;
  }
}
