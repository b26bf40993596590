/**
 * Table types as Kysely sees them. The same shapes hold on SQLite and PostgreSQL:
 * - timestamps are text `YYYY-MM-DDTHH:MM:SSZ` (UTC) and dates text `YYYY-MM-DD`, so
 *   ordering and period comparisons are plain string comparisons on both engines;
 * - money is integer minor units (`*_minor`), never a float;
 * - booleans are 0/1 integers;
 * - every school-owned row is keyed by (school_id, id), so ids given by one school's
 *   import can never collide with, or overwrite, another school's rows.
 */
import type { Generated, ColumnType, Insertable, Selectable } from 'kysely';

/**
 * The read model every list's table carries (migration 0003, src/resources/items.ts): the
 * row's list item as JSON text, and its position in its list's order within its school
 * (a block's first position plus the row's slot in it: migration 0009);
 * and the school's change seq of the import that last changed the row's data or item
 * (migration 0006), which names the row's mark in `list_changes` (migration 0016). The
 * importer writes all three with the row, and the mark.
 */
export interface Listed {
  item: string;
  pos: ColumnType<number, number | undefined, number>;
  change_seq: ColumnType<number, number | undefined, number>;
}

export interface SchoolsTable {
  id: string;
  name: string;
  plan: string;
  timezone: string;
  currency: string;
  created_at: string;
  /**
   * The school's change sequence (migrations 0004, 0006): the seq of the last import that
   * changed something. It keys the API's stored responses.
   */
  data_version: Generated<number>;
  /** The stamp of that import (migration 0011): a seq taken again after a restore has another. */
  data_stamp: Generated<string>;
  /** The highest change seq whose tombstones were pruned (0: none yet). */
  tombstones_dropped_seq: Generated<number>;
  /**
   * The place (resource, id) of the last tombstone pruned in that seq, in the feed's order
   * (migration 0013); ('zz', ''), the place after the whole seq, when not known.
   */
  tombstones_dropped_resource: Generated<string>;
  tombstones_dropped_id: Generated<string>;
}

export interface ApiKeysTable {
  id: string;
  school_id: string;
  name: string;
  key_hash: string;
  hint: string;
  created_at: string;
  last_used_at: string | null;
  request_count: ColumnType<number, number | undefined, number>;
  revoked_at: string | null;
  /** Options (migration 0008, docs/api/keys.md): null is "no limit". */
  scopes: ColumnType<string | null, string | null | undefined, string | null>;
  expires_at: ColumnType<string | null, string | null | undefined, string | null>;
  allow: ColumnType<string | null, string | null | undefined, string | null>;
  rolled_from: ColumnType<string | null, string | null | undefined, string | null>;
  /** When a rolled key's overlap ends. */
  retires_at: ColumnType<string | null, string | null | undefined, string | null>;
  /** Why revoked_at is set: revoked, rolled, expired, unused. */
  revoke_reason: ColumnType<string | null, string | null | undefined, string | null>;
}

/** One key event (migration 0008): what happened to which key, who did it, when. */
export interface KeyEventsTable {
  seq: Generated<number>;
  school_id: string;
  key_id: string;
  event: string;
  /** A director's email, or `operator`. */
  actor: string;
  at: string;
  /** JSON object with the event's particulars, or null. */
  detail: string | null;
}

export interface BranchesTable {
  school_id: string;
  id: string;
  name: string;
}

export interface GroupsTable {
  school_id: string;
  id: string;
  name: string;
  category: string;
  branch_id: string | null;
}

export interface StudentsTable extends Listed {
  school_id: string;
  id: string;
  full_name: string;
  phone: string;
  email: string;
  category: string;
  status: string;
  group_id: string;
  branch_id: string | null;
  birth_date: string | null;
  instructor_id: string | null;
  transmission: string | null;
  created_at: string;
}

export interface InstructorsTable extends Listed {
  school_id: string;
  id: string;
  full_name: string;
  phone: string;
  email: string | null;
  /** JSON array of category strings. */
  categories: string;
  is_active: number;
  branch_id: string | null;
  vehicle_id: string | null;
  hired_on: string | null;
  created_at: string;
}

export interface VehiclesTable extends Listed {
  school_id: string;
  id: string;
  plate_number: string;
  brand: string;
  model: string;
  year: number;
  category: string;
  transmission: string;
  status: string;
  instructor_id: string | null;
  branch_id: string | null;
  insurance_policy_number: string | null;
  insurance_valid_from: string | null;
  insurance_valid_until: string | null;
  inspection_valid_until: string | null;
  created_at: string;
}

export interface LessonsTable extends Listed {
  school_id: string;
  id: string;
  type: string;
  status: string;
  starts_at: string;
  ends_at: string;
  duration_minutes: number;
  instructor_id: string;
  student_id: string | null;
  group_id: string | null;
  vehicle_id: string | null;
  branch_id: string | null;
  created_at: string;
}

export interface ContractsTable extends Listed {
  school_id: string;
  id: string;
  number: string;
  student_id: string;
  category: string;
  status: string;
  signed_on: string;
  price_minor: number;
  /** Payments minus refunds on this contract; derived by the importer in the same transaction. */
  paid_minor: ColumnType<number, number | undefined, number>;
  currency: string;
  created_at: string;
}

export interface PaymentsTable extends Listed {
  school_id: string;
  id: string;
  student_id: string;
  contract_id: string | null;
  kind: string;
  method: string;
  amount_minor: number;
  currency: string;
  paid_at: string;
  created_at: string;
}

export interface LeadsTable extends Listed {
  school_id: string;
  id: string;
  full_name: string;
  phone: string;
  email: string | null;
  category: string | null;
  source: string;
  status: string;
  student_id: string | null;
  created_at: string;
}

export interface ExpensesTable {
  school_id: string;
  id: string;
  category: string;
  amount_minor: number;
  currency: string;
  spent_at: string;
  comment: string | null;
}

/** Payments minus refunds of one method on one UTC day (migration 0005, src/importer/day-totals.ts). */
export interface PaymentDaysTable {
  school_id: string;
  day: string;
  method: string;
  amount_minor: number;
}

/** Expenses of one category on one UTC day. */
export interface ExpenseDaysTable {
  school_id: string;
  day: string;
  category: string;
  amount_minor: number;
}

/** The day totals of one UTC month (`YYYY-MM`), summed (migration 0015). */
export interface PaymentMonthsTable {
  school_id: string;
  month: string;
  method: string;
  amount_minor: number;
}

/** The same of the expense day totals. */
export interface ExpenseMonthsTable {
  school_id: string;
  month: string;
  category: string;
  amount_minor: number;
}

/**
 * The change mark of one record of a list's table (migration 0016): the seq of the import
 * that last changed it, the same as the row's `change_seq`; all four columns are the key.
 */
export interface ListChangesTable {
  school_id: string;
  resource: string;
  change_seq: number;
  id: string;
}

/** One deleted record of a list's table: which import (seq) deleted it (migration 0006). */
export interface TombstonesTable {
  school_id: string;
  resource: string;
  id: string;
  change_seq: number;
}

/** One import that changed something: its seq and when it committed (UTC, whole seconds). */
export interface ChangeBatchesTable {
  school_id: string;
  seq: number;
  committed_at: string;
  /** Random, per batch ('' before migration 0011). */
  stamp: Generated<string>;
}

/**
 * A block of positions of one school's list (migration 0009, src/resources/items.ts): its
 * rows hold the positions first_pos .. first_pos + n - 1 in the list's order, and the
 * first of them is the list's row number first_rank (from 0). Blocks are never empty.
 */
export interface ListBlocksTable {
  school_id: string;
  list: string;
  first_pos: number;
  first_rank: number;
  n: number;
}

/** Which version of a derived part (items, positions, day totals) the stored rows hold. */
export interface ReadModelVersionsTable {
  part: string;
  version: number;
}

/** A director of one school; signs in to the cabinet with `email` (stored lower-cased). */
export interface DirectorsTable {
  id: string;
  school_id: string;
  email: string;
  /** `scrypt$N$r$p$salt$hash` (base64url): the parameters travel with the hash. */
  password_hash: string;
  created_at: string;
}

/** A cabinet sign-in; `id` is the SHA-256 (hex) of the token in the cookie, never the token. */
export interface CabinetSessionsTable {
  id: string;
  director_id: string;
  csrf_token: string;
  created_at: string;
  idle_expires_at: string;
  expires_at: string;
}

/** A one-time form token accepted in a session (create or roll a key): sent again, it is refused. */
export interface CabinetFormNoncesTable {
  session_id: string;
  nonce: string;
}

/** One row: the id that names this database's usage queue in Redis. */
export interface UsageQueueTable {
  id: string;
}

/** A PostgreSQL server that keeps the keys it looked up, and until when it may (src/db/watch.ts). */
export interface KeyWatchersTable {
  id: string;
  /** Epoch milliseconds, PostgreSQL's clock. */
  lease_until: number;
}

/** A barrier a watcher has seen: the writer that sent it waits for every live watcher's row. */
export interface KeyAcksTable {
  watcher: string;
  barrier: string;
}

/** A batch of usage counts moved from Redis, by its id: applied once (src/access/usage.ts). */
export interface UsageBatchesTable {
  id: string;
  applied_at: string;
}

/** A key's requests on one UTC day (`YYYY-MM-DD`). */
export interface KeyDaysTable {
  key_id: string;
  day: string;
  requests: ColumnType<number, number, number>;
}

/** Per key, how many requests its log has had written: the next slot is this modulo the ring's size. */
export interface KeyRequestNextTable {
  key_id: string;
  next: number;
}

/** A key's request log: a ring of KEY_REQUESTS_KEPT slots (src/access/usage.ts). */
export interface KeyRequestsTable {
  key_id: string;
  /** The ring's slot: the request's number in the key's log modulo the ring's size. */
  slot: number;
  request_id: string;
  /** Epoch milliseconds: the order of the log. */
  at_ms: ColumnType<number, number, number>;
  method: string;
  /** Path and query as received (a key value in it masked). */
  target: string;
  status: number;
  address: string;
  duration_ms: number;
}

export interface Database {
  schools: SchoolsTable;
  api_keys: ApiKeysTable;
  key_events: KeyEventsTable;
  branches: BranchesTable;
  groups: GroupsTable;
  students: StudentsTable;
  instructors: InstructorsTable;
  vehicles: VehiclesTable;
  lessons: LessonsTable;
  contracts: ContractsTable;
  payments: PaymentsTable;
  leads: LeadsTable;
  expenses: ExpensesTable;
  payment_days: PaymentDaysTable;
  expense_days: ExpenseDaysTable;
  payment_months: PaymentMonthsTable;
  expense_months: ExpenseMonthsTable;
  directors: DirectorsTable;
  cabinet_sessions: CabinetSessionsTable;
  cabinet_form_nonces: CabinetFormNoncesTable;
  list_changes: ListChangesTable;
  tombstones: TombstonesTable;
  change_batches: ChangeBatchesTable;
  read_model_versions: ReadModelVersionsTable;
  usage_queue: UsageQueueTable;
  usage_batches: UsageBatchesTable;
  key_days: KeyDaysTable;
  key_requests: KeyRequestsTable;
  key_request_next: KeyRequestNextTable;
  list_blocks: ListBlocksTable;
  key_watchers: KeyWatchersTable;
  key_acks: KeyAcksTable;
}

/** A school as the CLI and the cabinet show it (the data version is the API's own bookkeeping). */
export type School = Omit<Selectable<SchoolsTable>, 'data_version' | 'data_stamp' | 'tombstones_dropped_seq' | 'tombstones_dropped_resource' | 'tombstones_dropped_id'>;
/** The columns of a School, for selects. */
export const SCHOOL_COLUMNS = ['id', 'name', 'plan', 'timezone', 'currency', 'created_at'] as const satisfies readonly (keyof School)[];
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type NewApiKey = Insertable<ApiKeysTable>;

/** A row of `table` as selected: the named columns, with their selected types. */
export type Selected<T extends keyof Database, C extends keyof Selectable<Database[T]>> = Pick<Selectable<Database[T]>, C>;
