// @ts-check
/**
 * Keeping a copy in sync: a local SQLite file that holds every record of the school
 * (students, instructors, vehicles, lessons, contracts, payments, leads) as the API serves
 * it, brought up to date by the changes feed. The first run reads the whole feed (a full
 * copy); every later run reads only what changed since the cursor it saved, deletions
 * included. Each page of changes is applied in one transaction together with its cursor,
 * so a run that is killed resumes where the last applied page ended. A cursor the service
 * no longer honours (410) starts the copy over.
 *
 *   SCHOOL_DATA_KEY=service_pk_... node examples/sync-to-sqlite.mjs school.db
 *   SCHOOL_DATA_KEY=service_pk_... node examples/sync-to-sqlite.mjs school.db --every 60   # again each minute
 *
 * With --every, a run that finds the service unreachable or unavailable (after the client's
 * retries) says so and the next goes on; any other error ends the example.
 */
import Database from 'better-sqlite3';
import { CursorExpiredError, SchoolDataConnectionError, SchoolDataError } from '../client/dist/index.js';
import { connect, fail, run } from './connect.mjs';

const RESOURCES = ['students', 'instructors', 'vehicles', 'lessons', 'contracts', 'payments', 'leads'];

const args = process.argv.slice(2);
const [file, flag, seconds] = args;
if (!file || file.startsWith('-') || args.length > 3 || (flag !== undefined && (flag !== '--every' || !/^[1-9]\d*$/.test(seconds ?? '')))) {
  fail('usage: node examples/sync-to-sqlite.mjs FILE.db [--every SECONDS]');
}

// The settings (key, certificate) are checked before the copy is made: a run that cannot
// start leaves no empty database behind.
const client = connect({ throttle: true });

/** Opens the copy, made on the first run; a file that cannot be one (no such folder, not a database) ends the example in one line. */
function openCopy() {
  try {
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec(`create table if not exists sync_state (id integer primary key check (id = 1), cursor text)`);
    for (const r of RESOURCES) db.exec(`create table if not exists ${r} (id text primary key, record text not null)`);
    return db;
  } catch (err) {
    fail(`cannot open ${file} as the copy: ${err instanceof Error ? err.message : String(err)}`);
  }
}

const db = openCopy();

const upsert = Object.fromEntries(RESOURCES.map((r) => [r, db.prepare(`insert into ${r} (id, record) values (?, ?) on conflict (id) do update set record = excluded.record`)]));
const remove = Object.fromEntries(RESOURCES.map((r) => [r, db.prepare(`delete from ${r} where id = ?`)]));
const saveCursor = db.prepare('insert into sync_state (id, cursor) values (1, ?) on conflict (id) do update set cursor = excluded.cursor');
const savedCursor = () => /** @type {{ cursor: string } | undefined} */ (db.prepare('select cursor from sync_state where id = 1').get())?.cursor;

/** Applies one page of changes and its cursor, all or nothing. */
const applyPage = db.transaction((/** @type {import('../client/dist/index.js').ChangesPage} */ page) => {
  for (const change of page.changes) {
    if (change.change === 'delete') remove[change.resource].run(change.id);
    else upsert[change.resource].run(change.id, JSON.stringify(change.record));
  }
  saveCursor.run(page.cursor);
});

const startOver = db.transaction(() => {
  for (const r of RESOURCES) db.exec(`delete from ${r}`);
  db.exec('delete from sync_state');
});

async function syncOnce(client) {
  let upserts = 0;
  let deletions = 0;
  try {
    for await (const page of client.changes.list({ after: savedCursor() }).pages()) {
      applyPage(page);
      for (const change of page.changes) {
        if (change.change === 'delete') deletions++;
        else upserts++;
      }
    }
  } catch (err) {
    if (!(err instanceof CursorExpiredError)) throw err;
    process.stderr.write('the saved cursor has expired: starting the copy over\n');
    startOver();
    return syncOnce(client);
  }
  const held = RESOURCES.map((r) => /** @type {{ n: number }} */ (db.prepare(`select count(*) as n from ${r}`).get()).n).reduce((a, b) => a + b, 0);
  process.stdout.write(`${upserts} records written, ${deletions} deleted; the copy holds ${held} records\n`);
}

/** Connection failures that pass (the service restarting or out of reach for a while); not a certificate refused or a name that does not resolve. */
const OUTAGES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'timeout']);

/** Failures a later run may not meet, once the client's own retries did not outlast them. */
const passing = (err) => (err instanceof SchoolDataConnectionError && OUTAGES.has(err.code)) || (err instanceof SchoolDataError && (err.status === 503 || err.status === 429));

await run(async () => {
  for (;;) {
    try {
      await syncOnce(client);
    } catch (err) {
      // With --every, a service down for a while is waited out: the copy is as the last
      // applied page left it, and the next run goes on from there. Any other error ends it.
      if (!seconds || !passing(err)) throw err;
      process.stderr.write(`${err instanceof Error ? err.message : String(err)}: trying again in ${seconds} s\n`);
    }
    if (!seconds) break;
    await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
  }
  client.close();
  db.close();
});
