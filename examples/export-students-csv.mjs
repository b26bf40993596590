// @ts-check
/**
 * Accounting / CRM case: every student of the school as CSV (RFC 4180: comma
 * separated, CRLF line ends, a field quoted when it holds a comma, a quote or a line
 * break, quotes doubled), written to stdout or to the file named as the argument.
 * Pages are fetched one after another while the rows stream out.
 *
 *   SCHOOL_DATA_KEY=service_pk_... node examples/export-students-csv.mjs students.csv
 *   SCHOOL_DATA_KEY=service_pk_... node examples/export-students-csv.mjs --status learning_practice > practice.csv
 */
import fs from 'node:fs';
import { once } from 'node:events';
import { connect, fail, run } from './connect.mjs';

const COLUMNS = ['id', 'full_name', 'phone', 'email', 'category', 'status', 'group_id', 'branch_id', 'created_at'];

/** One CSV field: null becomes empty, and a field that needs it is quoted. */
function field(value) {
  const text = value === null || value === undefined ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

const row = (values) => `${values.map(field).join(',')}\r\n`;

/** A command line this example does not take: one line, with how to call it. */
const usage = (message) => fail(`${message} (usage: node examples/export-students-csv.mjs [--status STATUS] [FILE])`);

await run(async () => {
  const args = process.argv.slice(2);
  const statusAt = args.indexOf('--status');
  const status = statusAt === -1 ? undefined : args.splice(statusAt, 2)[1];
  if (statusAt !== -1 && (status === undefined || status.startsWith('-'))) usage('--status needs a value, e.g. --status learning_practice');
  if (args.length > 1 || args.some((a) => a.startsWith('-'))) usage(`unexpected argument: ${args.find((a) => a.startsWith('-')) ?? args[1]}`);
  const file = args[0];
  // A long export paces itself by the RateLimit header instead of running into 429. Made
  // before the file: a setting it refuses ends the example with nothing written.
  const client = connect({ throttle: true });
  // A file is written under a temporary name and renamed when complete: never half an export.
  const partial = `${file}.partial`;
  const out = file ? fs.createWriteStream(partial) : process.stdout;
  if (file) {
    // A write that fails (no such folder, a full disk) ends the export in one line, and a
    // Ctrl-C ends it: neither leaves the partial file behind.
    out.on('error', (err) => {
      fs.rmSync(partial, { force: true });
      fail(`cannot write ${partial}: ${err.message}`);
    });
    for (const [signal, code] of /** @type {const} */ ([['SIGINT', 130], ['SIGTERM', 143]])) {
      process.once(signal, () => {
        fs.rmSync(partial, { force: true });
        process.exit(code);
      });
    }
  }
  let count = 0;
  const write = async (line) => {
    // Respect back-pressure: a slow disk or pipe slows the export, not memory.
    if (!out.write(line)) await once(out, 'drain');
  };
  try {
    for await (const student of client.students.list(status ? { status: /** @type {any} */ (status) } : {})) {
      if (count === 0) await write(row(COLUMNS));
      await write(row(COLUMNS.map((c) => student[c])));
      count += 1;
    }
    if (count === 0) await write(row(COLUMNS));
  } catch (err) {
    if (file) fs.rmSync(partial, { force: true });
    throw err;
  } finally {
    client.close();
  }
  if (file) {
    out.end();
    await once(out, 'finish');
    fs.renameSync(partial, file);
  }
  process.stderr.write(`${count} students exported${file ? ` to ${file}` : ''}\n`);
});
