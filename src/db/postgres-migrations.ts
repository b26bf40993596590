/**
 * How migrations reach PostgreSQL: on a connection of their own, with no statement
 * timeout (a migration takes as long as it takes), and with Kysely's advisory lock and
 * table listing scoped to `current_schema()`, so services migrating different schemas
 * of one database neither wait for nor break each other (docs/decisions.md, "Migrations").
 */
import { Kysely, PostgresAdapter, PostgresDialect, PostgresIntrospector, sql, type DatabaseIntrospector, type DatabaseMetadataOptions, type TableMetadata } from 'kysely';
import type pg from 'pg';
import { READ_COMMITTED } from './bulk.js';
import type { Database } from './schema.js';

/** First key of the two-key advisory lock; the second is the schema's name hashed. */
export const MIGRATION_LOCK_CLASS = 0x5d_a7a;

class SchemaLockAdapter extends PostgresAdapter {
  // Session locks, as Kysely's own: the Migrator takes the lock outside its transaction.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the signature Kysely declares
  override async acquireMigrationLock(db: Kysely<any>): Promise<void> {
    await sql`select pg_advisory_lock(${sql.lit(MIGRATION_LOCK_CLASS)}, hashtext(current_schema()))`.execute(db);
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the signature Kysely declares
  override async releaseMigrationLock(db: Kysely<any>): Promise<void> {
    await sql`select pg_advisory_unlock(${sql.lit(MIGRATION_LOCK_CLASS)}, hashtext(current_schema()))`.execute(db);
  }
}

interface ColumnRow {
  table: string;
  kind: string;
  column: string;
  not_null: boolean;
  has_default: boolean;
  auto_incrementing: boolean;
  type: string;
  type_schema: string;
  description: string | null;
}

class SchemaIntrospector extends PostgresIntrospector {
  private readonly connection: Kysely<unknown>;

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the signature Kysely declares
  constructor(connection: Kysely<any>) {
    super(connection);
    this.connection = connection;
  }

  /** The tables and views of the connection's schema only, joined by oid throughout. */
  override async getTables(options: DatabaseMetadataOptions = { withInternalKyselyTables: false }): Promise<TableMetadata[]> {
    const { rows } = await sql<ColumnRow & { schema: string }>`
      select c.relname as "table", c.relkind as kind, ns.nspname as schema, a.attname as "column",
             a.attnotnull as not_null, a.atthasdef as has_default,
             (a.attidentity <> '' or coalesce(pg_get_expr(d.adbin, d.adrelid) like 'nextval(%', false)) as auto_incrementing,
             t.typname as type, tns.nspname as type_schema, col_description(a.attrelid, a.attnum) as description
      from pg_catalog.pg_class c
      join pg_catalog.pg_namespace ns on ns.oid = c.relnamespace
      join pg_catalog.pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
      join pg_catalog.pg_type t on t.oid = a.atttypid
      join pg_catalog.pg_namespace tns on tns.oid = t.typnamespace
      left join pg_catalog.pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
      where ns.nspname = current_schema() and c.relkind in ('r', 'v', 'p')
      order by c.relname, a.attnum`.execute(this.connection);
    const tables = new Map<string, TableMetadata & { columns: TableMetadata['columns'][number][] }>();
    for (const row of rows) {
      if (!options.withInternalKyselyTables && row.table.startsWith('kysely_migration')) continue;
      let table = tables.get(row.table);
      if (table === undefined) tables.set(row.table, (table = { name: row.table, schema: row.schema, isView: row.kind === 'v', isForeign: false, columns: [] })); // no foreign table: relkind r, v or p
      table.columns.push({
        name: row.column,
        dataType: row.type,
        dataTypeSchema: row.type_schema,
        isNullable: !row.not_null,
        hasDefaultValue: row.has_default,
        isAutoIncrementing: row.auto_incrementing,
        ...(row.description === null ? {} : { comment: row.description }),
      });
    }
    return [...tables.values()];
  }
}

class MigrationDialect extends PostgresDialect {
  override createAdapter(): PostgresAdapter {
    return new SchemaLockAdapter();
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the signature Kysely declares
  override createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new SchemaIntrospector(db);
  }
}

/** One connection for migrations, with the connect timeout but no statement timeout; destroy it after. */
export function openMigrationConnection(driver: typeof pg, options: Pick<pg.PoolConfig, 'connectionString' | 'connectionTimeoutMillis' | 'keepAlive' | 'keepAliveInitialDelayMillis' | 'types' | 'stream'>): Kysely<Database> {
  // eslint-disable-next-line @typescript-eslint/no-misused-promises -- pg-pool waits for the promise; @types/pg types the hook as void
  const pool = new driver.Pool({ ...options, max: 1, onConnect: async (client) => void (await client.query(READ_COMMITTED)) });
  pool.on('error', () => undefined);
  return new Kysely<Database>({ dialect: new MigrationDialect({ pool }) });
}
