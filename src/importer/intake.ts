/**
 * Takes the records of a file one at a time (source.ts): checks each alone (validate.ts),
 * remembers the ids the file declares (duplicates, and references that point later in the
 * file), the references it cannot resolve yet, and the ids it deletes, and hands each valid
 * record to staging as a row. Memory grows with the file's ids, not with its records.
 */
import { ID_PATTERN } from '../domain/ids.js';
import type { ErrorList, ImportError } from './errors.js';
import { MAX_TOTAL, pastTheBound } from './money-bound.js';
import { itemOf } from './read-model.js';
import type { ListTable } from '../resources/items.js';
import { REFERENCES } from './references.js';
import { TO_ROW } from './rows.js';
import { ARRAY_NAMES, type ArrayName, type RecordOf } from './schema.js';
import type { Intake } from './source.js';
import { stagedColumns, type Stage } from './stage.js';
import { checkRecord, isObject } from './validate.js';

const ID = new RegExp(ID_PATTERN);

/** The arrays that records refer to: their ids are kept in memory to resolve references. */
const REFERENCED = new Set(Object.values(REFERENCES).flatMap((refs) => refs.map((r) => r.target)));

/** The values of a staged row, after its index in the file. */
const ROW_VALUES = Object.fromEntries(ARRAY_NAMES.map((a) => [a, stagedColumns(a).slice(1)])) as Record<ArrayName, string[]>;

const perArray = <T>(make: () => T) => Object.fromEntries(ARRAY_NAMES.map((a) => [a, make()])) as Record<ArrayName, T>;

export class FileIntake implements Intake {
  /**
   * Every id the file declares, valid record or not, with its first index: of the arrays
   * that records refer to. Those of the others (lessons, payments ...) are not kept in
   * memory; their duplicates are found in staging (Stage.duplicates).
   */
  readonly declared = perArray(() => new Map<string, number>());
  /**
   * Arrays where some id could not be read (a record that is not an object, an id that is
   * not a string). References into them are not judged: any of them might name the
   * record that is broken, and one mistake should give one error.
   */
  readonly unreadableArrays = new Set<ArrayName>();
  /** Referenced ids not declared by the file when they were met (checked again at the end). */
  readonly pending = perArray(() => new Set<string>());
  /** The ids the file deletes, with their index in `deleted.<array>`. */
  readonly deletes = perArray(() => new Map<string, number>());
  /** The keys of `deleted` met so far (one given twice is refused). */
  private readonly deletedGiven = new Set<string>();
  /** Records per array in the file, valid or not. */
  readonly counts = perArray(() => 0);
  /** Arrays the file carries, empty ones too (for --replace: each is the whole truth for its resource). */
  readonly present = new Set<ArrayName>();
  /**
   * Per contract, what the file's payments read so far pay (refunds taken off): a contract
   * is staged with it as its balance, right in a first import whose payments come first.
   */
  private readonly paid = new Map<string, number>();
  /**
   * The amounts of the file's payments and refunds so far. Past MAX_TOTAL the school's would
   * be too (a payment staged is one of them after the import), and the import is refused
   * here: the balances summed before the bound is checked after the merge would overflow
   * the stores' integers first.
   */
  private paymentsTotal = 0;

  private readonly errors: ErrorList;
  private readonly stage: Stage;
  private readonly schoolId: string;
  private readonly currency: string;

  constructor(
    errors: ErrorList,
    stage: Stage,
    schoolId: string,
    currency: string,
  ) {
    this.errors = errors;
    this.stage = stage;
    this.schoolId = schoolId;
    this.currency = currency;
  }

  get full(): boolean {
    return this.errors.full;
  }

  problem(error: ImportError): void {
    this.errors.add(error);
  }

  unreadable(array: ArrayName): void {
    this.unreadableArrays.add(array);
  }

  record(array: ArrayName, index: number, value: unknown): void {
    this.counts[array] += 1;
    const { record, problems } = checkRecord(array, value, this.currency);
    const id = isObject(value) ? value.id : undefined;
    if (typeof id === 'string') {
      if (REFERENCED.has(array)) {
        const earlier = this.declared[array].get(id);
        if (earlier === undefined) this.declared[array].set(id, index);
        else problems.push({ field: 'id', reason: `repeats the id "${id}" of ${array}[${earlier}]` });
      }
    } else {
      this.unreadableArrays.add(array);
    }
    if (problems.length > 0) {
      this.errors.addFor(array, index, problems);
      return;
    }
    this.note(array, record!);
    this.stage.add(array, this.row(array, index, record!));
  }

  deleted(resource: string, ids: unknown): void {
    const where = `deleted.${resource}`;
    // A JSON parser would take both lists of a key written twice: refused like a top-level key.
    if (this.deletedGiven.has(resource)) {
      this.errors.add({ array: where, index: null, field: null, reason: 'appears twice in deleted' });
      return;
    }
    this.deletedGiven.add(resource);
    if (!(ARRAY_NAMES as string[]).includes(resource)) {
      this.errors.add({ array: where, index: null, field: null, reason: `is not an array of the import format (${ARRAY_NAMES.join(', ')})` });
      return;
    }
    if (!Array.isArray(ids)) {
      this.errors.add({ array: where, index: null, field: null, reason: 'must be an array of ids' });
      return;
    }
    const deletes = this.deletes[resource as ArrayName];
    ids.forEach((id: unknown, index) => {
      if (typeof id !== 'string' || !ID.test(id)) this.errors.add({ array: where, index, field: null, reason: 'must be an id of 1-64 characters A-Z a-z 0-9 _ -' });
      else if (!deletes.has(id)) deletes.set(id, index);
    });
  }

  arrayEnd(array: ArrayName): void {
    this.present.add(array);
    this.stage.endArray();
  }

  settle(): Promise<void> {
    return this.stage.settle();
  }

  /** After the whole file: drops the references the file itself resolves. */
  finish(): void {
    for (const array of ARRAY_NAMES) {
      const pending = this.pending[array];
      for (const id of pending) if (this.declared[array].has(id)) pending.delete(id);
    }
  }

  private note<K extends ArrayName>(array: K, record: RecordOf<K>): void {
    for (const { field, target } of REFERENCES[array] ?? []) {
      const id = (record as Record<string, unknown>)[field];
      // Nullable references left out or null point at nothing; the schema guarantees strings otherwise.
      if (typeof id === 'string' && !this.declared[target].has(id)) this.pending[target].add(id);
    }
  }

  private row<K extends ArrayName>(array: K, index: number, record: RecordOf<K>): unknown[] {
    const row = TO_ROW[array](record, this.schoolId, this.currency) as Record<string, unknown>;
    if (array === 'payments') {
      const amount = row.amount_minor as number;
      if (this.paymentsTotal <= MAX_TOTAL && (this.paymentsTotal += amount) > MAX_TOTAL) this.errors.add(pastTheBound('payments'));
      if (typeof row.contract_id === 'string') this.paid.set(row.contract_id, (this.paid.get(row.contract_id) ?? 0) + (row.kind === 'refund' ? -amount : amount));
    }
    // A balance past the bound is never written (the import is refused above): it is staged as 0, which its item can show.
    if (array === 'contracts') {
      const paid = this.paid.get(row.id as string) ?? 0;
      row.paid_minor = Math.abs(paid) > MAX_TOTAL ? 0 : paid;
    }
    const values: unknown[] = [index];
    for (const column of ROW_VALUES[array]) values.push(column === 'item' ? itemOf(array as ListTable, row) : row[column]);
    return values;
  }
}
