/**
 * What a request looks like in a log line. The Authorization header is never logged
 * (src/logger.ts redacts it), but a client may also paste its key into the URL
 * (`?api_key=service_pk_...`), and the URL is logged with every request: anything
 * shaped like a key is masked there before it reaches a log line.
 */
/** A character of the key's prefix, as written, upper-cased or percent-encoded (once or twice). */
const prefixCharacter = (c: string) => {
  const codes = [...new Set([c.toLowerCase(), c.toUpperCase()])].map((x) => x.charCodeAt(0).toString(16));
  return `(?:${c}|%(?:25)?(?:${codes.join('|')}))`;
};
// The prefix in any of those forms, and whatever follows it up to the next delimiter (a
// truncated or encoded value too) is masked.
const KEY_IN_TEXT = new RegExp(`${[...'service_pk_'].map(prefixCharacter).join('')}[^&/?#\\s"]*`, 'gi');

export const REDACTED_KEY = '[redacted-key]';

export function redactKeys(text: string): string {
  return text.replace(KEY_IN_TEXT, REDACTED_KEY);
}

/** The key a request was made with and its school, once the key is known (src/access/decide.ts). */
export interface Caller {
  keyId: string;
  schoolId: string;
}

/** The key and school fields of a request's log lines: none until the key is known. */
export function callerFields(caller: Caller | null): Partial<Caller> {
  return caller === null ? {} : { keyId: caller.keyId, schoolId: caller.schoolId };
}

/** One answered request of a key, for the key's request log (src/access/usage.ts). */
export interface KeyRequest {
  keyId: string;
  /** Epoch milliseconds of the request's arrival. */
  at: number;
  method: string;
  /** Path and query as received. */
  target: string;
  status: number;
  requestId: string;
  /** The client address (Fastify's request.ip, or the TCP peer when that is no address: src/edge/answer.ts). */
  address: string;
  durationMs: number;
}

/** What an access line says about one answered request. */
export interface AccessRecord {
  requestId: string;
  method: string;
  /** The request target as received; keys in it are masked here. */
  url: string;
  /** The client's address (Fastify's request.ip: the forwarded one behind a trusted proxy; the TCP peer when that is no address). */
  remoteAddress: string | undefined;
  remotePort: number | undefined;
  status: number;
  /** Milliseconds from the request arriving to the answer being written; unknown (left out) for what the parser refused. */
  responseTime: number | undefined;
  caller: Caller | null;
}

const PID = `,"pid":${process.pid}`;

/** A caller's `keyId` and `schoolId` fields, made once per Caller (the access check keeps one per key found). */
const callerText = new WeakMap<Caller, string>();

function callerPart(caller: Caller): string {
  let text = callerText.get(caller);
  if (text === undefined) {
    text = `,"keyId":${JSON.stringify(caller.keyId)},"schoolId":${JSON.stringify(caller.schoolId)}`;
    callerText.set(caller, text);
  }
  return text;
}

/** The last client address written as JSON: a connection's requests come from one address. */
let lastAddress: string | undefined;
let lastAddressJson = '';

function addressPart(address: string | undefined): string {
  if (address === undefined) return '';
  if (address !== lastAddress) {
    lastAddress = address;
    lastAddressJson = `,"remoteAddress":${JSON.stringify(address)}`;
  }
  return lastAddressJson;
}

/**
 * A request's access line: the `request completed` line of docs/operations.md, as pino
 * would write it (level, time, pid, request id, key and school, the request with keys in
 * its URL masked, the status, the time). It is formatted here and written straight to the
 * logger's destination, by the API's one writer of answers (src/edge/answer.ts) and by the
 * cabinet (src/cabinet/app.ts): one line per request, where pino's child logger,
 * serializers and redaction (for a line that never holds a header) would cost more than
 * all the rest of a refused request's logging. The
 * fields are written one by one, and the parts that repeat from request to request (the
 * caller, the address) made once (docs/performance.md, "The access line").
 */
function accessLine(r: AccessRecord, listener: string): string {
  const caller = r.caller === null ? '' : callerPart(r.caller);
  const port = r.remotePort === undefined ? '' : `,"remotePort":${r.remotePort}`;
  const req = `{"method":${JSON.stringify(r.method)},"url":${JSON.stringify(redactKeys(r.url))}${addressPart(r.remoteAddress)}${port}}`;
  return `{"level":30,"time":${Date.now()}${PID}${listener},"requestId":${JSON.stringify(r.requestId)}${caller},"req":${req},"res":{"statusCode":${r.status}}${r.responseTime === undefined ? '' : `,"responseTime":${r.responseTime}`},"msg":"request completed"}\n`;
}

/** Refusals (by status) that get an access line of their own per second; past it they are counted. */
export const REFUSAL_LINES_PER_SECOND = 20;
/**
 * The statuses of refusals: what a flood of bad keys, a key used from outside its allowlist or
 * its scopes, or a client past its limit, is made of.
 */
const REFUSALS: ReadonlySet<number> = new Set([401, 402, 403, 405, 429]);
/**
 * Whether an answer is a refusal: one of REFUSALS, or any other 4xx given before a key was read
 * (a path outside the API, a CONNECT, a URL over the limit, a bad Host or target: what a
 * scanner's flood is made of). A 404 or 400 to a key (a record that is not there, a bad
 * parameter) passed the access check, and is always logged.
 */
const isRefusal = (record: AccessRecord) => REFUSALS.has(record.status) || (record.caller === null && record.status >= 400 && record.status < 500);

/**
 * Writes the access lines of a listener, the API's or the cabinet's. Every answered request gets one, except that
 * refusals (401, 402, 403, 405, 429, any other 4xx before a key was read, and the answers to what the HTTP parser refused) get at
 * most REFUSAL_LINES_PER_SECOND lines per status in a second: the rest are counted, and
 * once that second is over one line says how many went unlogged (`refusals not logged
 * one by one`, with `status` and `count`). A flood of unknown keys must not become a
 * flood of log lines (it would cost more than answering it, and fill the log's disk on
 * the attacker's terms); the metrics still count every one of them. Answers that passed the access check are always logged.
 */
export class AccessLog {
  private second = 0;
  private readonly logged = new Map<number, number>();
  private readonly unlogged = new Map<number, number>();
  private report: NodeJS.Timeout | null = null;

  private readonly writeLine: (line: string) => void;
  private readonly enabled: boolean;
  private readonly now: () => number;
  /** The lines' `listener` field, as JSON to insert ('' for the API's, whose lines have none). */
  private readonly listener: string;

  /**
   * `enabled`: the log level is info or finer (access lines are at info). `listener` names
   * another listener than the API's in each line, as its logger's lines do (the cabinet's).
   */
  constructor(
    writeLine: (line: string) => void,
    enabled: boolean,
    { now = Date.now, listener }: { now?: () => number; listener?: string } = {},
  ) {
    this.writeLine = writeLine;
    this.enabled = enabled;
    this.now = now;
    this.listener = listener === undefined ? '' : `,"listener":${JSON.stringify(listener)}`;
  }

  write(record: AccessRecord): void {
    if (!this.enabled || (isRefusal(record) && !this.withinBudget(record.status))) return;
    this.writeLine(accessLine(record, this.listener));
  }

  /**
   * The line of an answer written for a request Node's parser refused (src/edge/raw.ts):
   * no method or URL was read. These are refusals too, and share their budget.
   */
  refusedByParser(record: AccessRecord): void {
    if (this.enabled && this.withinBudget(record.status)) this.writeLine(accessLine(record, this.listener));
  }

  private withinBudget(status: number): boolean {
    const second = Math.floor(this.now() / 1000);
    if (second !== this.second) {
      this.second = second;
      this.logged.clear();
    }
    const n = (this.logged.get(status) ?? 0) + 1;
    this.logged.set(status, n);
    if (n <= REFUSAL_LINES_PER_SECOND) return true;
    this.unlogged.set(status, (this.unlogged.get(status) ?? 0) + 1);
    this.report ??= setTimeout(() => this.reportUnlogged(), 1000 - (this.now() % 1000)).unref();
    return false;
  }

  /** One line per status for the refusals of the second just over that had no line; also called on close. */
  reportUnlogged(): void {
    if (this.report !== null) clearTimeout(this.report);
    this.report = null;
    for (const [status, count] of this.unlogged) {
      this.writeLine(`{"level":30,"time":${this.now()}${PID}${this.listener},"status":${status},"count":${count},"msg":"refusals not logged one by one"}\n`);
    }
    this.unlogged.clear();
  }
}
