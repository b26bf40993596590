/**
 * How the importer's statements reach the store: a `Sql` is a Kysely to build and compile
 * them with and a function to run them, either on a connection of its own (an import, on a
 * BulkConnection) or through the store's pool or a Kysely transaction (the rebuild).
 */
import type { CompiledQuery, Compilable, Kysely } from 'kysely';
import type { Statement } from '../db/bulk.js';
import type { Database } from '../db/schema.js';

export interface Sql {
  readonly db: Kysely<Database>;
  run(query: Compilable | CompiledQuery): Promise<Statement>;
}

/** A Sql over a Kysely instance or transaction. */
export function viaKysely(db: Kysely<Database>): Sql {
  return {
    db,
    async run(query) {
      const result = await db.executeQuery('compile' in query ? query.compile() : query);
      return { rows: result.rows as Record<string, unknown>[], changed: Number(result.numAffectedRows ?? result.rows.length) };
    },
  };
}
