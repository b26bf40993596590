/**
 * The merge: in one transaction under the school's lock, the staged rows become the
 * school's rows. Only real changes are written: a staged row identical to the stored one
 * is left alone, and each row that does change (or is new) gets the import's change seq,
 * and its change mark moves to it. Then the deletions (with their tombstones), the day
 * totals and contract balances of what changed, the items of contracts whose balance
 * moved, and the lists' positions (src/importer/read-model.ts).
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { onPostgres } from '../db/index.js';
import { LIST_MODELS, type ListTable } from '../resources/items.js';
import { FINANCE_SIDES } from '../resources/finance/sides.js';
import type { TouchedDays } from './day-totals.js';
import type { ErrorList } from './errors.js';
import { refreshDayTotals } from './day-totals.js';
import { appendPositions, isListTable, itemOf, listLength, placeChanges, PLACE_AT_MOST } from './read-model.js';
import { ROW_COLUMNS } from './rows.js';
import type { Sql } from './run.js';
import { ARRAY_NAMES, type ArrayName } from './schema.js';
import { goneTable, MERGED_COLUMNS, stageTable } from './stage.js';
import { appendMarks, dropMarks, moveMarks } from './write.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tables are chosen at run time
type Untyped = Kysely<any>;

export interface MergeCounts {
  inserted: number;
  updated: number;
  deleted: number;
}

/**
 * The lists an import changed the order of, each with the positions its deleted and moved
 * rows held (null: more than placeChanges places one by one).
 */
type Vacated = Map<ListTable, number[] | null>;

/** The columns compared to tell a real change: every stored one but the key and the derived. */
function dataColumns(array: ArrayName): string[] {
  return ROW_COLUMNS[array].filter((c) => c !== 'school_id' && c !== 'id');
}

/** `stored` and `staged` differ in some data column (null-safe). */
function differs(db: Kysely<unknown>, array: ArrayName, stored: string, staged: string): RawBuilder<boolean> {
  const columns = dataColumns(array);
  const pair = (table: string) => sql.join(columns.map((c) => sql.ref(`${table}.${c}`)));
  if (onPostgres(db)) return sql<boolean>`(${pair(stored)}) is distinct from (${pair(staged)})`;
  return sql<boolean>`not (${sql.join(columns.map((c) => sql`${sql.ref(`${stored}.${c}`)} is ${sql.ref(`${staged}.${c}`)}`), sql` and `)})`;
}

/**
 * SQLite: a trigger of the connection's own (dropped after the one update it serves, or by
 * the rollback) that moves the change mark of each row of `list` whose seq changes.
 */
function marksMoved(list: ListTable): RawBuilder<unknown> {
  const resource = sql.lit(list);
  return sql`create temp trigger marks_moved after update of change_seq on main.${sql.table(list)}
             for each row when old.change_seq <> new.change_seq
             begin
               delete from list_changes where school_id = old.school_id and resource = ${resource} and change_seq = old.change_seq and id = old.id;
               insert into list_changes (school_id, resource, change_seq, id) values (new.school_id, ${resource}, new.change_seq, new.id);
             end`;
}

/** Contracts read and written per statement when their balances are made. */
const BALANCE_BATCH = 500;

/** A contract's balance over the payments joined as `p`: payments minus refunds, 0 for none. */
const CONTRACT_PAID = sql<number>`coalesce(sum(case when p.kind = 'refund' then -p.amount_minor else p.amount_minor end), 0)`;

export class Merge {
  private readonly vacated: Vacated = new Map();
  readonly touchedDays: TouchedDays = { payments: new Set(), expenses: new Set() };
  readonly counts: MergeCounts = { inserted: 0, updated: 0, deleted: 0 };
  /** Arrays with rows deleted by this import. */
  readonly deletedFrom = new Set<ArrayName>();
  readonly deletedCounts = Object.fromEntries(ARRAY_NAMES.map((a) => [a, 0])) as Record<ArrayName, number>;

  /** The arrays whose staged rows are written (upsert). */
  readonly written = new Set<ArrayName>();
  /** Whether a contract of the file moves to another student (contractsMove, read before the contracts are written). */
  contractsMove = false;

  private readonly q: Sql;
  private readonly schoolId: string;
  readonly seq: number;

  constructor(
    q: Sql,
    schoolId: string,
    seq: number,
  ) {
    this.q = q;
    this.schoolId = schoolId;
    this.seq = seq;
  }

  private get db(): Untyped {
    return this.q.db;
  }

  /** The table of the contracts whose balance the import may move (noteStaged, noteGone). */
  async createTouched(): Promise<void> {
    await this.q.run(sql`create temp table touched_contracts (id text primary key)`.compile(this.q.db));
  }

  /**
   * Before the staged rows of `array` are written: the days whose totals they touch, and
   * the contracts whose balance they may move (a payment's, before and after; a contract).
   */
  async noteStaged(array: ArrayName, staged: Record<ArrayName, number>): Promise<void> {
    if (staged[array] === 0) return;
    const stage = sql.table(stageTable(array));
    const side = FINANCE_SIDES.find((s) => s.rows === array);
    if (side) {
      const at = sql.ref(side.at);
      await this.noteDays(side.rows, sql`select distinct substr(${at}, 1, 10) as day from ${stage}`);
      await this.noteDays(side.rows, sql`select distinct substr(r.${at}, 1, 10) as day from ${sql.table(side.rows)} r join ${stage} s on s.id = r.id where r.school_id = ${this.schoolId}`);
    }
    const into = sql`insert into touched_contracts (id)`;
    if (array === 'payments') {
      await this.q.run(sql`${into} select distinct contract_id from ${stage} where contract_id is not null and contract_id not in (select id from touched_contracts)`.compile(this.q.db));
      await this.q.run(
        sql`${into} select distinct p.contract_id from payments p join ${stage} s on s.id = p.id where p.school_id = ${this.schoolId} and p.contract_id is not null and p.contract_id not in (select id from touched_contracts)`.compile(this.q.db),
      );
    }
    if (array === 'contracts') await this.q.run(sql`${into} select id from ${stage} where id not in (select id from touched_contracts)`.compile(this.q.db));
  }

  /** Before the rows of `gone_<array>` (`deleting` has those arrays) are deleted: the days and contracts they touch. */
  async noteGone(deleting: ReadonlySet<ArrayName>): Promise<void> {
    for (const side of FINANCE_SIDES) {
      if (!deleting.has(side.rows)) continue;
      const at = sql.ref(side.at);
      await this.noteDays(side.rows, sql`select distinct substr(r.${at}, 1, 10) as day from ${sql.table(side.rows)} r join ${sql.table(goneTable(side.rows))} g on g.id = r.id where r.school_id = ${this.schoolId}`);
    }
    if (deleting.has('payments')) {
      await this.q.run(
        sql`insert into touched_contracts (id) select distinct p.contract_id from payments p join ${sql.table(goneTable('payments'))} g on g.id = p.id where p.school_id = ${this.schoolId} and p.contract_id is not null and p.contract_id not in (select id from touched_contracts)`.compile(
          this.q.db,
        ),
      );
    }
  }

  private async noteDays(rows: keyof TouchedDays, query: RawBuilder<unknown>): Promise<void> {
    for (const row of (await this.q.run(query.compile(this.q.db))).rows) this.touchedDays[rows].add(row.day as string);
  }

  /** Writes the `staged` staged rows of `array` that are new or differ from the stored ones. */
  async upsert(array: ArrayName, staged: number): Promise<void> {
    const stage = sql.table(stageTable(array));
    const table = sql.table(array);
    const columns = dataColumns(array);
    this.written.add(array);
    const list = isListTable(array) ? array : null;
    const stored = list ? await this.noteMoves(list) : null;

    const merged = MERGED_COLUMNS[array] ?? [];
    const set = sql.join([...columns, ...merged, ...(list ? ['item'] : [])].map((c) => sql`${sql.ref(c)} = s.${sql.ref(c)}`));
    // A row whose order column changes leaves its place: -1 until placeChanges gives it one.
    const order = list ? sql.ref(LIST_MODELS[list].order) : null;
    const leaves = list ? sql`, pos = case when ${table}.${order} <> s.${order} then -1 else ${table}.pos end` : sql``;
    // When the file holds much of the list, its rows are updated in the list's order, the
    // order a first import stores them in: the table and the indexes of that order, the
    // positions' above all, are then rewritten page after page rather than at random.
    // SQLite is told to walk the list by its positions; PostgreSQL to read the staged rows
    // sorted and to find each stored one by its key (its hash join hands them over in no
    // order) (docs/decisions.md, "A large update walks the list in its order").
    const inOrder = list !== null && staged * 2 >= (await listLength(this.q, list, this.schoolId));
    const pg = onPostgres(this.q.db);
    // PostgreSQL meets the school's rows through the sorted staged rows: with the school named
    // on the list itself, a planner that thinks the school has few rows (statistics older than
    // its data) would scan the school's rows and sort the staged ones again for each.
    const byKey = inOrder && pg;
    const target = inOrder && !pg ? sql`${table} indexed by ${sql.id(`${array}_pos`)}` : table;
    const source = byKey ? sql`(select * from ${stage} where school_id = ${this.schoolId} order by ${order}, id) s` : sql`${stage} s`;
    const school = byKey ? sql`s.school_id` : sql`${this.schoolId}`;
    const run = (statement: RawBuilder<unknown>) => (byKey ? this.byKeyInOrder(statement) : this.q.run(statement.compile(this.q.db)));
    // A list that has none of the staged rows has nothing to update.
    if (stored !== 0 && list && pg) {
      // The changed rows with the seq they had, then their marks moved, in one statement (a
      // row this import had marked already keeps its mark and is counted once). Each stored
      // row is found once, by its key; the update takes it by its place (ctid): no other
      // statement writes the school's rows while the import holds its lock.
      const changed = sql`(select s.*, o.ctid as stored_row, o.change_seq as old_seq from ${source} join ${table} o on o.school_id = ${school} and o.id = s.id
                            where ${differs(this.q.db as never, array, 'o', 's')}) s`;
      const updated = await run(
        sql`with written as (
              update ${target} set ${set}, change_seq = ${this.seq}${leaves} from ${changed}
               where ${table}.ctid = s.stored_row and ${table}.school_id = ${school}
              returning ${table}.id, s.old_seq),
            gone as (${dropMarks(this.q, this.schoolId, list, sql`select old_seq, id from written where old_seq <> ${this.seq}`)})
            ${appendMarks(this.schoolId, list, this.seq, sql`select id from written where old_seq <> ${this.seq}`)}`,
      );
      this.counts.updated += updated.changed;
    } else if (stored !== 0) {
      // SQLite has no writes inside WITH: a trigger of this statement's own moves the marks.
      if (list) await this.q.run(marksMoved(list).compile(this.q.db));
      const update = sql`update ${target} set ${set}${list ? sql`, change_seq = ${this.seq}` : sql``}${leaves}
              from ${source}
             where ${table}.school_id = ${school} and ${table}.id = s.id and ${differs(this.q.db as never, array, array, 's')}`;
      this.counts.updated += (await run(update)).changed;
      if (list) await this.q.run(sql`drop trigger temp.marks_moved`.compile(this.q.db));
    }

    const all = ['school_id', 'id', ...columns, ...merged];
    const absent = sql`not exists (select 1 from ${table} r where r.school_id = ${this.schoolId} and r.id = s.id)`;
    // New rows go in in their list's order (or the key's): each index of the order, the
    // positions' above all, then grows at one end instead of at random pages.
    if (!list) {
      const inserted = await this.q.run(
        sql`insert into ${table} (${sql.join(all.map((c) => sql.ref(c)))}) select ${sql.join(all.map((c) => sql.ref(`s.${c}`)))} from ${stage} s where ${absent} order by s.id`.compile(this.q.db),
      );
      this.counts.inserted += inserted.changed;
      return;
    }
    // The staged ids are unique (a file that repeats one is refused before its merge), so
    // the rows the list does not have are the staged rows less the stored ones.
    const count = staged - stored!;
    if (count === 0) return;
    // New rows that all come after the list's last row get their positions here (an import
    // that adds at the end, or the first import); otherwise placeChanges places them.
    const first = (
      await this.q.run(
        sql`select case when exists (select 1 from ${table} r where r.school_id = ${this.schoolId}
                                        and (r.${order}, r.id) > (select s.${order}, s.id from ${stage} s where ${absent} order by s.${order}, s.id limit 1))
                        then 1 else 0 end as before`.compile(this.q.db),
      )
    ).rows[0]!;
    const appends = Number(first.before) === 0;
    const pos = appends ? (await appendPositions(this.q, list, this.schoolId, count))(sql<number>`(row_number() over (order by s.${order}, s.id) - 1)`) : sql`-1`;
    const insert = sql`insert into ${table} (${sql.join([...all, 'item', 'change_seq', 'pos'].map((c) => sql.ref(c)))})
          select ${sql.join([...all, 'item'].map((c) => sql.ref(`s.${c}`)))}, ${this.seq}, ${pos} from ${stage} s where ${absent} order by s.${order}, s.id`;
    // Their marks: on PostgreSQL from the rows the insert returns; SQLite's first.
    if (!pg) await this.q.run(appendMarks(this.schoolId, list, this.seq, sql`select s.id from ${stage} s where ${absent}`).compile(this.q.db));
    const statement = pg ? sql`with written as (${insert} returning id) ${appendMarks(this.schoolId, list, this.seq, sql`select id from written`)}` : insert;
    const inserted = await this.q.run(statement.compile(this.q.db));
    this.counts.inserted += inserted.changed;
    if (!appends) this.vacate(list, []);
  }

  /**
   * Runs `update` (PostgreSQL) with only nested-loop joins allowed, so that, its source
   * being the only side that can lead, it takes the source's rows in their order; the
   * planner's settings are put back after it (if it fails, the rollback puts them back).
   */
  private async byKeyInOrder(update: RawBuilder<unknown>): Promise<{ changed: number }> {
    const joins = ['enable_hashjoin', 'enable_mergejoin'];
    const before = (await this.q.run(sql`select ${sql.join(joins.map((j) => sql`current_setting(${j}) as ${sql.id(j)}`))}`.compile(this.q.db))).rows[0]!;
    await this.q.run(sql`select ${sql.join(joins.map((j) => sql`set_config(${j}, 'off', true)`))}`.compile(this.q.db));
    const updated = await this.q.run(update.compile(this.q.db));
    await this.q.run(sql`select ${sql.join(joins.map((j) => sql`set_config(${j}, ${before[j] as string}, true)`))}`.compile(this.q.db));
    return updated;
  }

  /** Notes that `list` needs placeChanges, with more positions its rows left (null: too many to list). */
  private vacate(list: ListTable, positions: number[] | null): void {
    const known = this.vacated.has(list) ? this.vacated.get(list)! : [];
    const all = known === null || positions === null ? null : [...known, ...positions];
    this.vacated.set(list, all !== null && all.length > PLACE_AT_MOST ? null : all);
  }

  /** The positions of up to PLACE_AT_MOST rows of `list` that `rows` (a join of the list as r) selects; null when there are more. */
  private async positionsOf(rows: RawBuilder<unknown>): Promise<number[] | null> {
    const found = (await this.q.run(sql`select r.pos ${rows} limit ${PLACE_AT_MOST + 1}`.compile(this.q.db))).rows.map((r) => Number(r.pos));
    return found.length > PLACE_AT_MOST ? null : found;
  }

  /**
   * Rows whose place in the list changes (their order column): the positions they leave.
   * Returns how many of the staged rows the school has (when all, none is new).
   */
  private async noteMoves(list: ListTable): Promise<number> {
    const order = sql.ref(LIST_MODELS[list].order);
    const joined = sql`from ${sql.table(list)} r join ${sql.table(stageTable(list))} s on s.id = r.id where r.school_id = ${this.schoolId}`;
    const counted = (await this.q.run(sql`select count(*) as stored, sum(case when r.${order} <> s.${order} then 1 else 0 end) as moved ${joined}`.compile(this.q.db))).rows[0]!;
    if (Number(counted.moved ?? 0) > 0) this.vacate(list, await this.positionsOf(sql`${joined} and r.${order} <> s.${order}`));
    return Number(counted.stored);
  }

  /** An id of `deleted.<array>` that the file also imports is an error: a record is either imported or deleted. */
  async checkNotImported(array: ArrayName, errors: ErrorList): Promise<void> {
    const { rows } = await this.q.run(
      sql`select g.idx, g.id, s.idx as imported from ${sql.table(goneTable(array))} g join ${sql.table(stageTable(array))} s on s.id = g.id
           order by g.idx limit ${errors.room}`.compile(this.q.db),
    );
    for (const row of rows) {
      errors.add({ array: `deleted.${array}`, index: Number(row.idx), field: null, reason: `"${row.id as string}" is also imported by this file (${array}[${Number(row.imported)}]): a record is either imported or deleted` });
    }
  }

  /** Fills `gone_<array>` with the ids the file deletes that the school has (and, with --replace, what the file leaves out). */
  async collectGone(array: ArrayName, replace: boolean): Promise<void> {
    const gone = sql.table(goneTable(array));
    const table = sql.table(array);
    // An id the school does not have is no deletion: replaying a delta is safe.
    await this.q.run(sql`delete from ${gone} where not exists (select 1 from ${table} r where r.school_id = ${this.schoolId} and r.id = ${gone}.id)`.compile(this.q.db));
    if (replace) {
      await this.q.run(
        sql`insert into ${gone} (id, idx) select r.id, null from ${table} r
             where r.school_id = ${this.schoolId}
               and not exists (select 1 from ${sql.table(stageTable(array))} s where s.id = r.id)
               and not exists (select 1 from ${gone} g where g.id = r.id)`.compile(this.q.db),
      );
    }
    // Neither store analyzes temporary tables by itself: without statistics, a join of the
    // school's rows with these few ids was planned as a scan of the school's rows.
    await this.q.run(sql`analyze ${gone}`.compile(this.q.db));
  }

  /** Deletes the rows in `gone_<array>`; a list's deleted records leave a tombstone. */
  async delete(array: ArrayName): Promise<void> {
    const gone = sql.table(goneTable(array));
    const table = sql.table(array);
    if (isListTable(array)) {
      const vacated = await this.positionsOf(sql`from ${table} r join ${gone} g on g.id = r.id where r.school_id = ${this.schoolId}`);
      if (vacated !== null && vacated.length === 0) return;
      this.vacate(array, vacated);
      await this.q.run(
        sql`insert into tombstones (school_id, resource, id, change_seq) select ${this.schoolId}, ${array}, id, ${this.seq} from ${gone}`.compile(this.q.db),
      );
      await this.q.run(dropMarks(this.q, this.schoolId, array, sql`select r.change_seq, r.id from ${table} r join ${gone} g on g.id = r.id where r.school_id = ${this.schoolId}`).compile(this.q.db));
    }
    const deleted = await this.q.run(sql`delete from ${table} where school_id = ${this.schoolId} and id in (select id from ${gone})`.compile(this.q.db));
    if (deleted.changed > 0) this.deletedFrom.add(array);
    this.deletedCounts[array] += deleted.changed;
    this.counts.deleted += deleted.changed;
  }

  /** A record imported again after its deletion is a row again: its tombstone goes. */
  async dropTombstones(array: ListTable): Promise<void> {
    await this.q.run(
      sql`delete from tombstones where school_id = ${this.schoolId} and resource = ${array} and id in (select id from ${sql.table(stageTable(array))})`.compile(this.q.db),
    );
  }

  /**
   * Before the contracts are written: each staged contract's balance as it will be once the
   * import is merged (the file's payments, and the school's that the file neither imports
   * nor deletes), and its item made with it, so a contract is written once. Most were
   * staged with theirs (FileIntake); only the others' items are made again.
   */
  async prepareContracts(): Promise<void> {
    const stage = sql.table(stageTable('contracts'));
    const stagedPayments = sql.table(stageTable('payments'));
    const gone = sql`not exists (select 1 from ${sql.table(goneTable('payments'))} g where g.id = p.id)`;
    // Once the file's payments are written, the school's payments are those the balances
    // add up (an index-only read per contract); before, the staged ones stand in for theirs.
    const payments = this.written.has('payments')
      ? sql`payments p on p.school_id = ${this.schoolId} and p.contract_id = c.id and ${gone}`
      : sql`(select s.contract_id, s.kind, s.amount_minor from ${stagedPayments} s
             union all
             select p.contract_id, p.kind, p.amount_minor from payments p
              where p.school_id = ${this.schoolId} and p.contract_id in (select id from ${stage})
                and not exists (select 1 from ${stagedPayments} s where s.id = p.id)
                and ${gone}) p on p.contract_id = c.id`;
    // A contract staged with another balance than this loses its item, made again below.
    await this.q.run(
      sql`update ${stage} set paid_minor = b.paid, item = null
            from (select c.id, ${CONTRACT_PAID} as paid from ${stage} c left join ${payments} group by c.id) b
           where ${stage}.id = b.id and (${stage}.paid_minor is null or ${stage}.paid_minor <> b.paid)`.compile(this.q.db),
    );
    const columns = sql.join([...ROW_COLUMNS.contracts, 'paid_minor'].map((c) => sql.ref(c)));
    let after = '';
    for (;;) {
      const { rows } = await this.q.run(sql`select ${columns} from ${stage} where item is null and id > ${after} order by id limit ${BALANCE_BATCH}`.compile(this.q.db));
      if (rows.length === 0) return;
      const values = rows.map((row) => sql`(${row.id}, ${itemOf('contracts', { ...row, paid_minor: Number(row.paid_minor) })})`);
      await this.q.run(sql`with v(id, item) as (values ${sql.join(values)}) update ${stage} set item = v.item from v where ${stage}.id = v.id`.compile(this.q.db));
      after = rows[rows.length - 1]!.id as string;
    }
  }

  /**
   * contracts.paid_minor = payments minus refunds, for the contracts the import touched;
   * a contract whose balance moved has changed too (its item shows paid and debt). Each
   * such contract gets its balance and item in one write (those the import wrote were
   * written with theirs: prepareContracts). Returns how many balances moved.
   */
  async recomputeBalances(): Promise<number> {
    await this.q.run(sql`create temp table balances (id text primary key, paid bigint not null)`.compile(this.q.db));
    await this.q.run(
      sql`insert into balances (id, paid)
          select c.id, ${CONTRACT_PAID}
            from touched_contracts c left join payments p on p.school_id = ${this.schoolId} and p.contract_id = c.id
           group by c.id`.compile(this.q.db),
    );
    // Those whose stored balance differs (most were written with theirs), a batch at a time
    // in the order of their ids: however many moved (every contract of the school, for a
    // --replace of its payments), no more than a batch is held.
    let moved = 0;
    for (let after = ''; ; ) {
      const { rows } = await this.q.run(
        sql`select c.*, b.paid as balance from balances b join contracts c on c.school_id = ${this.schoolId} and c.id = b.id
             where c.paid_minor <> b.paid and b.id > ${after}
             order by b.id limit ${BALANCE_BATCH}`.compile(this.q.db),
      );
      if (rows.length === 0) break;
      after = rows.at(-1)!.id as string;
      // A contract the import wrote (merged before all the file's payments and deletions
      // were known) is a change already counted.
      moved += rows.filter((row) => Number(row.change_seq) !== this.seq).length;
      const values = rows.map(({ balance: paid, ...row }) => {
        const balance = Number(paid);
        const item = itemOf('contracts', { ...row, paid_minor: balance });
        return sql`(${row.id}, cast(${balance} as bigint), ${item})`;
      });
      await moveMarks(this.q, this.schoolId, 'contracts', this.seq, rows.map((row) => ({ id: row.id as string, seq: Number(row.change_seq) })));
      if (values.length > 0) {
        await this.q.run(
          sql`with v(id, paid, item) as (values ${sql.join(values)})
              update contracts set paid_minor = v.paid, item = v.item, change_seq = ${this.seq}
                from v
               where contracts.school_id = ${this.schoolId} and contracts.id = v.id`.compile(this.q.db),
        );
      }
    }
    return moved;
  }

  async refreshTotals(): Promise<void> {
    await refreshDayTotals(this.q, this.schoolId, this.touchedDays);
  }

  /** Puts right the positions of the lists whose order the import changed. */
  async placeChanges(): Promise<void> {
    for (const [list, vacated] of this.vacated) await placeChanges(this.q, list, this.schoolId, vacated);
  }
}
