/**
 * The lists' read model: columns every row of a list's table carries besides its data,
 * written by the importer in the same transaction as the row (docs/data-model.md):
 * - `item`: the row's list item as JSON text, exactly what its list serves, serialized
 *   here by the item's response schema; a page is its rows' items joined by the database;
 * - `pos`: the row's place in its list's order (`order`, then id) within its school, in
 *   blocks (`list_blocks`): a block's rows hold consecutive positions from the block's
 *   first, and the blocks' positions rise with the order, with room between them. A page
 *   at any offset is two seeks (the offset's block, then the rows from its position); an
 *   import rewrites only the blocks it touches (src/importer/read-model.ts).
 */
import fastJson from 'fast-json-stringify';
import type { TSchema } from 'typebox';
import type { Selectable } from 'kysely';
import type { Database } from '../db/schema.js';
import { formatMoney, subtractMoney } from '../domain/money.js';
import { Contract } from './contracts/schema.js';
import { Instructor } from './instructors/schema.js';
import { Lead } from './leads/schema.js';
import { Lesson } from './lessons/schema.js';
import { Payment } from './payments/schema.js';
import { Student } from './students/schema.js';
import { Vehicle } from './vehicles/schema.js';

/** Rows a block is laid out with; a block that grows past twice this is split. */
export const BLOCK_ROWS = 64;
/** Positions between the first positions of two blocks laid out together: room to grow. */
export const BLOCK_SPAN = 256;

export const LIST_TABLES = ['students', 'instructors', 'vehicles', 'lessons', 'contracts', 'payments', 'leads'] as const;
export type ListTable = (typeof LIST_TABLES)[number];

/**
 * A row of a list's table without its read model: what an item is made from. A contract
 * being written has no paid_minor yet (the importer derives it from the payments, then
 * makes the contract's item again).
 */
export type ListRow<T extends ListTable> = T extends 'contracts'
  ? Omit<Selectable<Database[T]>, 'item' | 'pos' | 'paid_minor'> & { paid_minor?: number }
  : Omit<Selectable<Database[T]>, 'item' | 'pos'>;

/** A list's order column: the contract's order is this column ascending, then id. */
export type OrderColumn<T extends ListTable> = keyof Database[T] & ('created_at' | 'starts_at' | 'paid_at');

interface ListModel<T extends ListTable> {
  order: OrderColumn<T>;
  schema: TSchema;
  /** The API's item for a row: the row's columns in the API's types (money strings, booleans ...). */
  toItem(row: ListRow<T>): object;
}

type Models = { [T in ListTable]: ListModel<T> };

const same = <R extends object>(row: R): object => row;

export const LIST_MODELS: Models = {
  students: { order: 'created_at', schema: Student, toItem: same },
  instructors: {
    order: 'created_at',
    schema: Instructor,
    // Stored as a JSON array in text and as 0/1, the same on both engines.
    toItem: (row) => ({ ...row, categories: JSON.parse(row.categories) as unknown, is_active: row.is_active === 1 }),
  },
  vehicles: { order: 'created_at', schema: Vehicle, toItem: same },
  lessons: { order: 'starts_at', schema: Lesson, toItem: same },
  contracts: {
    order: 'created_at',
    schema: Contract,
    // paid_minor is kept by the importer: payments minus refunds on the contract.
    toItem: ({ price_minor, paid_minor = 0, ...row }) => ({ ...row, price: formatMoney(price_minor), paid: formatMoney(paid_minor), debt: formatMoney(subtractMoney(price_minor, paid_minor)) }),
  },
  payments: { order: 'paid_at', schema: Payment, toItem: ({ amount_minor, ...row }) => ({ ...row, amount: formatMoney(amount_minor) }) },
  leads: { order: 'created_at', schema: Lead, toItem: same },
};

const serializers = new Map<ListTable, (item: object) => string>();

/** The JSON text of a row's list item. Unlisted columns (school_id, birth_date ...) are left out by the schema. */
export function itemJson<T extends ListTable>(table: T, row: ListRow<T>): string {
  const model = LIST_MODELS[table] as ListModel<T>;
  let serialize = serializers.get(table);
  if (serialize === undefined) {
    serialize = fastJson(model.schema as Parameters<typeof fastJson>[0]);
    serializers.set(table, serialize);
  }
  return serialize(model.toItem(row));
}
