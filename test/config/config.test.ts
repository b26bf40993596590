/** The configuration's rules: each variable read by its rule, a bad value named with what it must be. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig, localUrlHost, settings } from '../../src/config/index.js';

const refused = (env: NodeJS.ProcessEnv, message: string) => assert.throws(() => loadConfig(env), (err: unknown) => err instanceof ConfigError && err.message === message);

describe('configuration', () => {
  it('takes every default when nothing is set, and a given value over it', () => {
    const config = loadConfig({});
    for (const [key, s] of Object.entries(settings)) if (key !== 'dataDir') assert.deepEqual(config[key as keyof typeof config], s.default, key);
    const set = loadConfig({ PORT: '9443', SCHOOL_DATA_LOG_LEVEL: 'warn', DATABASE_URL: 'postgresql://u@h/db', SCHOOL_DATA_RESPONSE_CACHE_MB: '0' });
    assert.deepEqual([set.port, set.logLevel, set.databaseUrl, set.responseCacheMb], [9443, 'warn', 'postgresql://u@h/db', 0]);
    // An empty variable is an unset one; an override (a command-line flag) wins over the variable.
    assert.equal(loadConfig({ PORT: '' }).port, 8443);
    assert.equal(loadConfig({ PORT: '9443' }, { port: 0 }).port, 0);
  });

  it('names a bad value with what it must be, echoing none that may hold a password', () => {
    refused({ PORT: '65536' }, 'PORT must be an integer from 0 to 65535 (got "65536")');
    refused({ PORT: '8443.5' }, 'PORT must be an integer from 0 to 65535 (got "8443.5")');
    refused({ SCHOOL_DATA_DB_TIMEOUT_MS: '0' }, 'SCHOOL_DATA_DB_TIMEOUT_MS must be an integer from 1 to 60000 (got "0")');
    refused({ SCHOOL_DATA_DB_TIMEOUT_MS: ' 5' }, 'SCHOOL_DATA_DB_TIMEOUT_MS must be an integer from 1 to 60000 (got " 5")');
    refused({ SCHOOL_DATA_LOG_LEVEL: 'INFO' }, 'SCHOOL_DATA_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent (got "INFO")');
    refused({ DATABASE_URL: 'mysql://u:secret@h/x' }, 'DATABASE_URL must be a postgres:// URL');
    refused({ REDIS_URL: 'http://u:secret@h' }, 'REDIS_URL must be a redis:// URL');
    // A URL wrong only in its port or host is not echoed either.
    for (const url of ['postgres://u:secret@127.0.0.1:99999/x', 'postgres://u:secret@bad host/x']) {
      refused({ DATABASE_URL: url }, 'DATABASE_URL is not a valid URL (a host, and a port from 1 to 65535 if given)');
    }
    // A parameter given twice: the driver would take the last, which nothing checked.
    refused({ DATABASE_URL: 'postgres://u:secret@127.0.0.1/x?sslmode=disable&sslmode=bogus' }, 'DATABASE_URL gives sslmode more than once: give each parameter once');
    // A flag's bad value names the flag the operator typed, and the variable it stands for.
    assert.throws(() => loadConfig({}, { port: 1.5 }), /^ConfigError: --port \(PORT\) must be an integer/);
    assert.throws(() => loadConfig({ PORT: '8443' }, { cabinetPort: '99999' }), /^ConfigError: --cabinet-port \(SCHOOL_DATA_CABINET_PORT\) must be an integer from 0 to 65535 \(got "99999"\)$/);
    // An override that no flag gives (a caller's own) is named by its variable alone.
    assert.throws(() => loadConfig({}, { usageFlushMs: 0 }), /^ConfigError: SCHOOL_DATA_USAGE_FLUSH_MS must be/);
  });

  it('gives the host a URL reaches the listeners by from this machine: a wildcard\'s loopback address', () => {
    for (const [host, url] of [['0.0.0.0', '127.0.0.1'], ['::', '[::1]'], ['0:0:0:0:0:0:0:0', '[::1]'], ['::1', '[::1]'], ['127.0.0.1', '127.0.0.1'], ['api.example.org', 'api.example.org']]) {
      assert.equal(localUrlHost(host!), url, host);
    }
  });

  it("checks DATABASE_URL's TLS settings before any connection needs them", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sd-config-'));
    try {
      const ca = path.join(dir, 'ca.pem');
      fs.writeFileSync(ca, 'a certificate');
      for (const mode of ['disable', 'prefer', 'require', 'verify-full', 'no-verify']) assert.ok(loadConfig({ DATABASE_URL: `postgres://h/db?sslmode=${mode}` }).databaseUrl, mode);
      assert.ok(loadConfig({ DATABASE_URL: `postgres://h/db?sslmode=verify-ca&sslrootcert=${ca}` }).databaseUrl);
      refused(
        { DATABASE_URL: 'postgres://u:secret@h/db?sslmode=allow' },
        'DATABASE_URL\'s sslmode must be one of disable, prefer, require, verify-ca, verify-full, no-verify (got "allow")',
      );
      refused(
        { DATABASE_URL: 'postgres://h/db?sslmode=verify-ca' },
        "DATABASE_URL's sslmode=verify-ca needs sslrootcert=FILE, the certificate of the authority that signed the server's (or use verify-full)",
      );
      const missing = path.join(dir, 'none.pem');
      refused({ DATABASE_URL: `postgres://h/db?sslmode=verify-full&sslrootcert=${missing}` }, `DATABASE_URL's sslrootcert: cannot read ${missing} (ENOENT)`);
      refused({ DATABASE_URL: `postgres://h/db?sslmode=require&sslcert=${ca}&sslkey=${missing}` }, `DATABASE_URL's sslkey: cannot read ${missing} (ENOENT)`);
      refused({ DATABASE_URL: `postgres://h/db?sslmode=verify-full&sslrootcert=${dir}` }, `DATABASE_URL's sslrootcert: cannot read ${dir} (EISDIR)`);
      refused({ DATABASE_URL: 'postgres://h/db?sslmode=require&uselibpqcompat=false' }, "DATABASE_URL: leave uselibpqcompat out (sslmode always has libpq's meaning here)");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
