/**
 * Import errors are values (STYLE rule 6): a bad file is an expected outcome, reported
 * record by record, never thrown.
 */

/** One problem with an import file. `array`/`index`/`field` are null when they do not apply. */
export type ImportError = { array: string | null; index: number | null; field: string | null; reason: string };

/** Enough to fix a file in a few rounds without flooding the operator with one mistake repeated. */
export const MAX_ERRORS = 50;

/** Collects errors up to MAX_ERRORS; validators stop as soon as it is `full`. */
export class ErrorList {
  readonly items: ImportError[] = [];

  get full(): boolean {
    return this.items.length >= MAX_ERRORS;
  }

  /** How many more errors can be taken. */
  get room(): number {
    return Math.max(0, MAX_ERRORS - this.items.length);
  }

  get empty(): boolean {
    return this.items.length === 0;
  }

  add(error: ImportError): void {
    if (!this.full) this.items.push(error);
  }

  /** Errors of one record: `array[index]`. */
  addFor(array: string, index: number, problems: Iterable<{ field: string | null; reason: string }>): void {
    for (const { field, reason } of problems) this.add({ array, index, field, reason });
  }
}
