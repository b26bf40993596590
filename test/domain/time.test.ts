/**
 * Timestamps of the import format: the stored form (`YYYY-MM-DDTHH:MM:SSZ`), read digit by
 * digit, means what the same instant written with a `+00:00` offset (read by the general
 * RFC 3339 path) means, valid or not; and a valid one is kept as it is written.
 * @store-free
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { localDate, nextDay, normaliseTimestamp, parseDateTime, startOfLocalDay } from '../../src/domain/time.js';
import { resolvePeriod } from '../../src/resources/common/period.js';

const digits = (n: number) => fc.array(fc.integer({ min: 0, max: 9 }), { minLength: n, maxLength: n }).map((d) => d.join(''));
/** Any digits in the stored form's places: impossible months, days and hours included. */
const storedForm = fc
  .tuple(digits(4), digits(2), digits(2), digits(2), digits(2), digits(2))
  .map(([y, mo, d, h, mi, s]) => `${y}-${mo}-${d}T${h}:${mi}:${s}Z`);

describe('timestamps in the stored form', () => {
  it('parse as the same instant written with an offset', () => {
    fc.assert(
      fc.property(storedForm, (text) => {
        assert.equal(parseDateTime(text), parseDateTime(`${text.slice(0, -1)}+00:00`), text);
      }),
      { numRuns: 20_000 },
    );
  });

  it('are kept as written when valid, refused when not', () => {
    fc.assert(
      fc.property(storedForm, (text) => {
        assert.equal(normaliseTimestamp(text), parseDateTime(`${text.slice(0, -1)}+00:00`) === null ? null : text, text);
      }),
      { numRuns: 20_000 },
    );
  });

  it('edge cases', () => {
    assert.equal(normaliseTimestamp('2024-02-29T23:59:59Z'), '2024-02-29T23:59:59Z');
    assert.equal(normaliseTimestamp('2023-02-29T00:00:00Z'), null);
    // Outside the four-digit years once in UTC: refused, not stored as "+010000-...".
    assert.equal(normaliseTimestamp('9999-12-31T23:00:00-05:00'), null);
    assert.equal(normaliseTimestamp('0000-01-01T00:00:00+01:00'), null);
    assert.equal(normaliseTimestamp('9999-12-31T23:59:59Z'), '9999-12-31T23:59:59Z');
    // A period ending on the last day of year 9999 is open at its end.
    assert.equal(resolvePeriod(undefined, '9999-12-31', 'UTC').until, null);
    assert.equal(resolvePeriod(undefined, '9999-12-31T23:59:59Z', 'Europe/Moscow').until, null);
    assert.equal(resolvePeriod(undefined, '9999-12-30', 'UTC').until, '9999-12-31T00:00:00Z');
    // One that starts before the year 0000 in UTC (its first day east of Greenwich) starts at
    // its first second: a bound in six digits would not sort as a time on every collation.
    assert.equal(resolvePeriod('0000-01-01', undefined, 'Asia/Tokyo').from, '0000-01-01T00:00:00Z');
    assert.equal(resolvePeriod('0000-01-01', undefined, 'America/New_York').from, '0000-01-01T04:56:02Z');
    // An end before it: an empty period at that second.
    assert.deepEqual(resolvePeriod('0000-01-01T00:00:00+01:00', '0000-01-01T00:00:00+01:00', 'UTC'), { from: '0000-01-01T00:00:00Z', until: '0000-01-01T00:00:00Z' });
    // One that starts after it holds nothing, a fraction of a second after it included.
    for (const start of ['9999-12-31T23:59:59.001Z', '9999-12-31T23:59:59.5Z', '9999-12-31T23:59:59-00:01']) {
      const range = resolvePeriod(start, undefined, 'UTC');
      assert.ok(range.from !== null && range.until !== null && range.from >= range.until, `${start}: ${JSON.stringify(range)}`);
    }
    // A date the clocks skipped whole is an empty period, not a refused one.
    const skipped = resolvePeriod('2011-12-30', '2011-12-30', 'Pacific/Apia');
    assert.equal(skipped.from, skipped.until);
    assert.deepEqual(resolvePeriod('2011-12-29', '2011-12-30', 'Pacific/Apia'), { from: '2011-12-29T10:00:00Z', until: '2011-12-30T10:00:00Z' });
    assert.throws(() => resolvePeriod('2011-12-31', '2011-12-30', 'Pacific/Apia'), /period_from/);
    // Bounds within one millisecond are ordered by all their digits, whatever their offsets.
    assert.throws(() => resolvePeriod('2026-03-28T22:59:59.99999Z', '2026-03-28T22:59:59.9999Z', 'UTC'), /period_from/);
    assert.throws(() => resolvePeriod('2026-03-29T01:59:59.1239+03:00', '2026-03-28T22:59:59.12389Z', 'UTC'), /period_from/);
    // A date-time in a date's last millisecond is within the date, whatever its digits.
    assert.doesNotThrow(() => resolvePeriod('2026-03-01T23:59:59.9999Z', '2026-03-01', 'UTC'));
    assert.throws(() => resolvePeriod('2026-03-02T00:00:00Z', '2026-03-01', 'UTC'), /period_from/);
    for (const [from, to] of [['2026-03-28T22:59:59.9999Z', '2026-03-28T22:59:59.99999Z'], ['2026-03-28T22:59:59.1230Z', '2026-03-28T22:59:59.123Z'], ['2026-03-28T22:59:59.1234567891Z', '2026-03-28T22:59:59.1234567891Z']]) {
      assert.doesNotThrow(() => resolvePeriod(from, to, 'UTC'), `${from} .. ${to}`);
    }
    assert.equal(normaliseTimestamp('2026-13-01T00:00:00Z'), null);
    assert.equal(normaliseTimestamp('2026-01-01T24:00:00Z'), null);
    assert.equal(normaliseTimestamp('2026-01-01T00:60:00Z'), null);
    assert.equal(normaliseTimestamp('2026-01-01T00:00:60Z'), null);
    assert.equal(parseDateTime('2026-11-26T08:00:00Z'), Date.UTC(2026, 10, 26, 8));
    assert.equal(normaliseTimestamp('2026-11-26T11:00:00+03:00'), '2026-11-26T08:00:00Z');
    assert.equal(normaliseTimestamp('2026-11-26t08:00:00z'), '2026-11-26T08:00:00Z');
    assert.equal(normaliseTimestamp('2026-11-26T08:00:00.500Z'), null);
    // A fraction of zeros is whole seconds, however long; any other digit, however far, is not.
    assert.equal(normaliseTimestamp('2026-11-26T08:00:00.000000000000Z'), '2026-11-26T08:00:00Z');
    assert.equal(normaliseTimestamp('2026-11-26T08:00:00.000000001Z'), null);
    assert.equal(normaliseTimestamp('2026-11-26T08:00:00.0000000000001+03:00'), null);
    assert.equal(parseDateTime('2026-11-26T08:00:00.25Z'), Date.UTC(2026, 10, 26, 8) + 250);
    const between = parseDateTime('2026-11-26T08:00:00.0000001Z')!;
    assert.ok(between > Date.UTC(2026, 10, 26, 8) && between < Date.UTC(2026, 10, 26, 8) + 1);
    assert.equal(normaliseTimestamp('٢٠٢٦-11-26T08:00:00Z'), null);
  });
});

describe('the years 0-99', () => {
  // Date.UTC reads them as 1900-1999; ISO text is read with its four digits by Date.parse.
  it('are read as written, in every form', () => {
    fc.assert(
      fc.property(storedForm, (text) => {
        const valid = parseDateTime(text);
        if (valid !== null) assert.equal(valid, Date.parse(text), text);
      }),
      { numRuns: 20_000 },
    );
    assert.equal(parseDateTime('0050-06-15T12:00:00Z'), Date.parse('0050-06-15T12:00:00Z'));
    assert.equal(normaliseTimestamp('0050-01-01T00:00:00+03:00'), '0049-12-31T21:00:00Z');
    assert.equal(normaliseTimestamp('0000-03-01T01:00:00+03:00'), '0000-02-29T22:00:00Z');
  });

  it('as local days and periods', () => {
    assert.equal(startOfLocalDay([50, 1, 1], 'UTC'), Date.parse('0050-01-01T00:00:00Z'));
    assert.equal(startOfLocalDay([0, 1, 1], 'UTC'), Date.parse('0000-01-01T00:00:00Z'));
    assert.equal(localDate(Date.parse('0099-12-31T23:00:00Z'), 'Asia/Tokyo'), '0100-01-01');
    assert.equal(localDate(Date.parse('0000-01-01T12:00:00Z'), 'UTC'), '0000-01-01');
    assert.deepEqual(resolvePeriod('0099-01-01', '0099-12-31', 'UTC'), { from: '0099-01-01T00:00:00Z', until: '0100-01-01T00:00:00Z' });
  });
});

describe('the next calendar day', () => {
  const iso = ([y, m, d]: [number, number, number]) => `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
  it('is 24 hours after the day, across month, leap-day and year ends, years 0-99 included', () => {
    fc.assert(
      fc.property(fc.date({ min: new Date(Date.parse('0000-01-01T00:00:00Z')), max: new Date(Date.parse('9998-12-31T00:00:00Z')), noInvalidDate: true }), (at) => {
        const day = at.toISOString().slice(0, 10);
        const ymd = day.split('-').map(Number) as [number, number, number];
        assert.equal(iso(nextDay(ymd)), new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10), day);
      }),
      { numRuns: 20_000 },
    );
    assert.deepEqual(nextDay([2024, 2, 28]), [2024, 2, 29]);
    assert.deepEqual(nextDay([2100, 2, 28]), [2100, 3, 1]);
    assert.deepEqual(nextDay([99, 12, 31]), [100, 1, 1]);
  });
});

describe('the start of a local day', () => {
  const zones = Intl.supportedValuesOf('timeZone');
  it('is the first second whose local date is that day, in every zone, across clock changes', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...zones),
        fc.integer({ min: Date.UTC(1970, 0, 1) / 1000, max: Date.UTC(2040, 0, 1) / 1000 }),
        (zone, seconds) => {
          const day = localDate(seconds * 1000, zone);
          const start = startOfLocalDay(day.split('-').map(Number) as [number, number, number], zone);
          assert.ok(start <= seconds * 1000, `${zone} ${day}`);
          assert.equal(localDate(start, zone), day, `${zone} ${day}`);
          assert.ok(localDate(start - 1000, zone) < day, `${zone} ${day}`);
        },
      ),
      { numRuns: 20_000 },
    );
  });

  it('where the clocks jump over midnight or pass it twice', () => {
    const start = (ymd: [number, number, number], zone: string) => new Date(startOfLocalDay(ymd, zone)).toISOString();
    // Havana and Santiago skip from 00:00 to 01:00: the day begins at the jump.
    assert.equal(start([2026, 3, 8], 'America/Havana'), '2026-03-08T05:00:00.000Z');
    assert.equal(start([2026, 9, 6], 'America/Santiago'), '2026-09-06T04:00:00.000Z');
    // Havana goes back from 01:00 to 00:00: the first midnight.
    assert.equal(start([2026, 11, 1], 'America/Havana'), '2026-11-01T04:00:00.000Z');
    // Samoa skipped 2011-12-30 whole: an empty day, starting where the next one does.
    assert.equal(start([2011, 12, 30], 'Pacific/Apia'), start([2011, 12, 31], 'Pacific/Apia'));
    assert.deepEqual(resolvePeriod('2026-03-07', '2026-03-07', 'America/Havana'), { from: '2026-03-07T05:00:00Z', until: '2026-03-08T05:00:00Z' });
  });
});
