// @ts-check
/**
 * BI case: income, expense and profit of each of the last 12 months (this month so
 * far included) as a table, with a total. Months are calendar dates, so the service
 * reads them as whole days in the school's time zone, bounds inclusive. Money stays
 * exact: amounts are decimal strings, added up as integer kopecks (BigInt), never as
 * floating point.
 *
 *   SCHOOL_DATA_KEY=service_pk_... node examples/finance-monthly.mjs
 *
 * "This month" is this computer's: where its time zone is not the school's, give the
 * school's (TZ=Europe/Moscow node examples/finance-monthly.mjs), or the first hours of a
 * month count to the one before.
 */
import { connect, run } from './connect.mjs';

const pad = (n) => String(n).padStart(2, '0');

/** The first and last day of the month `back` months before the current one, as YYYY-MM-DD. */
function month(back) {
  const now = new Date();
  const first = new Date(now.getFullYear(), now.getMonth() - back, 1);
  const last = new Date(first.getFullYear(), first.getMonth() + 1, 0);
  const ymd = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return { label: `${first.getFullYear()}-${pad(first.getMonth() + 1)}${back === 0 ? ' (so far)' : ''}`, from: ymd(first), to: ymd(last) };
}

/** "-1200.50" -> -120050n */
function toMinor(amount) {
  const [, sign, units, cents] = /^(-?)(\d+)\.(\d{2})$/.exec(amount) ?? [];
  if (units === undefined) throw new Error(`not a money amount: ${amount}`);
  const minor = BigInt(units) * 100n + BigInt(cents);
  return sign ? -minor : minor;
}

/** -120050n -> "-1200.50" */
function fromMinor(minor) {
  const abs = minor < 0n ? -minor : minor;
  return `${minor < 0n ? '-' : ''}${abs / 100n}.${pad(Number(abs % 100n))}`;
}

function table(headers, rows) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  // The month column is left-aligned, amounts right-aligned.
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

await run(async () => {
  const client = connect();
  const rows = [];
  const total = { income: 0n, expense: 0n, profit: 0n };
  let currency = '';
  for (let back = 11; back >= 0; back--) {
    const m = month(back);
    const s = await client.reports.financeSummary({ period_from: m.from, period_to: m.to });
    currency = s.currency;
    for (const k of /** @type {const} */ (['income', 'expense', 'profit'])) total[k] += toMinor(s[k]);
    rows.push([m.label, s.income, s.expense, s.profit]);
  }
  rows.push(['total', fromMinor(total.income), fromMinor(total.expense), fromMinor(total.profit)]);
  client.close();
  process.stdout.write(`${table(['month', `income, ${currency}`, `expense, ${currency}`, `profit, ${currency}`], rows)}\n`);
});
