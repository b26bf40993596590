/**
 * The initial schema: schools and their keys, and every resource of the public API.
 *
 * Each index serves one filter + order the API uses, led by school_id so that every
 * query is a range scan inside one school. Orders end with `id` so paging is stable.
 */
import { sql, type CreateTableBuilder, type Kysely } from 'kysely';

const PLANS = `('Free', 'Standart', 'Profi', 'VIP')`;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;
type Table = CreateTableBuilder<string, never>;

/** A table owned by a school: (school_id, id) is its key, and the school must exist. */
function schoolOwned(db: Db, name: string): Table {
  return db.schema
    .createTable(name)
    .addColumn('school_id', 'text', (c) => c.notNull().references('schools.id').onDelete('cascade'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint(`${name}_pk`, ['school_id', 'id'] as never[]);
}

async function index(db: Db, table: string, name: string, columns: string[]): Promise<void> {
  await db.schema.createIndex(`${table}_${name}`).on(table).columns(columns).execute();
}

export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('schools')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('plan', 'text', (c) => c.notNull().check(sql.raw(`plan in ${PLANS}`)))
    .addColumn('timezone', 'text', (c) => c.notNull().defaultTo('Europe/Moscow'))
    .addColumn('currency', 'text', (c) => c.notNull().defaultTo('RUB'))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('school_id', 'text', (c) => c.notNull().references('schools.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('hint', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_used_at', 'text')
    .addColumn('request_count', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('revoked_at', 'text')
    .execute();
  await index(db, 'api_keys', 'school', ['school_id', 'created_at']);

  await schoolOwned(db, 'branches').addColumn('name', 'text', (c) => c.notNull()).execute();

  await schoolOwned(db, 'groups')
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('category', 'text', (c) => c.notNull())
    .addColumn('branch_id', 'text')
    .execute();

  await schoolOwned(db, 'students')
    .addColumn('full_name', 'text', (c) => c.notNull())
    .addColumn('phone', 'text', (c) => c.notNull())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('category', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('group_id', 'text', (c) => c.notNull())
    .addColumn('branch_id', 'text')
    .addColumn('birth_date', 'text')
    .addColumn('instructor_id', 'text')
    .addColumn('transmission', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await index(db, 'students', 'created', ['school_id', 'created_at', 'id']);
  await index(db, 'students', 'status', ['school_id', 'status', 'created_at', 'id']);
  await index(db, 'students', 'category', ['school_id', 'category', 'created_at', 'id']);
  await index(db, 'students', 'status_category', ['school_id', 'status', 'category', 'created_at', 'id']);
  await index(db, 'students', 'group', ['school_id', 'group_id', 'created_at', 'id']);

  await schoolOwned(db, 'instructors')
    .addColumn('full_name', 'text', (c) => c.notNull())
    .addColumn('phone', 'text', (c) => c.notNull())
    .addColumn('email', 'text')
    .addColumn('categories', 'text', (c) => c.notNull())
    .addColumn('is_active', 'integer', (c) => c.notNull())
    .addColumn('branch_id', 'text')
    .addColumn('vehicle_id', 'text')
    .addColumn('hired_on', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await index(db, 'instructors', 'created', ['school_id', 'created_at', 'id']);
  await index(db, 'instructors', 'active', ['school_id', 'is_active', 'created_at', 'id']);

  await schoolOwned(db, 'vehicles')
    .addColumn('plate_number', 'text', (c) => c.notNull())
    .addColumn('brand', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('year', 'integer', (c) => c.notNull())
    .addColumn('category', 'text', (c) => c.notNull())
    .addColumn('transmission', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('instructor_id', 'text')
    .addColumn('branch_id', 'text')
    .addColumn('insurance_policy_number', 'text')
    .addColumn('insurance_valid_from', 'text')
    .addColumn('insurance_valid_until', 'text')
    .addColumn('inspection_valid_until', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await index(db, 'vehicles', 'created', ['school_id', 'created_at', 'id']);

  await schoolOwned(db, 'lessons')
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('starts_at', 'text', (c) => c.notNull())
    .addColumn('ends_at', 'text', (c) => c.notNull())
    .addColumn('duration_minutes', 'integer', (c) => c.notNull())
    .addColumn('instructor_id', 'text', (c) => c.notNull())
    .addColumn('student_id', 'text')
    .addColumn('group_id', 'text')
    .addColumn('vehicle_id', 'text')
    .addColumn('branch_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await index(db, 'lessons', 'starts', ['school_id', 'starts_at', 'id']);
  await index(db, 'lessons', 'instructor', ['school_id', 'instructor_id', 'starts_at', 'id']);
  await index(db, 'lessons', 'student', ['school_id', 'student_id', 'starts_at', 'id']);

  await schoolOwned(db, 'contracts')
    .addColumn('number', 'text', (c) => c.notNull())
    .addColumn('student_id', 'text', (c) => c.notNull())
    .addColumn('category', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('signed_on', 'text', (c) => c.notNull())
    .addColumn('price_minor', 'bigint', (c) => c.notNull())
    .addColumn('paid_minor', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await index(db, 'contracts', 'created', ['school_id', 'created_at', 'id']);
  await index(db, 'contracts', 'student', ['school_id', 'student_id', 'created_at', 'id']);

  await schoolOwned(db, 'payments')
    .addColumn('student_id', 'text', (c) => c.notNull())
    .addColumn('contract_id', 'text')
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('method', 'text', (c) => c.notNull())
    .addColumn('amount_minor', 'bigint', (c) => c.notNull())
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('paid_at', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  // The list's order index also carries what the finance summary sums, so the summary
  // never visits the table and one index serves both.
  await index(db, 'payments', 'paid', ['school_id', 'paid_at', 'id', 'method', 'kind', 'amount_minor']);
  await index(db, 'payments', 'contract', ['school_id', 'contract_id', 'kind', 'amount_minor']);
  await index(db, 'payments', 'student', ['school_id', 'student_id', 'kind', 'amount_minor']);

  await schoolOwned(db, 'leads')
    .addColumn('full_name', 'text', (c) => c.notNull())
    .addColumn('phone', 'text', (c) => c.notNull())
    .addColumn('email', 'text')
    .addColumn('category', 'text')
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('student_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await index(db, 'leads', 'created', ['school_id', 'created_at', 'id']);
  await index(db, 'leads', 'status', ['school_id', 'status', 'created_at', 'id']);

  await schoolOwned(db, 'expenses')
    .addColumn('category', 'text', (c) => c.notNull())
    .addColumn('amount_minor', 'bigint', (c) => c.notNull())
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('spent_at', 'text', (c) => c.notNull())
    .addColumn('comment', 'text')
    .execute();
  await index(db, 'expenses', 'spent', ['school_id', 'spent_at', 'category', 'amount_minor']);
}

export async function down(db: Db): Promise<void> {
  for (const table of ['expenses', 'leads', 'payments', 'contracts', 'lessons', 'vehicles', 'instructors', 'students', 'groups', 'branches', 'api_keys', 'schools']) {
    await db.schema.dropTable(table).execute();
  }
}
