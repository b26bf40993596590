/**
 * Real stores for tests: a SQLite file in a fresh temporary directory, or, when
 * DATABASE_URL is set, a fresh PostgreSQL schema of that database (dropped at the
 * end), so runs never collide.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { openStore, type Store } from '../../src/db/index.js';

export interface TestStore extends Store {
  /** The DATABASE_URL that reaches this store (PostgreSQL), or null (SQLite). */
  readonly url: string | null;
  readonly dataDir: string;
}

/**
 * Refuses `what` in a test file marked `@store-free` (scripts/test.mjs runs such a file in the
 * embedded suites only), so the mark cannot stay on a file that uses a store or the program.
 */
export function refuseIfStoreFree(what: string): void {
  if (process.env.SCHOOL_DATA_TEST_STORE_FREE === '1') throw new Error(`this test file is marked @store-free, but ${what}: remove the mark`);
}

export const usePostgres = (): boolean => {
  refuseIfStoreFree('it asks which store the suite runs on');
  return Boolean(process.env.DATABASE_URL);
};

/** A URL that points pg at `schema` through search_path. */
export function urlWithSchema(base: string, schema: string): string {
  const url = new URL(base);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

/**
 * A fresh store, migrated to the latest schema (or only up to `migrateTo`, to test an upgrade).
 * Its data directory holds the run's self-signed certificate (scripts/test.mjs), as a start
 * there would have made one; with `certificate: false`, none, for the first start to make.
 */
export async function createTestStore(options: { migrateTo?: string; certificate?: boolean } = {}): Promise<TestStore> {
  refuseIfStoreFree('it opens a store');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-test-'));
  if (options.certificate !== false && process.env.SCHOOL_DATA_TEST_TLS) fs.cpSync(process.env.SCHOOL_DATA_TEST_TLS, path.join(dataDir, 'tls'), { recursive: true });
  const base = process.env.DATABASE_URL;
  if (!base) {
    const store = openStore({ databaseUrl: null, dataDir, dbTimeoutMs: 3000, dbPoolSize: 4 });
    await store.migrate(options.migrateTo);
    return {
      ...store,
      url: null,
      dataDir,
      close: async () => {
        await store.close();
        fs.rmSync(dataDir, { recursive: true, force: true });
      },
    };
  }
  const schema = `sd_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const url = urlWithSchema(base, schema);
  const store = openStore({ databaseUrl: url, dataDir, dbTimeoutMs: 3000, dbPoolSize: 4 });
  await store.migrate(options.migrateTo);
  return {
    ...store,
    url,
    dataDir,
    close: async () => {
      await store.close();
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      await c.query(`DROP SCHEMA ${schema} CASCADE`);
      await c.end();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Makes the store refuse every new row of `table` (a trigger raising `<table> refused`), as a
 * failure halfway through a change would; the returned function lifts it.
 */
export async function refuseInserts(store: Store, table: string): Promise<() => Promise<void>> {
  const name = sql.id(`refuse_${table}`);
  const message = sql.lit(`${table} refused`);
  if (store.dialect === 'sqlite') {
    await sql`CREATE TRIGGER ${name} BEFORE INSERT ON ${sql.table(table)} BEGIN SELECT RAISE(ABORT, ${message}); END`.execute(store.db);
    return async () => void (await sql`DROP TRIGGER ${name}`.execute(store.db));
  }
  await sql`CREATE FUNCTION ${name}() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION ${message}; END $$ LANGUAGE plpgsql`.execute(store.db);
  await sql`CREATE TRIGGER ${name} BEFORE INSERT ON ${sql.table(table)} FOR EACH ROW EXECUTE FUNCTION ${name}()`.execute(store.db);
  return async () => {
    await sql`DROP TRIGGER ${name} ON ${sql.table(table)}`.execute(store.db);
    await sql`DROP FUNCTION ${name}()`.execute(store.db);
  };
}
