/**
 * Writing a validated file: every array upserted in batches, then the derived contract
 * balances, all inside the caller's transaction. The same statements run on SQLite and
 * PostgreSQL (`INSERT ... ON CONFLICT (school_id, id) DO UPDATE` is spelled alike in both).
 */
import { sql, type ExpressionBuilder, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import type { ArrayName } from './schema.js';
import type { RowOf } from './rows.js';

/** A row as written: the file's row, with the read model of a list's table (item) added. */
export type WrittenRow<K extends ArrayName> = RowOf<K> & { item?: string };

/** Rows per INSERT: few round trips, while staying far from SQLite's 32766 bound parameters. */
const MAX_ROWS_PER_INSERT = 500;
const MAX_PARAMS_PER_INSERT = 30_000;

/** The primary key of every school-owned table; the rest of a row is overwritten on conflict. */
const KEY = ['school_id', 'id'] as const;

/**
 * Upserts rows of one table. Kysely cannot type an insert over a table chosen at run
 * time, so the statement is built against an untyped view of the same transaction;
 * the rows themselves are checked by their callers (`RowOf<K>`).
 */
export async function upsert<K extends ArrayName>(trx: Kysely<Database>, table: K, rows: WrittenRow<K>[]): Promise<void> {
  const first = rows[0];
  if (!first) return;
  // TO_ROW gives every row of a table the same columns, so the first row names them all.
  const columns = Object.keys(first);
  const updated = columns.filter((column) => !(KEY as readonly string[]).includes(column));
  const perInsert = Math.max(1, Math.min(MAX_ROWS_PER_INSERT, Math.floor(MAX_PARAMS_PER_INSERT / columns.length)));
  const untyped = trx as unknown as Kysely<Record<string, Record<string, unknown>>>;
  const name: string = table;
  for (let i = 0; i < rows.length; i += perInsert) {
    await untyped
      .insertInto(name)
      .values(rows.slice(i, i + perInsert))
      .onConflict((conflict) =>
        conflict.columns([...KEY]).doUpdateSet(Object.fromEntries(updated.map((column) => [column, sql.ref(`excluded.${column}`)]))),
      )
      .execute();
  }
}

/**
 * Serialises imports into one school: a second import waits here until the first has
 * committed, so the balances it recomputes include the first one's payments. The update
 * takes the school row's lock the same way on PostgreSQL and SQLite, and raises the
 * school's data version: once the import commits, no response stored for the earlier
 * data is served again (src/resources/cache.ts).
 */
export async function lockSchool(trx: Transaction<Database>, schoolId: string): Promise<void> {
  await trx
    .updateTable('schools')
    .set((eb) => ({ data_version: eb(eb.ref('data_version'), '+', 1) }))
    .where('id', '=', schoolId)
    .execute();
}

/**
 * contracts.paid_minor = payments minus refunds on each contract of the school. Run after
 * the payments are written, over all the school's contracts, because an import may move a
 * stored payment from one contract to another. Returns the ids of the contracts whose
 * balance changed (their list items must be made again).
 */
export async function recomputeContractBalances(trx: Transaction<Database>, schoolId: string): Promise<string[]> {
  const paid = (eb: ExpressionBuilder<Database, 'contracts'>) =>
    eb.fn.coalesce(
      eb
        .selectFrom('payments')
        .select((p) =>
          p.fn.sum<number>(
            p.case().when('payments.kind', '=', 'refund').then(p.neg(p.ref('payments.amount_minor'))).else(p.ref('payments.amount_minor')).end(),
          ).as('paid'),
        )
        .whereRef('payments.school_id', '=', 'contracts.school_id')
        .whereRef('payments.contract_id', '=', 'contracts.id'),
      eb.lit(0),
    );
  const changed = await trx
    .updateTable('contracts')
    .set((eb) => ({ paid_minor: paid(eb) }))
    .where('contracts.school_id', '=', schoolId)
    .where((eb) => eb('contracts.paid_minor', '<>', paid(eb)))
    .returning('contracts.id')
    .execute();
  return changed.map((row) => row.id);
}
