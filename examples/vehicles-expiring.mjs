// @ts-check
/**
 * Operations case: training vehicles whose compulsory motor insurance or technical
 * inspection ends within the next 30 days (or has already ended), soonest first.
 * Decommissioned vehicles are left out; a vehicle with no date on record is listed
 * as such, since nobody can tell when it runs out.
 *
 *   SCHOOL_DATA_KEY=service_pk_... node examples/vehicles-expiring.mjs [days]
 */
import { connect, fail, run } from './connect.mjs';

const DAY_MS = 86_400_000;

/** Today's calendar date on this machine, as a UTC midnight timestamp. */
function today() {
  const now = new Date();
  return Date.UTC(now.getFullYear(), now.getMonth(), now.getDate());
}

/** Whole days from today to a YYYY-MM-DD date (negative when it has passed). */
const daysUntil = (date) => Math.round((Date.parse(`${date}T00:00:00Z`) - today()) / DAY_MS);

function when(days) {
  if (days < 0) return `ended ${-days} day(s) ago`;
  if (days === 0) return 'ends today';
  return `ends in ${days} day(s)`;
}

await run(async () => {
  const args = process.argv.slice(2);
  if (args.length > 1 || (args[0] !== undefined && !/^\d{1,6}$/.test(args[0]))) {
    fail('days must be a whole number from 0, e.g. 30 (usage: node examples/vehicles-expiring.mjs [DAYS])');
  }
  const horizon = Number(args[0] ?? 30);
  const client = connect();
  const found = [];
  for await (const v of client.vehicles.list()) {
    if (v.status === 'decommissioned') continue;
    const checks = [
      ['insurance', v.insurance_valid_until],
      ['inspection', v.inspection_valid_until],
    ];
    for (const [what, until] of checks) {
      if (until === null) found.push({ v, what, until: '-', days: -Infinity, note: 'no date on record' });
      else if (daysUntil(until) <= horizon) found.push({ v, what, until, days: daysUntil(until), note: when(daysUntil(until)) });
    }
  }
  client.close();
  found.sort((a, b) => a.days - b.days);
  if (found.length === 0) {
    process.stdout.write(`No insurance or inspection ends within ${horizon} days.\n`);
    return;
  }
  const rows = found.map(({ v, what, until, note }) => [v.plate_number, `${v.brand} ${v.model}`, v.status, what, until, note]);
  const headers = ['plate', 'vehicle', 'status', 'what', 'valid until', ''];
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) => cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  process.stdout.write(`${[line(headers), ...rows.map(line)].join('\n')}\n`);
});
