/**
 * Import files for the import scenario: one school's data in the import format, made by
 * the data set's generator (generate.ts) and written one record per line, so a file of a
 * million records never sits in memory. `changed` writes the same records with a data
 * field of each one changed (a re-export after a season of edits), for an import into a
 * school that already holds the first file.
 */
import fs from 'node:fs';
import { once } from 'node:events';
import { formatMoney } from '../../src/domain/money.js';
import { COLUMNS, schoolRows, type Table } from './generate.js';
import { apportion, type DatasetShape, type SchoolShape } from './shape.js';

/** Arrays in the order the generator makes them; payments come before their contracts, as a file may have them. */
type Record_ = Record<string, unknown>;

/** One school whose data is about `records` records, in the proportions of the data set's large school. */
export function importShape(records: number): SchoolShape {
  // Per student: 1 student, 1 contract, 2 payments, 4 lessons, 0.4 leads, 0.1 expenses, and staff.
  const perStudent = 1 + 1 + 2 + 4 + 0.4 + 0.1 + 2 / 20 + 1 / 25 + 1 / 400;
  const students = Math.max(10, Math.round(records / perStudent));
  const [lessons, payments] = apportion(6 * students, [4, 2]);
  return {
    index: 0,
    id: 'import-bench',
    plan: 'VIP',
    timezone: 'Europe/Moscow',
    students,
    lessons: lessons!,
    payments: payments!,
    leads: Math.round(students * 0.4),
    expenses: Math.round(students * 0.1),
    instructors: Math.max(2, Math.ceil(students / 20)),
    groups: Math.max(1, Math.ceil(students / 25)),
    branches: Math.max(1, Math.ceil(students / 400)),
  };
}

const ROTATE: Record<string, string[]> = {
  status: ['enrolled', 'learning_theory', 'learning_practice', 'graduated'],
  method: ['cash', 'card', 'bank_transfer', 'online'],
};

/** A generated row as an import record (the reverse of src/importer/rows.ts). */
function toRecord(table: Table, row: unknown[], changed: boolean): Record_ {
  const columns = COLUMNS[table] as readonly string[];
  const r: Record_ = {};
  columns.forEach((c, i) => (r[c] = row[i]));
  delete r.school_id;
  if (table === 'instructors') {
    r.categories = JSON.parse(r.categories as string);
    r.is_active = r.is_active === 1;
  }
  if (table === 'lessons') delete r.duration_minutes;
  if (table === 'contracts') {
    delete r.paid_minor;
    r.price = formatMoney(r.price_minor as number);
    delete r.price_minor;
  }
  if (table === 'payments' || table === 'expenses') {
    r.amount = formatMoney(r.amount_minor as number);
    delete r.amount_minor;
  }
  if (changed) {
    if (table === 'students') r.status = ROTATE.status![(ROTATE.status!.indexOf(r.status as string) + 1) % 4];
    else if (table === 'payments') r.method = ROTATE.method![(ROTATE.method!.indexOf(r.method as string) + 1) % 4];
    else if ('full_name' in r) r.full_name = `${r.full_name as string} (изм.)`;
    else if (table === 'lessons' || table === 'contracts' || table === 'vehicles') r.status = table === 'lessons' ? 'cancelled' : table === 'contracts' ? 'terminated' : 'repair';
    else if (table === 'expenses') r.comment = 'исправлено';
    else if ('name' in r) r.name = `${r.name as string} (изм.)`;
  }
  return r;
}

/** Writes the file; returns its number of records. */
export async function writeImportFile(file: string, shape: DatasetShape, school: SchoolShape, changed = false): Promise<number> {
  const out = fs.createWriteStream(file);
  let current: Table | null = null;
  let records = 0;
  let first = true;
  const write = async (text: string) => {
    if (!out.write(text)) await once(out, 'drain');
  };
  await write('{');
  for (const [table, row] of schoolRows(shape, school)) {
    if (table !== current) {
      await write(`${current === null ? '' : '\n],'}\n"${table}": [\n`);
      current = table;
      first = true;
    }
    await write(`${first ? '' : ',\n'}${JSON.stringify(toRecord(table, row, changed))}`);
    first = false;
    records += 1;
  }
  await write(`${current === null ? '' : '\n]'}\n}\n`);
  out.end();
  await once(out, 'finish');
  return records;
}
