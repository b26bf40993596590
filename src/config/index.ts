/**
 * Configuration: one table of settings, read once at start, never at import time.
 *
 * Each setting names its environment variable, its rule and its default. The
 * `Config` type is derived from the same table, so a setting cannot exist in the
 * type without a variable, a default and a validation rule.
 */
import fs from 'node:fs';
import { isIPv6 } from 'node:net';
import path from 'node:path';
import { parseAllowlist } from '../domain/addresses.js';

/** How a variable's text is read: its value, or undefined when the text breaks the rule the message states. */
interface Rule<T> {
  readonly read: (raw: string) => T | undefined;
  /** What the value must be, after "must be". */
  readonly says: string;
}

const integer = (minimum: number, maximum: number): Rule<number> => ({
  read: (raw) => {
    if (!/^[0-9]{1,12}$/.test(raw)) return undefined;
    const n = Number(raw);
    return n >= minimum && n <= maximum ? n : undefined;
  },
  says: `an integer from ${minimum} to ${maximum}`,
});
const oneOf = <const T extends readonly string[]>(values: T): Rule<T[number]> => ({
  read: (raw) => values.find((v) => v === raw),
  says: `one of ${values.join(', ')}`,
});
const anyText: Rule<string> = { read: (raw) => raw, says: 'a string' };
const text: Rule<string> = { read: (raw) => (raw.length > 0 ? raw : undefined), says: 'a non-empty string' };
/** The scheme only; whether the rest is a URL is checked apart, without echoing it (a password). */
const urlOf = (scheme: RegExp, says: string): Rule<string> => ({ read: (raw) => (scheme.test(raw) ? raw : undefined), says });

const Port = integer(0, 65535);
const Millis = (max: number) => integer(1, max);

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

interface Setting<T, D extends T | null> {
  readonly env: string;
  readonly rule: Rule<T>;
  readonly default: D;
  readonly help: string;
}

function setting<T, D extends T | null>(env: string, rule: Rule<T>, def: D, help: string): Setting<T, D> {
  return { env, rule, default: def, help };
}

/** The single source of every setting: its variable, its rule, its default. */
export const settings = {
  databaseUrl: setting(
    'DATABASE_URL',
    urlOf(/^postgres(ql)?:\/\//, 'a postgres:// URL'),
    null,
    'postgres://... selects PostgreSQL; unset: SQLite file school-data.db in the data directory',
  ),
  redisUrl: setting(
    'REDIS_URL',
    urlOf(/^rediss?:\/\//, 'a redis:// URL'),
    null,
    'redis://... selects the Redis rate limiter; unset: in-process memory',
  ),
  dataDir: setting('SCHOOL_DATA_DIR', text, './data', 'data directory'),
  host: setting('HOST', text, '127.0.0.1', 'API listener address'),
  port: setting('PORT', Port, 8443, 'API listener port'),
  cabinetPort: setting('SCHOOL_DATA_CABINET_PORT', Port, 8444, 'cabinet listener port'),
  cabinetSessionIdleMinutes: setting('SCHOOL_DATA_CABINET_SESSION_IDLE_MINUTES', integer(1, 1440), 30, 'cabinet sign-in ends after this many minutes without a request'),
  cabinetSessionMaxHours: setting('SCHOOL_DATA_CABINET_SESSION_MAX_HOURS', integer(1, 168), 12, 'cabinet sign-in ends this many hours after it began, active or not'),
  tlsCert: setting('SCHOOL_DATA_TLS_CERT', text, null, 'PEM certificate file'),
  tlsKey: setting('SCHOOL_DATA_TLS_KEY', text, null, 'PEM private key file'),
  rateLimitProfi: setting('SCHOOL_DATA_RATE_LIMIT_PROFI', integer(1, 10_000_000), 60, 'requests per minute, plan Profi'),
  rateLimitVip: setting('SCHOOL_DATA_RATE_LIMIT_VIP', integer(1, 10_000_000), 600, 'requests per minute, plan VIP'),
  logLevel: setting('SCHOOL_DATA_LOG_LEVEL', oneOf(LOG_LEVELS), 'info', 'log level'),
  dbTimeoutMs: setting('SCHOOL_DATA_DB_TIMEOUT_MS', Millis(60_000), 3000, 'data store connect and query timeout'),
  redisTimeoutMs: setting('SCHOOL_DATA_REDIS_TIMEOUT_MS', Millis(10_000), 250, 'rate-limit service timeout'),
  usageFlushMs: setting('SCHOOL_DATA_USAGE_FLUSH_MS', Millis(5000), 1000, 'how often key usage counts are written'),
  responseCacheMb: setting('SCHOOL_DATA_RESPONSE_CACHE_MB', integer(0, 65_536), 32, 'memory (MiB) for stored API responses, per process; 0 stores none'),
  tombstoneDays: setting('SCHOOL_DATA_TOMBSTONE_DAYS', integer(1, 36_500), 90, 'deleted records are remembered for the changes feed at least this many days'),
  keyUnusedDays: setting('SCHOOL_DATA_KEY_UNUSED_DAYS', integer(0, 36_500), 90, 'a key not used for this many days (from its last use, or its creation) is revoked; 0 turns it off'),
  trustedProxies: setting(
    'SCHOOL_DATA_TRUSTED_PROXIES',
    anyText,
    '',
    'comma-separated addresses and CIDR ranges of reverse proxies whose X-Forwarded-For names the client; empty: the TCP peer is the client',
  ),
  dbPoolSize: setting('SCHOOL_DATA_DB_POOL_SIZE', integer(1, 1000), 10, 'PostgreSQL connections per process'),
  // Server limits (docs/operations.md explains each). Timeouts bound what one slow or
  // idle client can hold; sizes bound what one request can make the server read.
  tlsHandshakeTimeoutMs: setting('SCHOOL_DATA_TLS_HANDSHAKE_TIMEOUT_MS', Millis(120_000), 10_000, 'a connection that has not finished its TLS handshake by then is closed'),
  headersTimeoutMs: setting('SCHOOL_DATA_HEADERS_TIMEOUT_MS', Millis(120_000), 10_000, 'a request whose headers have not all arrived by then is cut off (408)'),
  requestTimeoutMs: setting('SCHOOL_DATA_REQUEST_TIMEOUT_MS', Millis(300_000), 15_000, 'a request that has not been received whole by then is cut off (408)'),
  keepAliveTimeoutMs: setting('SCHOOL_DATA_KEEP_ALIVE_TIMEOUT_MS', Millis(120_000), 5_000, 'an idle kept-alive connection is closed after this long'),
  idleTimeoutMs: setting('SCHOOL_DATA_IDLE_TIMEOUT_MS', Millis(600_000), 30_000, 'a connection on which nothing moves for this long is closed'),
  maxHeaderBytes: setting('SCHOOL_DATA_MAX_HEADER_BYTES', integer(4096, 65_536), 16_384, 'request line plus headers, at most (431 beyond)'),
  maxUrlBytes: setting('SCHOOL_DATA_MAX_URL_BYTES', integer(256, 65_536), 4096, 'request target (path and query), at most (414 beyond)'),
  maxConnections: setting('SCHOOL_DATA_MAX_CONNECTIONS', integer(1, 1_000_000), 10_000, 'open connections per process; more are closed at once'),
} as const;

type Settings = typeof settings;
/** A setting's value: what its rule reads, or its default (null for some). */
type ValueOf<S> = S extends Setting<infer T, infer D> ? T | D : never;
export type Config = { readonly [K in keyof Settings]: ValueOf<Settings[K]> };
export type ConfigOverrides = { [K in keyof Settings]?: string | number | null | undefined };

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Creates a configured directory and its missing parents, one at a time; a ConfigError
 * names it when it cannot be made. (Node's recursive mkdir never returns where mkdir keeps
 * answering ENOENT, as under /proc.)
 */
export function ensureDirectory(dir: string, setting: string): void {
  const missing: string[] = [];
  for (let d = path.resolve(dir); !fs.existsSync(d); d = path.dirname(d)) {
    missing.unshift(d);
    if (path.dirname(d) === d) break;
  }
  for (const d of missing) {
    try {
      fs.mkdirSync(d);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Made meanwhile by another process: nothing to do. A link to nothing is there, yet no directory.
      if (code === 'EEXIST' && fs.existsSync(d)) continue;
      if (code === 'EEXIST' && fs.lstatSync(d).isSymbolicLink()) throw new ConfigError(`${setting}: ${d} is a symbolic link to ${fs.readlinkSync(d)}, which does not exist`);
      throw new ConfigError(`${setting}: cannot create the directory ${dir} (${code ?? (err as Error).message})`);
    }
  }
  // A file in its place would otherwise surface later as "unable to open database file".
  if (!fs.statSync(dir).isDirectory()) throw new ConfigError(`${setting}: ${dir} is not a directory`);
}

/** The `sslmode`s of libpq that the store can keep (libpq's `allow`, plain first, it cannot). */
const SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify'];

/**
 * DATABASE_URL's TLS settings, checked before a connection needs them: a mode the store
 * knows, a root certificate where `verify-ca` needs one, and certificate files that can be
 * read (the driver would read them only at a connection, a request's or a command's).
 */
function checkPostgresTls(url: URL): void {
  // The driver takes a parameter's last value, the checks below its first: one of each.
  const names = [...url.searchParams.keys()];
  const repeated = names.find((name, i) => names.indexOf(name) !== i);
  if (repeated !== undefined) throw new ConfigError(`DATABASE_URL gives ${repeated} more than once: give each parameter once`);
  const mode = url.searchParams.get('sslmode');
  if (mode !== null && !SSL_MODES.includes(mode)) throw new ConfigError(`DATABASE_URL's sslmode must be one of ${SSL_MODES.join(', ')} (got ${JSON.stringify(mode)})`);
  if (mode === 'verify-ca' && !url.searchParams.get('sslrootcert')) {
    throw new ConfigError("DATABASE_URL's sslmode=verify-ca needs sslrootcert=FILE, the certificate of the authority that signed the server's (or use verify-full)");
  }
  if (url.searchParams.has('uselibpqcompat')) throw new ConfigError("DATABASE_URL: leave uselibpqcompat out (sslmode always has libpq's meaning here)");
  for (const name of ['sslrootcert', 'sslcert', 'sslkey']) {
    const file = url.searchParams.get(name);
    if (!file) continue;
    try {
      // Read, as the driver will: a directory, or a file root may open but not read, fails here.
      fs.readFileSync(file);
    } catch (err) {
      throw new ConfigError(`DATABASE_URL's ${name}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`);
    }
  }
}

/** The settings `serve` also takes as flags (src/cli/main.ts), each named as its key is (`cabinetPort`: `--cabinet-port`). */
const FLAGGED: ReadonlySet<string> = new Set(['dataDir', 'host', 'port', 'cabinetPort']);

/** The command-line flag that sets a setting, or null when none does. */
export function flagFor(key: string): string | null {
  return FLAGGED.has(key) ? `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}` : null;
}

/** The settings of each configuration that a command-line flag gave, so that its messages name the flag. */
const givenByFlag = new WeakMap<object, ReadonlySet<string>>();

/**
 * How a message names a setting of `config`: its flag with the variable it stands for when
 * the flag gave it (`--data-dir (SCHOOL_DATA_DIR)`), else the variable.
 */
export function settingNamed(config: object, key: keyof Settings): string {
  return namedAs(key, givenByFlag.get(config)?.has(key) === true);
}

/** A setting as a message names it: by its flag with its variable when the flag gave it, else by its variable. */
function namedAs(key: keyof Settings, byFlag: boolean): string {
  const flag = byFlag ? flagFor(key) : null;
  return flag === null ? settings[key].env : `${flag} (${settings[key].env})`;
}

/**
 * Reads the configuration from `env`, with `overrides` (command-line flags) taking
 * precedence. Throws a ConfigError naming the variable when a value is invalid.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigOverrides = {}): Config {
  const out: Record<string, unknown> = {};
  const flagged = new Set<string>();
  for (const [key, s] of Object.entries(settings) as [keyof Settings, Setting<unknown, unknown>][]) {
    const byFlag = overrides[key] != null && overrides[key] !== '';
    if (byFlag) flagged.add(key);
    const given = overrides[key] ?? env[s.env];
    if (given === undefined || given === null || given === '') {
      out[key] = s.default;
      continue;
    }
    const value = s.rule.read(String(given));
    if (value === undefined) {
      // A URL may hold a password: it is not echoed.
      const got = key === 'databaseUrl' || key === 'redisUrl' ? '' : ` (got ${JSON.stringify(String(given))})`;
      throw new ConfigError(`${namedAs(key, byFlag)} must be ${s.rule.says}${got}`);
    }
    out[key] = value;
  }
  // The rule checks the scheme only.
  for (const key of ['databaseUrl', 'redisUrl'] as const) {
    if (typeof out[key] === 'string' && !URL.canParse(out[key])) throw new ConfigError(`${settings[key].env} is not a valid URL (a host, and a port from 1 to 65535 if given)`);
  }
  if (typeof out.databaseUrl === 'string') checkPostgresTls(new URL(out.databaseUrl));
  if (out.port !== 0 && out.port === out.cabinetPort) {
    throw new ConfigError(`SCHOOL_DATA_CABINET_PORT must differ from PORT (both are ${String(out.port)}; serve's --cabinet-port and --port set them too)`);
  }
  if ((out.headersTimeoutMs as number) > (out.requestTimeoutMs as number)) {
    throw new ConfigError('SCHOOL_DATA_HEADERS_TIMEOUT_MS must not exceed SCHOOL_DATA_REQUEST_TIMEOUT_MS (the headers are part of the request)');
  }
  if ((out.tlsCert === null) !== (out.tlsKey === null)) {
    throw new ConfigError('SCHOOL_DATA_TLS_CERT and SCHOOL_DATA_TLS_KEY must be set together');
  }
  const proxies = (out.trustedProxies as string).trim();
  if (proxies !== '') {
    const parsed = parseAllowlist(proxies);
    if (!parsed.ok) throw new ConfigError(`SCHOOL_DATA_TRUSTED_PROXIES ${parsed.reason.replace(/^allow( entries)? /, '')}`);
    out.trustedProxies = parsed.entries.join(',');
  }
  out.dataDir = path.resolve(out.dataDir as string);
  const config = Object.freeze(out) as Config;
  givenByFlag.set(config, flagged);
  return config;
}

/** A HOST that listens on every address of the machine (0.0.0.0, ::): it names none a client can be sent to. */
export function isWildcardHost(host: string): boolean {
  return host === '0.0.0.0' || (isIPv6(host) && /^[0:]+$/.test(host));
}

/**
 * The host of a URL that reaches the listeners from this machine, as printed at a start: HOST
 * itself (an IPv6 address in brackets), or for a wildcard the loopback address it takes in,
 * which the generated certificate names.
 */
export function localUrlHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (isWildcardHost(host)) return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
