/**
 * The client: one typed method per endpoint of the school-data public API. Types
 * come from types.ts, generated from the service's OpenAPI document.
 */
import https from 'node:https';
import tls from 'node:tls';
import { ListRequest, type Page, type PageQuery } from './pagination.js';
import { Throttle, type ThrottleOptions } from './throttle.js';
import { ChangeFeed, type ChangesQuery } from './feed.js';
import { AnswerCache, Transport, type AttemptEvent, type RetryEvent } from './transport.js';
import { operations, type OperationId, type Operations } from './types.js';

export interface ClientOptions {
  /** The service's base address, e.g. `https://api.example.ru` or `https://127.0.0.1:8443`. HTTPS only. */
  baseUrl: string;
  /** The school's key, `service_pk_` + 32 hex characters. */
  apiKey: string;
  /**
   * PEM certificate(s) to trust for a service with its own certificate authority, besides the
   * ones Node.js trusts already: its public authorities, NODE_EXTRA_CA_CERTS and, with
   * `--use-system-ca`, the system's store (on Node.js 22.15+; an older 22.x keeps its public
   * authorities only). Each must hold a PEM certificate: anything else is a TypeError.
   */
  ca?: string | Buffer | (string | Buffer)[];
  /** Set false only to test against a certificate you cannot trust otherwise. Default true. */
  rejectUnauthorized?: boolean;
  /** Your own https.Agent (proxy, sockets, TLS settings); `ca` and `rejectUnauthorized` are then ignored. */
  agent?: https.Agent;
  /** Milliseconds one attempt may take, from connecting to the last byte. Default 30000. */
  timeout?: number;
  /**
   * The most bytes one answer's body may hold once decompressed; a larger one ends the call with an
   * `unexpected_response` error, unread and not retried (a hostile or broken server cannot fill the
   * memory). Default 64 MiB, far above the service's largest page.
   */
  maxResponseBytes?: number;
  /** Retries after 429, 503 or a connection failure. Default 3; 0 turns retries off. */
  maxRetries?: number;
  /** First backoff step in ms, doubled each retry (when the service gives no Retry-After). Default 500. */
  retryBaseDelay?: number;
  /** Longest backoff step in ms. Default 30000. */
  retryMaxDelay?: number;
  /** Space requests by the RateLimit header so that long exports keep under the limit. Default false. */
  throttle?: boolean | ThrottleOptions;
  /**
   * Conditional requests: keep each URL's last answer with its ETag and send If-None-Match,
   * so an unchanged answer comes back as a body-less 304 and is served from the kept copy.
   * `true` keeps up to 1000 answers in memory. Each request still counts against the limit.
   * Default false.
   */
  conditional?: boolean | { maxEntries?: number };
  /** Called after every attempt, for logs and metrics. */
  onResponse?: (event: AttemptEvent) => void;
  /** Called before the client waits to retry. */
  onRetry?: (event: RetryEvent) => void;
}

const KEY_FORMAT = /^service_pk_[0-9a-f]{32}$/;
// The operations' paths already carry the version prefix; a base URL given with it is taken as meant.
const API_PREFIX = /\/api\/public\/v1\/?$/;

function origin(baseUrl: string): string {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(`baseUrl is not a URL: ${JSON.stringify(baseUrl)}`);
  }
  if (url.protocol !== 'https:') throw new TypeError(`baseUrl must be https:// (the service answers HTTPS only): ${JSON.stringify(baseUrl)}`);
  return `${url.origin}${url.pathname.replace(API_PREFIX, '').replace(/\/$/, '')}`;
}

const PEM_CERTIFICATE = /-----BEGIN (?:X509 |TRUSTED )?CERTIFICATE-----/;

/**
 * The authorities the client's agent trusts: Node's `ca` option replaces its defaults, so
 * they are kept beside the ones given. `tls.getCACertificates('default')` holds the extra
 * and system certificates too; `tls.rootCertificates` (before Node.js 22.15) only the bundled.
 */
function trusted(ca: NonNullable<ClientOptions['ca']>): (string | Buffer)[] {
  const given = [ca].flat();
  given.forEach((pem, i) => {
    // Node takes text without a certificate in silence, and the handshake then fails as "self-signed".
    const text = typeof pem === 'string' ? pem : Buffer.isBuffer(pem) ? pem.toString('latin1') : '';
    if (!PEM_CERTIFICATE.test(text)) {
      throw new TypeError(`ca holds no PEM certificate${given.length > 1 ? ` (entry ${i})` : ''}: give the certificate's PEM text (-----BEGIN CERTIFICATE-----), not a key or another file`);
    }
  });
  const defaults = typeof tls.getCACertificates === 'function' ? tls.getCACertificates('default') : tls.rootCertificates;
  return [...defaults, ...given];
}

function positive(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < min) throw new TypeError(`${name} must be a number of at least ${min}`);
  return value;
}

type ListOperation = { [K in OperationId]: Operations[K]['response'] extends Page<unknown> ? K : never }[OperationId];
type ItemOf<K extends ListOperation> = Operations[K]['response']['items'][number];
type QueryOf<K extends OperationId> = Operations[K]['query'];

/**
 * @example
 * import fs from 'node:fs';
 * import { SchoolDataClient } from '@school-data/client';
 *
 * const client = new SchoolDataClient({
 *   baseUrl: 'https://127.0.0.1:8443',
 *   apiKey: process.env.SCHOOL_DATA_KEY!,
 *   ca: fs.readFileSync('data/tls/cert.pem'),
 *   throttle: true,
 * });
 * for await (const student of client.students.list({ status: 'learning_practice' })) console.log(student.full_name);
 * client.close();
 */
export class SchoolDataClient {
  // #private, not TypeScript's `private`: the transport holds the key, and neither
  // util.inspect nor JSON.stringify may reach it (a client logged by mistake).
  readonly #transport: Transport;
  readonly #ownAgent: https.Agent | null;

  constructor(options: ClientOptions) {
    if (!KEY_FORMAT.test(options.apiKey)) throw new TypeError('apiKey must be a school-data key: service_pk_ followed by 32 lowercase hex characters');
    const ca = options.ca == null ? undefined : trusted(options.ca);
    this.#ownAgent = options.agent ? null : new https.Agent({ keepAlive: true, ca, rejectUnauthorized: options.rejectUnauthorized ?? true });
    const throttle = options.throttle ? new Throttle(options.throttle === true ? {} : options.throttle) : null;
    this.#transport = new Transport({
      origin: origin(options.baseUrl),
      apiKey: options.apiKey,
      agent: options.agent ?? this.#ownAgent!,
      timeoutMs: positive('timeout', options.timeout, 30_000, 1),
      maxResponseBytes: positive('maxResponseBytes', options.maxResponseBytes, 64 * 2 ** 20, 1),
      maxRetries: Math.floor(positive('maxRetries', options.maxRetries, 3, 0)),
      retryBaseDelayMs: positive('retryBaseDelay', options.retryBaseDelay, 500, 0),
      retryMaxDelayMs: positive('retryMaxDelay', options.retryMaxDelay, 30_000, 0),
      throttle,
      conditional: options.conditional ? new AnswerCache(Math.floor(positive('conditional.maxEntries', options.conditional === true ? undefined : options.conditional.maxEntries, 1000, 1))) : null,
      onResponse: options.onResponse,
      onRetry: options.onRetry,
    });
  }

  private list<K extends ListOperation>(id: K, query: QueryOf<K> & PageQuery): ListRequest<ItemOf<K>, QueryOf<K> & PageQuery> {
    const path = operations[id].path;
    return new ListRequest((q) => this.#transport.get<Page<ItemOf<K>>>(path, q), query);
  }

  readonly students = {
    /**
     * Students, ordered by created_at then id; filters narrow the list.
     *
     * @example
     * const page = await client.students.list({ category: 'B', limit: 20 });  // one page
     * for await (const s of client.students.list({ status: 'learning_practice' })) console.log(s.id); // all of them
     */
    list: (query: QueryOf<'listStudents'> = {}) => this.list('listStudents', query),

    /**
     * One student's card: contracts, lesson counts and balance. Throws NotFoundError for an unknown id.
     *
     * @example
     * const card = await client.students.get('s-1024');
     * console.log(card.balance.debt, card.balance.currency);
     */
    get: (id: string): Promise<Operations['getStudent']['response']> =>
      this.#transport.get(operations.getStudent.path.replace('{id}', encodeURIComponent(id))),
  };

  readonly instructors = {
    /**
     * Instructors, ordered by created_at then id.
     *
     * @example
     * const active = await client.instructors.list({ is_active: true }).toArray({ max: 500 });
     */
    list: (query: QueryOf<'listInstructors'> = {}) => this.list('listInstructors', query),
  };

  readonly vehicles = {
    /**
     * Training vehicles with their insurance and technical inspection dates.
     *
     * @example
     * for await (const v of client.vehicles.list()) console.log(v.plate_number, v.insurance_valid_until);
     */
    list: (query: QueryOf<'listVehicles'> = {}) => this.list('listVehicles', query),
  };

  readonly lessons = {
    /**
     * Lessons whose starts_at lies in the period (dates are whole days in the school's time zone; bounds inclusive).
     *
     * @example
     * for await (const l of client.lessons.list({ period_from: '2026-03-01', period_to: '2026-03-31' })) console.log(l.starts_at);
     */
    list: (query: QueryOf<'listLessons'> = {}) => this.list('listLessons', query),
  };

  readonly contracts = {
    /**
     * Contracts with what is paid and owed on each.
     *
     * @example
     * const { items } = await client.contracts.list({ student_id: 's-1024' });
     */
    list: (query: QueryOf<'listContracts'> = {}) => this.list('listContracts', query),
  };

  readonly payments = {
    /**
     * Payments and refunds (kind "refund", positive amount) whose paid_at lies in the period.
     *
     * @example
     * for await (const p of client.payments.list({ period_from: '2026-03-01', period_to: '2026-03-31' })) console.log(p.amount, p.currency);
     */
    list: (query: QueryOf<'listPayments'> = {}) => this.list('listPayments', query),
  };

  readonly leads = {
    /**
     * Applications for training, optionally of one status and period.
     *
     * @example
     * const fresh = await client.leads.list({ status: 'new' }).toArray({ max: 100 });
     */
    list: (query: QueryOf<'listLeads'> = {}) => this.list('listLeads', query),
  };

  readonly reports = {
    /**
     * Income, expense and profit for a period; both bounds required and inclusive.
     *
     * @example
     * const march = await client.reports.financeSummary({ period_from: '2026-03-01', period_to: '2026-03-31' });
     * console.log(march.income, march.expense, march.profit, march.currency);
     */
    financeSummary: (query: QueryOf<'getFinanceSummary'>): Promise<Operations['getFinanceSummary']['response']> =>
      this.#transport.get(operations.getFinanceSummary.path, query),
  };

  readonly changes = {
    /**
     * What changed in the school's data since a saved cursor (from the beginning, a full copy):
     * each record once, as its list serves it now, or a deletion (`change: 'delete'`,
     * `record: null`). Save `feed.cursor` when the changes are applied; a cursor older than
     * the deletions the service keeps throws CursorExpiredError: start again without `after`.
     *
     * @example
     * const feed = client.changes.list({ after: await loadCursor() });
     * for await (const change of feed) {
     *   if (change.change === 'delete') remove(change.resource, change.id);
     *   else upsert(change.resource, change.record);
     * }
     * await saveCursor(feed.cursor);
     */
    list: (query: ChangesQuery = {}) => new ChangeFeed((q) => this.#transport.get<Operations['listChanges']['response']>(operations.listChanges.path, q), query),
  };

  /**
   * Closes the client's idle connections. Not needed for a process to exit; useful in long-running programs that drop a client.
   *
   * @example
   * client.close();
   */
  close(): void {
    this.#ownAgent?.destroy();
  }
}
