/**
 * The data importer: reads a file (or a value) record by record, stages the valid ones on
 * a connection of its own, then merges them in one transaction under the school's lock,
 * or writes nothing and reports every problem found (up to MAX_ERRORS). See
 * docs/import-format.md for the format and its guarantees.
 */
import fs from 'node:fs';
import { CompiledQuery, sql, type Kysely } from 'kysely';
import { announceKeyChanges, openBulkConnection, refreshStatistics, type BulkConnection } from '../db/index.js';
import type { Database } from '../db/schema.js';
import { FINANCE_SIDES } from '../resources/finance/sides.js';
import { ErrorList, type ImportError } from './errors.js';
import { FileIntake } from './intake.js';
import { Merge } from './merge.js';
import { checkMoneyBound } from './money-bound.js';
import { isListTable } from './read-model.js';
import { checkDeletedUnreferred, checkMovedContracts, checkOpenReferences, checkPaymentContracts, contractsMove } from './references.js';
import { ARRAY_NAMES, type ArrayName } from './schema.js';
import { fileSource, valueSource, type Progress, type Source } from './source.js';
import { goneTable, Stage } from './stage.js';
import { lockSchool, pruneTombstones, recordBatch } from './write.js';

export type { ImportError } from './errors.js';
export { MAX_ERRORS } from './errors.js';
export { ARRAY_NAMES, ImportFileSchema, type ArrayName, type ImportFile } from './schema.js';
export type { Progress } from './source.js';

/**
 * What an import reports as it goes: the reading, then each step of the merge, with the
 * file's records written to the school's tables so far.
 */
export type ImportProgress = (Progress & { phase: 'read'; written: number }) | (Progress & { phase: 'merge'; step: MergeStep; written: number });

/** A step of the merge, as a progress line names it: an array is the writing of its records. */
export type MergeStep = 'locking the school' | 'checking references' | ArrayName | 'deletions' | 'balances' | 'totals and positions' | 'commit' | 'statistics';

export interface ImportOptions {
  /** Each array present is the whole truth for its resource: the school's other records of it are deleted. */
  replace?: boolean;
  /** Tombstones of imports committed longer ago than this are pruned (SCHOOL_DATA_TOMBSTONE_DAYS). */
  tombstoneDays?: number;
  /** Called as the file is read, then as each step of the merge starts. */
  onProgress?: (progress: ImportProgress) => void;
}

export interface ImportSummary {
  ok: true;
  /** Records per array in the file. */
  counts: Record<ArrayName, number>;
  /** Rows deleted per array (by `deleted` or --replace). */
  deleted: Record<ArrayName, number>;
  /** Rows that really changed: written anew, overwritten with other values, deleted, or a contract's balance moved. */
  changes: number;
  /** The school's change seq this import took; null when it changed nothing (and wrote nothing). */
  seq: number | null;
  /**
   * What failed after the commit, if anything (the data is imported all the same): the
   * statistics refresh, or the wait for the servers to drop the key rows they kept.
   */
  afterCommit?: string;
}

export type ImportResult = ImportSummary | { ok: false; errors: ImportError[] };

/** Statistics are refreshed after imports that change at least this many rows. */
const STATISTICS_AFTER = 10_000;
const DEFAULT_TOMBSTONE_DAYS = 90;

/**
 * Imports `input` (a parsed import file) into the school `schoolId`. Records keep their
 * ids and are upserted, so importing the same data twice changes nothing the second time.
 * A bad file is an `{ ok: false }` value and nothing is written; a database failure
 * throws, after the transaction has rolled back.
 */
export function importData(db: Kysely<Database>, schoolId: string, input: unknown, options: ImportOptions = {}): Promise<ImportResult> {
  return runImport(db, schoolId, valueSource(input), options);
}

/** Imports a JSON file, read as a stream: memory grows with the file's ids, not its size. */
export function importFile(db: Kysely<Database>, schoolId: string, file: string, options: ImportOptions = {}): Promise<ImportResult> {
  return runImport(db, schoolId, fileSource(file, fs.statSync(file).size), options);
}

const perArray = (n: (a: ArrayName) => number) => Object.fromEntries(ARRAY_NAMES.map((a) => [a, n(a)])) as Record<ArrayName, number>;

/** A failure's message, for a line that says what failed after the commit. */
const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The refusal of an import into a school that is not there (or was removed while it ran). */
const noSchool = (schoolId: string): ImportResult => ({ ok: false, errors: [{ array: null, index: null, field: null, reason: `school "${schoolId}" does not exist` }] });

async function runImport(db: Kysely<Database>, schoolId: string, source: Source, options: ImportOptions): Promise<ImportResult> {
  const school = await db.selectFrom('schools').select('currency').where('id', '=', schoolId).executeTakeFirst();
  if (!school) return noSchool(schoolId);
  const conn = await openBulkConnection(db);
  const transaction = { begun: false, committed: false };
  try {
    const errors = new ErrorList();
    let progress: Progress = { records: 0, bytes: 0, totalBytes: null };
    let reading = true;
    let written = 0;
    let current: MergeStep | null = null;
    const report = () => {
      if (current !== null) options.onProgress?.({ ...progress, phase: 'merge', step: current, written });
    };
    const step: StepReport = (name, records = 0) => {
      current = name;
      if (!reading) report();
      written += records;
    };
    // PostgreSQL merges each array once it is staged, on the import's connection, while
    // the reading goes on: the merge's transaction and the school's lock come first.
    // SQLite's statements would hold the reading's thread: it merges after the reading.
    let work: Merge | null = null;
    const early = conn.dialect === 'postgres';
    if (early) {
      work = await beginMerge(conn, schoolId, source.estimate < STATISTICS_AFTER, transaction, step);
      if (!work) return noSchool(schoolId);
      current = null;
    }
    const stage = new Stage(
      conn,
      errors,
      early
        ? async (array) => {
            // A refused file is rolled back: nothing more is written. A contract's balance needs the file's payments.
            if (!errors.empty || stage.repeatsIds || (array === 'contracts' && !stage.isIndexed('payments'))) return;
            await mergeArray(conn, schoolId, work!, stage, array, step);
            current = null;
          }
        : undefined,
    );
    await stage.create();
    const intake = new FileIntake(errors, stage, schoolId, school.currency);
    try {
      await source.feed(intake, (p) => {
        progress = p;
        options.onProgress?.({ ...p, phase: 'read', written });
      });
      await intake.settle();
      reading = false;
      // An array's merge begun during the reading goes on: shown from now.
      report();
      await stage.finish();
    } catch (err) {
      await stage.abort();
      throw err;
    }
    intake.finish();
    if (!work) {
      const small = ARRAY_NAMES.reduce((n, a) => n + stage.staged[a] + intake.deletes[a].size, 0) < STATISTICS_AFTER;
      work = await beginMerge(conn, schoolId, small, transaction, step);
      if (!work) return noSchool(schoolId);
    }
    const result = await merge(conn, schoolId, intake, stage, errors, options, step, work, transaction);
    // The school's data version moved: every PostgreSQL server drops the key rows it kept with the old one.
    if (result.ok && result.seq !== null) {
      await announceKeyChanges(db).catch((err: unknown) => {
        result.afterCommit ??= `the API servers were not seen to take the new data at once (they do within 10 s): ${messageOf(err)}`;
      });
    }
    return result;
  } finally {
    if (transaction.begun && !transaction.committed) await conn.run(CompiledQuery.raw('rollback')).catch(() => undefined);
    // Once committed, the import's answer is the commit's: a connection that fails to close changes nothing of it.
    await conn.close().catch((err: unknown) => {
      if (!transaction.committed) throw err;
    });
  }
}

/**
 * The tables an import that changed something wrote: the arrays it staged rows of or
 * deleted from, contracts when payments moved their balances, the tables every such
 * import keeps (positions' blocks, the change log: marks, tombstones, batches), and the
 * day and month totals of payments and expenses when it wrote those.
 */
function writtenTables(staged: Record<ArrayName, number>, deleted: Record<ArrayName, number>): (keyof Database)[] {
  const arrays = ARRAY_NAMES.filter((a) => staged[a] > 0 || deleted[a] > 0);
  if (arrays.includes('payments') && !arrays.includes('contracts')) arrays.push('contracts');
  const totals = FINANCE_SIDES.filter((side) => arrays.includes(side.rows)).flatMap((side) => [side.totals, side.months]);
  return [...arrays, 'list_blocks', 'list_changes', 'tombstones', 'change_batches', 'schools', ...totals];
}

/** Reports that the merge begins `step`, which writes `records` of the file's records. */
type StepReport = (step: MergeStep, records?: number) => void;

/**
 * Begins the merge's transaction and takes the school's lock (which waits for another
 * import of the school to commit); the Merge it returns writes with the import's seq, and
 * is null when the school was removed meanwhile. `small`: an import of few rows.
 */
async function beginMerge(conn: BulkConnection, schoolId: string, small: boolean, transaction: { begun: boolean }, step: StepReport): Promise<Merge | null> {
  // SQLite: take the write lock now; a transaction that read first could not write later if another connection wrote meanwhile.
  await conn.run(CompiledQuery.raw(conn.dialect === 'sqlite' ? 'begin immediate' : 'begin'));
  transaction.begun = true;
  if (conn.dialect === 'postgres' && small) {
    // A small import's joins meet few rows, which the planner cannot know of ranges it
    // is given as parameters: JIT compiled them for longer than they ran.
    await conn.run(CompiledQuery.raw('set local jit = off'));
  }
  step('locking the school');
  const version = await lockSchool(conn, schoolId);
  if (version === null) return null;
  const work = new Merge(conn, schoolId, version + 1);
  await work.createTouched();
  return work;
}

/** Writes the staged rows of `array`, after noting what they touch (its totals, its balances, a contract's move). */
async function mergeArray(conn: BulkConnection, schoolId: string, work: Merge, stage: Stage, array: ArrayName, step: StepReport): Promise<void> {
  await work.noteStaged(array, stage.staged);
  if (array === 'contracts') {
    // Read before the contracts are written: after, a moved contract's old student is gone.
    work.contractsMove = await contractsMove(conn, schoolId);
    await work.prepareContracts();
  }
  step(array, stage.staged[array]);
  await work.upsert(array, stage.staged[array]);
}

async function merge(
  conn: BulkConnection,
  schoolId: string,
  intake: FileIntake,
  stage: Stage,
  errors: ErrorList,
  options: ImportOptions,
  step: StepReport,
  work: Merge,
  transaction: { committed: boolean },
): Promise<ImportResult> {
  const replace = options.replace === true;
  step('checking references');
  if (!errors.full) await checkOpenReferences(conn, schoolId, intake, errors);
  if (!errors.full && stage.staged.payments > 0) await checkPaymentContracts(conn, schoolId, errors);

  const deleting = ARRAY_NAMES.filter((a) => intake.deletes[a].size > 0 || (replace && intake.present.has(a)));
  for (const array of deleting) {
    if (intake.deletes[array].size === 0) continue;
    const loader = conn.load(goneTable(array), ['id', 'idx']);
    for (const row of intake.deletes[array]) await loader.write(row);
    await loader.end();
    await work.checkNotImported(array, errors);
  }
  if (errors.empty) {
    for (const array of deleting) await work.collectGone(array, replace && intake.present.has(array));
    await work.noteGone(new Set(deleting));
    for (const array of ARRAY_NAMES) if (stage.staged[array] > 0 && !work.written.has(array)) await mergeArray(conn, schoolId, work, stage, array, step);
    if (deleting.length > 0) step('deletions');
    for (const array of deleting) await work.delete(array);
    await checkDeletedUnreferred(conn, schoolId, work.deletedFrom, errors);
    if (work.contractsMove) await checkMovedContracts(conn, schoolId, errors);
    await checkMoneyBound(conn, schoolId, stage.staged, errors);
  }
  if (!errors.empty) return { ok: false, errors: errors.items };

  for (const array of ARRAY_NAMES) if (isListTable(array) && stage.staged[array] > 0) await work.dropTombstones(array);
  step('balances');
  const balances = await work.recomputeBalances();
  const changes = work.counts.inserted + work.counts.updated + work.counts.deleted + balances;
  const summary: ImportSummary = { ok: true as const, counts: perArray((a) => intake.counts[a]), deleted: perArray(() => 0), changes, seq: null as number | null };
  if (changes === 0) return summary;

  step('totals and positions');
  await work.refreshTotals();
  await work.placeChanges();
  await pruneTombstones(conn, schoolId, options.tombstoneDays ?? DEFAULT_TOMBSTONE_DAYS);
  // Removed by hand without its lock (docs/operations.md): nothing of it may be committed.
  if (!(await recordBatch(conn, schoolId, work.seq))) return noSchool(schoolId);
  step('commit');
  await conn.run(CompiledQuery.raw('commit'));
  transaction.committed = true;
  summary.seq = work.seq;
  summary.deleted = perArray((a) => work.deletedCounts[a]);
  // On the import's connection: the pool's statement timeout would cut a long ANALYZE short.
  if (changes >= STATISTICS_AFTER) {
    step('statistics');
    const written = writtenTables(stage.staged, summary.deleted);
    try {
      await refreshStatistics(conn.db, (q) => conn.run(q), written);
      // The totals are read by their keys alone (migration 0015), which needs their pages marked
      // all-visible; autovacuum may not come for a while to a large table where one school changed.
      const totals = FINANCE_SIDES.flatMap((side) => [side.totals, side.months]).filter((table) => written.includes(table));
      if (conn.dialect === 'postgres' && totals.length > 0) await conn.run(sql`vacuum ${sql.join(totals.map((table) => sql.id(table)))}`.compile(conn.db));
    } catch (err) {
      // Committed: the statistics are the database's own business from here (autovacuum's).
      summary.afterCommit = `the planner's statistics were not refreshed (autovacuum will): ${messageOf(err)}`;
    }
  }
  return summary;
}
