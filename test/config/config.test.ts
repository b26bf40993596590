/** The configuration's rules: each variable read by its rule, a bad value named with what it must be. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig, settings } from '../../src/config/index.js';

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
    assert.throws(() => loadConfig({}, { port: 1.5 }), /PORT must be an integer/);
  });
});
