/**
 * The real director's cabinet for tests: HTTPS on a free loopback port over a real
 * store and the real rate limiter (memory, or Redis when REDIS_URL is set), and a
 * small browser-like client that keeps cookies and fills in forms the way a browser
 * does (Origin and Sec-Fetch-Site headers, hidden fields taken from the page).
 */
import { randomBytes, randomInt } from 'node:crypto';
import https from 'node:https';
import { Writable } from 'node:stream';
import assert from 'node:assert/strict';
import type { Kysely } from 'kysely';
import { MemoryRateLimiter } from '../../src/access/ratelimit/memory.js';
import type { RateLimiter } from '../../src/access/ratelimit/index.js';
import { buildCabinetApp, type CabinetApp } from '../../src/cabinet/app.js';
import { loadConfig, type Config, type ConfigOverrides } from '../../src/config/index.js';
import type { Database } from '../../src/db/schema.js';
import { createLogger } from '../../src/logger.js';
import { addDirector, type ScryptParams } from '../../src/management/directors.js';
import { createSchool } from '../../src/management/schools.js';
import { createLimiter } from '../../src/server.js';
import { loadTls } from '../../src/tls.js';
import { TEST_REDIS_TIMEOUT_MS } from './app.js';
import { createTestStore, type TestStore } from './store.js';

/** Cheap hashing for seeded directors; the stored parameters make verification follow. */
export const TEST_SCRYPT: ScryptParams = { N: 2 ** 10, r: 8, p: 1 };

export interface TestCabinet {
  app: CabinetApp;
  store: TestStore;
  config: Config;
  origin: string;
  ca: string;
  /** Every log line the cabinet wrote, for assertions about what is (not) logged. */
  logs: string[];
  /** A new browser: its own cookies and its own loopback source address (own throttle bucket). */
  browser(): CabinetBrowser;
  close(): Promise<void>;
}

export interface TestCabinetOptions {
  store?: TestStore;
  limiter?: RateLimiter;
  config?: ConfigOverrides;
}

export async function startTestCabinet(options: TestCabinetOptions = {}): Promise<TestCabinet> {
  const store = options.store ?? (await createTestStore());
  const config = loadConfig(
    { ...process.env, DATABASE_URL: store.url ?? '', SCHOOL_DATA_DIR: store.dataDir },
    { host: '127.0.0.1', port: 0, cabinetPort: 0, logLevel: 'info', redisTimeoutMs: TEST_REDIS_TIMEOUT_MS, ...options.config },
  );
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString('utf8'));
      cb();
    },
  });
  const tls = await loadTls(config);
  const limiter = options.limiter ?? (config.redisUrl ? createLimiter(config) : new MemoryRateLimiter());
  const app = await buildCabinetApp({ config, db: store.db, limiter, logger: createLogger(config, sink), tls });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const origin = `https://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const browsers: CabinetBrowser[] = [];
  return {
    app,
    store,
    config,
    origin,
    ca: tls.cert,
    logs,
    browser() {
      const b = new CabinetBrowser(origin, tls.cert);
      browsers.push(b);
      return b;
    },
    async close() {
      for (const b of browsers) b.close();
      await app.close();
      if (!options.limiter) await limiter.close();
      if (!options.store) await store.close();
    },
  };
}

export interface Page {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  location: string | undefined;
}

export interface PostOptions {
  /** The Origin header; the cabinet's own origin unless given (null: no header). */
  origin?: string | null;
  headers?: Record<string, string>;
  contentType?: string;
  /** A raw body instead of the encoded fields. */
  body?: string | Buffer;
}

/** A loopback address of its own, so each browser has its own per-address sign-in bucket. */
function loopbackAddress(): string {
  return `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
}

export class CabinetBrowser {
  readonly cookies = new Map<string, string>();
  readonly address = loopbackAddress();
  private readonly agent: https.Agent;

  readonly origin: string;

  constructor(
    origin: string,
    ca: string,
  ) {
    this.origin = origin;
    this.agent = new https.Agent({ keepAlive: true, ca, localAddress: this.address });
  }

  private request(method: string, path: string, headers: Record<string, string>, body?: string | Buffer): Promise<Page> {
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const all: Record<string, string> = { ...(cookie ? { cookie } : {}), ...headers };
    return new Promise((resolve, reject) => {
      const req = https.request(`${this.origin}${path}`, { method, headers: all, agent: this.agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          for (const line of res.headers['set-cookie'] ?? []) this.storeCookie(line);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8'), location: res.headers.location });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  private storeCookie(line: string): void {
    const [pair = '', ...attributes] = line.split(';');
    const at = pair.indexOf('=');
    const name = pair.slice(0, at).trim();
    const value = pair.slice(at + 1).trim();
    const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a));
    if (expired || value === '') this.cookies.delete(name);
    else this.cookies.set(name, value);
  }

  get(path: string, headers: Record<string, string> = {}): Promise<Page> {
    return this.request('GET', path, { 'sec-fetch-site': 'same-origin', ...headers });
  }

  post(path: string, fields: Record<string, string>, options: PostOptions = {}): Promise<Page> {
    const origin = options.origin === undefined ? this.origin : options.origin;
    const headers: Record<string, string> = {
      'content-type': options.contentType ?? 'application/x-www-form-urlencoded',
      'sec-fetch-site': 'same-origin',
      ...(origin === null ? {} : { origin }),
      ...options.headers,
    };
    return this.request('POST', path, headers, options.body ?? new URLSearchParams(fields).toString());
  }

  /** Opens `pagePath`, fills in the form posting to `action` (hidden fields kept) and submits it. */
  async submit(pagePath: string, action: string, fields: Record<string, string> = {}, options: PostOptions = {}): Promise<Page> {
    const page = await this.get(pagePath);
    assert.equal(page.status, 200, `${pagePath}: ${page.status}`);
    return this.post(action, { ...formFields(page.text, action), ...fields }, options);
  }

  async login(email: string, password: string): Promise<Page> {
    return this.submit('/login', '/login', { email, password });
  }

  close(): void {
    this.agent.destroy();
  }
}

const ENTITIES: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': "'" };
export const unescapeHtml = (text: string) => text.replace(/&(amp|lt|gt|quot|#39);/g, (e) => ENTITIES[e] ?? e);

/** The named inputs (with their values) of the form whose action is `action`. */
export function formFields(html: string, action: string): Record<string, string> {
  const form = new RegExp(`<form[^>]*action="${action.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"[^>]*>([\\s\\S]*?)</form>`).exec(html);
  assert.ok(form, `no form posting to ${action}`);
  const fields: Record<string, string> = {};
  for (const input of form[1]!.matchAll(/<input\b[^>]*>/g)) {
    const name = /\bname="([^"]*)"/.exec(input[0])?.[1];
    const value = /\bvalue="([^"]*)"/.exec(input[0])?.[1];
    if (name !== undefined) fields[name] = unescapeHtml(value ?? '');
  }
  return fields;
}

export interface KeyRow {
  id: string;
  cells: string[];
  requests: number;
  status: 'Active' | 'Revoked';
}

/** The rows of the keys table, in page order. */
export function keyRows(html: string): KeyRow[] {
  return [...html.matchAll(/<tr class="(?:active|revoked)" data-key-id="([^"]+)">([\s\S]*?)<\/tr>/g)].map((m) => {
    const cells = [...m[2]!.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((c) => unescapeHtml(c[1]!.replace(/<[^>]+>/g, '').replace(/\s+/g, ' ').trim()));
    return { id: m[1]!, cells, requests: Number((cells[4] ?? '').replace(/,/g, '')), status: (cells[5] ?? '').startsWith('Revoked') ? 'Revoked' : 'Active' };
  });
}

export interface SeededDirector {
  schoolId: string;
  directorId: string;
  email: string;
  password: string;
}

/** A fresh school on `plan` with one director (fresh ids, so shared Redis counters never collide). */
export async function seedDirector(db: Kysely<Database>, plan = 'VIP', schoolName = `Школа ${plan}`): Promise<SeededDirector> {
  const tag = randomBytes(5).toString('hex');
  const school = await createSchool(db, { id: `cab_${tag}`, name: schoolName, plan });
  assert.ok(school.ok, school.ok ? '' : school.reason);
  const email = `director.${tag}@Example.COM`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  const director = await addDirector(db, { schoolId: school.value.id, email, password }, TEST_SCRYPT);
  assert.ok(director.ok, director.ok ? '' : director.reason);
  return { schoolId: school.value.id, directorId: director.value.id, email, password };
}
