/**
 * One GET to the service, with the retries that are safe for it: every operation of
 * the API is a read, so a request that got no answer, a 429 and a 503 are retried
 * after the wait the service asks for (Retry-After) or a capped exponential backoff
 * with jitter. Answers that say the request itself is wrong (400, 401, 402, 404) are
 * never retried. Node's own https module only: no runtime dependencies.
 */
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { errorFor, SchoolDataConnectionError, SchoolDataError, type ErrorCode, type InvalidParam } from './errors.js';
import type { Throttle } from './throttle.js';

export const CLIENT_VERSION = '0.1.0';

/** What happened to one attempt, for logging and metrics (see `onResponse`, `onRetry`). */
export interface AttemptEvent {
  method: 'GET';
  url: string;
  /** 0 for the first attempt, 1 for the first retry, ... */
  attempt: number;
  /** HTTP status, or null when no answer came. */
  status: number | null;
  requestId: string | null;
  durationMs: number;
}

export interface RetryEvent extends AttemptEvent {
  /** Milliseconds the client waits before the next attempt. */
  delayMs: number;
  /** `http_429`, `http_503` or the connection error code (`ECONNRESET`, `timeout`, ...). */
  reason: string;
}

export interface TransportOptions {
  origin: string;
  /** Kept only as the Authorization header's value, in a #private field (see Transport). */
  apiKey: string;
  agent: https.Agent;
  timeoutMs: number;
  /** The most bytes an answer's body may hold once decoded; a larger one is refused unread. */
  maxResponseBytes: number;
  maxRetries: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
  throttle: Throttle | null;
  /** Answers kept with their ETag for conditional requests, or null when the mode is off. */
  conditional: AnswerCache | null;
  onResponse?: (event: AttemptEvent) => void;
  onRetry?: (event: RetryEvent) => void;
}

/** Connection failures after which the same GET may simply be sent again. */
const RETRYABLE_CONNECTION_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'EAI_AGAIN',
  'timeout',
]);

interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** No answer (a connection failure), or one refused unread (a body over maxResponseBytes). */
type Outcome = { answer: RawAnswer } | { failure: SchoolDataConnectionError | SchoolDataError };

function decoded(res: Readable, encoding: string | undefined): Readable {
  if (encoding === 'br') return res.pipe(zlib.createBrotliDecompress());
  if (encoding === 'gzip') return res.pipe(zlib.createGunzip());
  if (encoding === 'deflate') return res.pipe(zlib.createInflate());
  return res;
}

function connectionError(err: unknown, url: string): SchoolDataConnectionError {
  if (err instanceof SchoolDataConnectionError) return err;
  const code = (err as { code?: string }).code ?? 'ERR_CONNECTION';
  const message = err instanceof Error ? err.message : String(err);
  const hint = /CERT|SELF_SIGNED|TLS|SSL/i.test(code) ? ' (is the service\'s certificate trusted? see the `ca` option)' : '';
  return new SchoolDataConnectionError(code, `GET ${url} failed: ${message}${hint}`, { cause: err });
}

const header = (headers: IncomingHttpHeaders, name: string) => {
  const value = headers[name];
  return typeof value === 'string' ? value : null;
};

/**
 * The longest wait taken from a Retry-After before retrying; past it the answer is the
 * caller's error (with its retryAfter): a wait of hours is no retry, and Node's timers run a
 * wait past 24.8 days at once.
 */
const MAX_RETRY_AFTER_SECONDS = 600;

/** Retry-After in seconds: whole seconds, or an HTTP-date (RFC 9110) counted from now. */
function retryAfterSeconds(headers: IncomingHttpHeaders): number | null {
  const value = header(headers, 'retry-after');
  if (value === null) return null;
  if (/^\d+$/.test(value)) return Number(value);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** At most this much of an answer that is not the service's goes into the error's detail. */
const EXCERPT_CHARS = 200;

/**
 * The error for an answer other than 200: from its problem body when it has one. Any other
 * answer (a proxy's page, another server's on a wrong port) is not the service's word, so it is
 * the base SchoolDataError whatever its status: a 404 page is no NotFoundError. Its body, on one
 * line, makes the detail.
 */
function errorFromAnswer(answer: RawAnswer): SchoolDataError {
  const requestId = header(answer.headers, 'x-request-id');
  const retryAfter = retryAfterSeconds(answer.headers);
  if ((header(answer.headers, 'content-type') ?? '').startsWith('application/problem+json')) {
    try {
      const problem = JSON.parse(answer.body) as { code?: ErrorCode; detail?: string; request_id?: string; invalid_params?: InvalidParam[] };
      if (typeof problem.code === 'string') {
        return errorFor({
          status: answer.status,
          code: problem.code,
          detail: problem.detail ?? '',
          requestId: problem.request_id ?? requestId,
          invalidParams: problem.invalid_params ?? [],
          retryAfter,
        });
      }
    } catch {
      // Not the problem body it claims to be: reported below as an unexpected answer.
    }
  }
  const type = header(answer.headers, 'content-type') ?? 'no content type';
  // Line breaks and control characters collapsed: the message is one line of a log.
  const excerpt = answer.body.replace(/[\s\p{Cc}]+/gu, ' ').trim().slice(0, EXCERPT_CHARS);
  const detail = `not the service's answer (HTTP ${answer.status}, ${type}): ${excerpt || 'an empty body'}`;
  return new SchoolDataError({ status: answer.status, code: 'unexpected_response', detail, requestId, retryAfter });
}

/**
 * The answers of conditional-request mode: the last body and ETag per URL, at most
 * `maxEntries` of them (the one used longest ago leaves first).
 */
export class AnswerCache {
  private readonly entries = new Map<string, { etag: string; body: string }>();

  private readonly maxEntries: number;

  constructor(maxEntries: number) {
    this.maxEntries = maxEntries;
  }

  get(url: string): { etag: string; body: string } | undefined {
    const entry = this.entries.get(url);
    if (entry !== undefined) {
      // Map keeps insertion order: moved to the end, it is the one used last.
      this.entries.delete(url);
      this.entries.set(url, entry);
    }
    return entry;
  }

  set(url: string, etag: string, body: string): void {
    this.entries.delete(url);
    this.entries.set(url, { etag, body });
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }
}

export class Transport {
  private readonly options: Omit<TransportOptions, 'apiKey'>;
  // #private: util.inspect and JSON.stringify of a client never show the key.
  readonly #authorization: string;

  constructor({ apiKey, ...options }: TransportOptions) {
    this.options = options;
    this.#authorization = `Bearer ${apiKey}`;
  }

  /** Sends GET `path` with `query`, retrying what is safe; resolves with the parsed JSON of a 200. */
  async get<T>(path: string, query: object = {}): Promise<T> {
    const url = this.url(path, query);
    const { maxRetries, throttle } = this.options;
    for (let attempt = 0; ; attempt++) {
      await throttle?.acquire();
      const started = Date.now();
      const kept = this.options.conditional?.get(url);
      const outcome = await this.send(url, kept?.etag);
      const status = 'answer' in outcome ? outcome.answer.status : null;
      const event: AttemptEvent = {
        method: 'GET',
        url,
        attempt,
        status,
        requestId: 'answer' in outcome ? header(outcome.answer.headers, 'x-request-id') : null,
        durationMs: Date.now() - started,
      };
      this.options.onResponse?.(event);
      if ('answer' in outcome) {
        throttle?.observe(outcome.answer.headers);
        if (outcome.answer.status === 200) return this.parse<T>(this.keep(url, outcome.answer), url);
        // Unchanged since the answer kept for this URL: that answer is the answer.
        if (outcome.answer.status === 304 && kept !== undefined) return this.parse<T>({ ...outcome.answer, status: 200, body: kept.body }, url);
      }
      const error = 'answer' in outcome ? errorFromAnswer(outcome.answer) : outcome.failure;
      const retry = this.retryPlan(outcome, attempt);
      if (retry === null || attempt >= maxRetries) throw error;
      this.options.onRetry?.({ ...event, delayMs: retry.delayMs, reason: retry.reason });
      await sleep(retry.delayMs);
    }
  }

  private url(path: string, query: object): string {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query) as [string, unknown][]) {
      if (value === undefined) continue;
      if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
        throw new TypeError(`query parameter ${name} must be a string, a number or a boolean`);
      }
      search.set(name, String(value));
    }
    const qs = search.toString();
    return `${this.options.origin}${path}${qs ? `?${qs}` : ''}`;
  }

  /** Keeps a 200's body and ETag in conditional-request mode. */
  private keep(url: string, answer: RawAnswer): RawAnswer {
    const etag = header(answer.headers, 'etag');
    if (etag !== null) this.options.conditional?.set(url, etag, answer.body);
    return answer;
  }

  /** How long to wait before retrying this outcome, or null when it must not be retried. */
  private retryPlan(outcome: Outcome, attempt: number): { delayMs: number; reason: string } | null {
    if ('failure' in outcome) {
      const { failure } = outcome;
      return failure instanceof SchoolDataConnectionError && RETRYABLE_CONNECTION_CODES.has(failure.code) ? { delayMs: this.backoff(attempt), reason: failure.code } : null;
    }
    const { status, headers } = outcome.answer;
    if (status !== 429 && status !== 503) return null;
    const seconds = retryAfterSeconds(headers);
    if (seconds !== null && seconds > MAX_RETRY_AFTER_SECONDS) return null;
    // The service's own wait comes first; a little jitter keeps many clients from returning at once.
    const delayMs = seconds === null ? this.backoff(attempt) : seconds * 1000 + Math.floor(Math.random() * 500);
    return { delayMs, reason: `http_${status}` };
  }

  /** Capped exponential backoff with "equal jitter": half fixed, half random. */
  private backoff(attempt: number): number {
    const ceiling = Math.min(this.options.retryMaxDelayMs, this.options.retryBaseDelayMs * 2 ** attempt);
    return Math.floor(ceiling / 2 + Math.random() * (ceiling / 2));
  }

  private parse<T>(answer: RawAnswer, url: string): T {
    try {
      return JSON.parse(answer.body) as T;
    } catch {
      throw new SchoolDataError({
        status: answer.status,
        code: 'unexpected_response',
        detail: `GET ${url} answered 200 with a body that is not JSON`,
        requestId: header(answer.headers, 'x-request-id'),
      });
    }
  }

  /** One attempt; never throws: no answer is a failure outcome. */
  private send(url: string, ifNoneMatch: string | undefined): Promise<Outcome> {
    const { agent, timeoutMs, maxResponseBytes } = this.options;
    return new Promise((resolve) => {
      let settled = false;
      const settle = (outcome: Outcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      const fail = (err: unknown) => settle({ failure: connectionError(err, url) });
      const req = https.request(
        url,
        {
          method: 'GET',
          agent,
          headers: {
            authorization: this.#authorization,
            accept: 'application/json, application/problem+json',
            'accept-encoding': 'br, gzip',
            'user-agent': `school-data-client/${CLIENT_VERSION} node/${process.version}`,
            ...(ifNoneMatch === undefined ? {} : { 'if-none-match': ifNoneMatch }),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          const body = decoded(res, res.headers['content-encoding']);
          body.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size <= maxResponseBytes) return void chunks.push(chunk);
            // A compressed body can inflate to any size: the rest is not read.
            settle({
              failure: new SchoolDataError({
                status: res.statusCode ?? 0,
                code: 'unexpected_response',
                detail: `GET ${url} answered with a body over ${maxResponseBytes} bytes (the client's maxResponseBytes)`,
                requestId: header(res.headers, 'x-request-id'),
              }),
            });
            body.destroy();
            req.destroy();
          });
          body.on('error', fail);
          body.on('end', () => settle({ answer: { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') } }));
          res.on('error', fail);
        },
      );
      // One deadline for the whole attempt: connecting, TLS, waiting and reading.
      const timer = setTimeout(() => {
        const timeout = new SchoolDataConnectionError('timeout', `GET ${url} got no complete answer within ${timeoutMs} ms`);
        fail(timeout);
        req.destroy(timeout);
      }, timeoutMs);
      req.on('error', fail);
      req.end();
    });
  }
}
