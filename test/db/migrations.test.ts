/**
 * Migrations on PostgreSQL (src/db/postgres-migrations.ts): services migrating other
 * schemas of the same database neither wait for nor break each other, and a migration
 * is not bound by the per-query timeout that bounds a request, nor is the read-model
 * rebuild an upgrade runs after it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { openStore } from '../../src/db/index.js';
import { MIGRATION_LOCK_CLASS } from '../../src/db/postgres-migrations.js';
import { READ_MODEL_VERSIONS, rebuildStale } from '../../src/importer/rebuild.js';
import { urlWithSchema } from '../helpers/store.js';

const base = process.env.DATABASE_URL ?? '';

describe('migrations on PostgreSQL', { skip: base ? false : 'PostgreSQL only: a SQLite file is one schema' }, () => {
  const schema = `sd_test_mig_${randomBytes(5).toString('hex')}`;
  let admin: pg.Client;
  // A short per-query timeout, to show that migrations are not bound by it.
  const open = () => openStore({ databaseUrl: urlWithSchema(base, schema), dataDir: '/nonexistent', dbTimeoutMs: 300, dbPoolSize: 2 });

  before(async () => {
    admin = new pg.Client({ connectionString: base });
    await admin.connect();
    await admin.query(`create schema ${schema}`);
  });
  after(async () => {
    await admin.query(`drop schema if exists ${schema} cascade`);
    await admin.end();
  });

  it('waits for another migration of its schema, past the query timeout, and only for its own schema', async () => {
    const other = `sd_test_mig_${randomBytes(5).toString('hex')}`;
    await admin.query(`create schema ${other}`);
    const holder = new pg.Client({ connectionString: base });
    await holder.connect();
    const store = open();
    const otherStore = openStore({ databaseUrl: urlWithSchema(base, other), dataDir: '/nonexistent', dbTimeoutMs: 300, dbPoolSize: 2 });
    try {
      // Another instance is migrating this schema.
      await holder.query('select pg_advisory_lock($1, hashtext($2))', [MIGRATION_LOCK_CLASS, schema]);
      const waiting = store.migrate();
      let settled = false;
      void waiting.finally(() => (settled = true));
      // A service on another schema of the same database is not held up by it.
      assert.ok((await otherStore.migrate()).length > 0);
      await new Promise((resolve) => setTimeout(resolve, 800));
      assert.equal(settled, false, 'migrated while another migration of its schema held the lock');
      await holder.query('select pg_advisory_unlock($1, hashtext($2))', [MIGRATION_LOCK_CLASS, schema]);
      assert.ok((await waiting).length > 0);
      assert.deepEqual(await store.migrate(), []);
    } finally {
      await holder.end();
      await store.close();
      await otherStore.close();
      await admin.query(`drop schema if exists ${other} cascade`);
    }
  });

  it('runs an upgrade\'s rebuild on its own connection too: a wait for another instance\'s is not cut off at the query timeout', async () => {
    const fresh = `sd_test_mig_${randomBytes(5).toString('hex')}`;
    await admin.query(`create schema ${fresh}`);
    const store = openStore({ databaseUrl: urlWithSchema(base, fresh), dataDir: '/nonexistent', dbTimeoutMs: 300, dbPoolSize: 2 });
    const holder = new pg.Client({ connectionString: urlWithSchema(base, fresh) });
    await holder.connect();
    try {
      await store.migrate();
      // Another instance is making a part of the read model.
      await holder.query('begin');
      await holder.query('lock table read_model_versions in share row exclusive mode');
      const upgrading = store.upgrade(rebuildStale);
      await new Promise((resolve) => setTimeout(resolve, 800));
      await holder.query('commit');
      const { applied, derived } = await upgrading;
      assert.deepEqual(applied, []);
      assert.deepEqual(derived, Object.keys(READ_MODEL_VERSIONS));
    } finally {
      await holder.end();
      await store.close();
      await admin.query(`drop schema if exists ${fresh} cascade`);
    }
  });

  it('is not broken by other schemas of the database being dropped while it runs', async () => {
    // Kysely's own listing of tables failed here with `schema "..." does not exist`.
    let churning = true;
    const churners = await Promise.all(
      [1, 2, 3, 4].map(async () => {
        const client = new pg.Client({ connectionString: base });
        await client.connect();
        return client;
      }),
    );
    const churn = churners.map(async (client) => {
      let made = 0;
      while (churning) {
        const name = `sd_test_churn_${randomBytes(5).toString('hex')}`;
        const tables = Array.from({ length: 30 }, (_, i) => `create table ${name}.t${i} (a int, b text, c date, d bigint);`).join(' ');
        await client.query(`create schema ${name}; ${tables}`);
        await client.query(`drop schema ${name} cascade`);
        made++;
      }
      return made;
    });
    const store = open();
    try {
      for (let i = 0; i < 60; i++) await store.migrate();
    } finally {
      churning = false;
      const made = await Promise.all(churn);
      await Promise.all(churners.map((c) => c.end()));
      await store.close();
      assert.ok(made.every((n) => n > 0), 'a churner did not run');
    }
  });
});
