/**
 * The service's logging pieces on their own: the batching destination (one write per
 * turn of the event loop, nothing lost or reordered when the destination takes part of
 * a batch or refuses for a while), the access log's budget for refusals, and the lines
 * of a dependency's outages.
 * @store-free
 */
import assert from 'node:assert/strict';
import { setImmediate as turn } from 'node:timers/promises';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import pino from 'pino';
import { LineBatcher } from '../../src/logger.js';
import { DependencyState, SHORT_OUTAGE_MS } from '../../src/ops/dependency.js';
import { AccessLog, REFUSAL_LINES_PER_SECOND, type AccessRecord } from '../../src/ops/request-log.js';

/** A destination that records what it takes, and can be told to take part of a batch or to refuse. */
function destination() {
  const writes: Buffer[] = [];
  const d = {
    writes,
    /** Bytes taken per call from now on (Infinity: all). */
    take: Infinity,
    refuse: null as string | null,
    text: () => Buffer.concat(writes).toString(),
    write: (_fd: number, data: Buffer): number => {
      if (d.refuse) throw Object.assign(new Error(d.refuse), { code: d.refuse });
      const n = Math.min(d.take, data.length);
      writes.push(Buffer.from(data.subarray(0, n)));
      return n;
    },
  };
  return d;
}

const line = (n: number) => `{"n":${n},"text":"строка ${n}"}\n`;

describe('LineBatcher: the log destination', () => {
  it('writes the lines of one turn of the event loop with one write, in order', async () => {
    const d = destination();
    const batcher = new LineBatcher(99, d.write);
    for (let i = 0; i < 50; i++) batcher.write(line(i));
    assert.equal(d.writes.length, 0, 'nothing written before the turn ends');
    await turn();
    assert.equal(d.writes.length, 1);
    assert.equal(d.text(), Array.from({ length: 50 }, (_, i) => line(i)).join(''));
    batcher.write(line(50));
    await turn();
    assert.equal(d.writes.length, 2, 'an idle destination gets a lone line at the end of its turn');
  });

  it('writes at once past 64 KiB instead of waiting for the turn to end', () => {
    const d = destination();
    const batcher = new LineBatcher(99, d.write);
    const big = `${'x'.repeat(1000)}\n`;
    for (let i = 0; i < 70; i++) batcher.write(big);
    assert.equal(d.writes.length, 1);
    assert.ok(d.writes[0]!.length >= 64 * 1024);
  });

  it('writes the rest of a batch the destination took part of, multi-byte characters whole', () => {
    const d = destination();
    d.take = 7;
    const batcher = new LineBatcher(99, d.write);
    for (let i = 0; i < 5; i++) batcher.write(line(i));
    batcher.flush();
    assert.ok(d.writes.length > 5);
    assert.equal(d.text(), Array.from({ length: 5 }, (_, i) => line(i)).join(''));
  });

  it('keeps what a full pipe refused (EAGAIN) and writes it, first, once the pipe takes it again', async () => {
    const d = destination();
    const batcher = new LineBatcher(99, d.write);
    d.refuse = 'EAGAIN';
    batcher.write(line(1));
    batcher.flush();
    batcher.write(line(2));
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(d.writes.length, 0);
    d.refuse = null;
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(d.text(), line(1) + line(2));
  });

  it('counts what a broken destination lost, and says so once lines go out again', () => {
    const d = destination();
    const batcher = new LineBatcher(99, d.write);
    d.refuse = 'EPIPE';
    batcher.write(line(1));
    batcher.flush();
    d.refuse = null;
    batcher.write(line(2));
    batcher.flush();
    const lines = d.text().trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(lines[0]!.msg, 'log output lost: the destination did not take it');
    assert.equal(lines[0]!.droppedBytes, Buffer.byteLength(line(1)));
    assert.deepEqual(lines[1], JSON.parse(line(2)));
  });

  it('starts a line of its own after a line the destination took part of before it failed (a full disk)', () => {
    const writes: Buffer[] = [];
    // The bytes the disk has room for.
    let room = 10;
    const batcher = new LineBatcher(99, (_fd, data) => {
      if (room === 0) throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
      const n = Math.min(room, data.length);
      room -= n;
      writes.push(Buffer.from(data.subarray(0, n)));
      return n;
    });
    batcher.write(line(1));
    batcher.flush();
    room = Infinity;
    batcher.write(line(2));
    batcher.flush();
    const [cut, lost, next, end] = Buffer.concat(writes).toString().split('\n');
    assert.equal(cut, line(1).slice(0, 10));
    assert.equal((JSON.parse(lost!) as { droppedBytes: number }).droppedBytes, Buffer.byteLength(line(1)) - 10);
    assert.deepEqual(JSON.parse(next!), JSON.parse(line(2)));
    assert.equal(end, '');
    // A disk that fills between two lines cuts none: no empty line before the report.
    writes.length = 0;
    room = Buffer.byteLength(line(3));
    batcher.write(line(3));
    batcher.write(line(4));
    batcher.flush();
    room = Infinity;
    batcher.write(line(5));
    batcher.flush();
    const after = Buffer.concat(writes).toString().split('\n');
    assert.deepEqual(after.map((l) => (l === '' ? '' : (JSON.parse(l) as { n?: number; msg?: string }).n ?? 'lost')), [3, 'lost', 5, '']);
  });

  it('answers pino\'s flush(callback)', () => {
    const d = destination();
    const batcher = new LineBatcher(99, d.write);
    batcher.write(line(1));
    let called = false;
    batcher.flush(() => (called = true));
    assert.ok(called);
    assert.equal(d.text(), line(1));
  });
});

describe('AccessLog: one line per request, a budget for refusals', () => {
  const record = (status: number, n = 0): AccessRecord => ({
    requestId: `r${n}`, method: 'GET', url: `/api/public/v1/students?n=${n}`, remoteAddress: '127.0.0.1', remotePort: 5000, status, responseTime: 1.5, caller: null,
  });

  it('logs every answer that passed the access check, and refusals up to the budget per second and status', () => {
    const lines: string[] = [];
    let now = 1_700_000_000_000;
    const log = new AccessLog((l) => lines.push(l), true, { now: () => now });
    for (let i = 0; i < 100; i++) log.write(record(200, i));
    for (let i = 0; i < 100; i++) log.write(record(401, i));
    for (let i = 0; i < 30; i++) log.write(record(429, i));
    const parsed = () => lines.map((l) => JSON.parse(l) as { msg: string; res?: { statusCode: number }; status?: number; count?: number });
    const completed = (status: number) => parsed().filter((l) => l.msg === 'request completed' && l.res?.statusCode === status).length;
    assert.equal(completed(200), 100);
    assert.equal(completed(401), REFUSAL_LINES_PER_SECOND);
    assert.equal(completed(429), REFUSAL_LINES_PER_SECOND);

    log.reportUnlogged();
    const summaries = parsed().filter((l) => l.msg === 'refusals not logged one by one');
    assert.deepEqual(summaries.map((s) => [s.status, s.count]), [[401, 100 - REFUSAL_LINES_PER_SECOND], [429, 30 - REFUSAL_LINES_PER_SECOND]]);

    // The next second has a budget of its own.
    now += 1000;
    log.write(record(401, 1000));
    assert.equal(completed(401), REFUSAL_LINES_PER_SECOND + 1);
  });

  it('gives a 404 before any key (a scanner outside the API) the refusals\' budget, and logs every 404 to a key', () => {
    const lines: string[] = [];
    const log = new AccessLog((l) => lines.push(l), true, { now: () => 1_700_000_000_000 });
    for (let i = 0; i < 50; i++) log.write({ ...record(404, i), url: `/wp-login.php?n=${i}` });
    for (let i = 0; i < 50; i++) log.write({ ...record(404, i), caller: { keyId: 'k1', schoolId: 's1' } });
    const completed = lines.map((l) => JSON.parse(l) as { msg: string; keyId?: string }).filter((l) => l.msg === 'request completed');
    assert.equal(completed.filter((l) => l.keyId === undefined).length, REFUSAL_LINES_PER_SECOND);
    assert.equal(completed.filter((l) => l.keyId === 'k1').length, 50);
    log.reportUnlogged();
    assert.deepEqual(JSON.parse(lines.at(-1)!), { level: 30, time: 1_700_000_000_000, pid: process.pid, status: 404, count: 50 - REFUSAL_LINES_PER_SECOND, msg: 'refusals not logged one by one' });
  });

  it('gives every 4xx before any key (a URL over the limit, a bad Host) and every 403 the refusals\' budget, and logs a 400 to a key', () => {
    const lines: string[] = [];
    const log = new AccessLog((l) => lines.push(l), true, { now: () => 1_700_000_000_000 });
    const key = { keyId: 'k1', schoolId: 's1' };
    for (let i = 0; i < 50; i++) log.write({ ...record(414, i), url: `/api/public/v1/students?x=${'y'.repeat(100)}${i}` });
    for (let i = 0; i < 50; i++) log.write(record(400, i));
    for (let i = 0; i < 50; i++) log.write({ ...record(403, i), caller: key });
    for (let i = 0; i < 50; i++) log.write({ ...record(400, i), caller: key });
    const completed = lines.map((l) => JSON.parse(l) as { msg: string; keyId?: string; res?: { statusCode: number } }).filter((l) => l.msg === 'request completed');
    const count = (status: number, keyId?: string) => completed.filter((l) => l.res?.statusCode === status && l.keyId === keyId).length;
    assert.deepEqual([count(414), count(400), count(403, 'k1'), count(400, 'k1')], [REFUSAL_LINES_PER_SECOND, REFUSAL_LINES_PER_SECOND, REFUSAL_LINES_PER_SECOND, 50]);
    log.reportUnlogged();
    const summaries = lines.map((l) => JSON.parse(l) as { msg: string; status?: number; count?: number }).filter((l) => l.msg === 'refusals not logged one by one');
    assert.deepEqual(summaries.map((s) => [s.status, s.count]).sort(), [[400, 50 - REFUSAL_LINES_PER_SECOND], [403, 50 - REFUSAL_LINES_PER_SECOND], [414, 50 - REFUSAL_LINES_PER_SECOND]]);
  });

  it('writes the line as docs/operations.md describes it, with the key masked in the URL', () => {
    const lines: string[] = [];
    const log = new AccessLog((l) => lines.push(l), true);
    log.write({ ...record(200), url: '/api/public/v1/students?api_key=service_pk_0123456789abcdef0123456789abcdef', caller: { keyId: 'k1', schoolId: 's1' } });
    assert.ok(lines[0]!.endsWith('\n'));
    const parsed = JSON.parse(lines[0]!) as Record<string, unknown>;
    assert.equal(parsed.level, 30);
    assert.equal(parsed.msg, 'request completed');
    assert.equal(parsed.pid, process.pid);
    assert.equal(parsed.requestId, 'r0');
    assert.equal(parsed.keyId, 'k1');
    assert.equal(parsed.schoolId, 's1');
    assert.deepEqual(parsed.req, { method: 'GET', url: '/api/public/v1/students?api_key=[redacted-key]', remoteAddress: '127.0.0.1', remotePort: 5000 });
    assert.deepEqual(parsed.res, { statusCode: 200 });
    assert.equal(parsed.responseTime, 1.5);
  });
});

describe('DependencyState: an outage logged by its changes of state', () => {
  const capture = () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    return { lines, logger: pino({ level: 'info' }, sink) };
  };
  const settle = () => new Promise((resolve) => setImmediate(resolve));

  it('logs a store that fails between answers once a minute, not twice per failure, and counts the short outages', async () => {
    const { lines, logger } = capture();
    let now = 1_700_000_000_000;
    const state = new DependencyState('postgres', 'data_unavailable', logger, () => now);
    const cause = new Error('timeout exceeded when trying to connect');
    // One failure in three, 10 ms apart, for two minutes.
    for (let i = 0; i < 12_000; i++) {
      now += 10;
      if (i % 3 === 0) state.refused(cause);
      else state.answered();
    }
    await settle();
    const msgs = lines.map((l) => l.msg);
    assert.ok(msgs.length >= 2 && msgs.length <= 6, msgs.join('\n'));
    assert.deepEqual(msgs.slice(0, 2), ['postgres unavailable: requests get 503 until it answers again', 'postgres available again']);
    // What the later lines count covers every refusal but those of the short outages still unlogged.
    const counted = lines.reduce((n, l) => n + Number(l.refused ?? 0) + Number(l.refusedInShortOutages ?? 0), 0);
    assert.ok(counted >= 4000 - 6000 / 3 && counted <= 4000, `refusals counted in the lines: ${counted}`);
    assert.ok(lines.slice(2).some((l) => Number(l.shortOutages) > 1000), JSON.stringify(lines.slice(2)));
    assert.equal(state.refusedTotal, 4000);
  });

  /** Redis's state after a first outage of 100 ms came and went; `clock.now` goes on from there. */
  const afterOneOutage = () => {
    const { lines, logger } = capture();
    const clock = { now: 1_700_000_000_000 };
    const state = new DependencyState('redis', 'rate_limit_unavailable', logger, () => clock.now);
    state.refused(new Error('first'));
    clock.now += 100;
    state.answered();
    return { lines, state, clock };
  };

  it('logs an outage that starts soon after another once it has lasted a few seconds, and its end', async () => {
    const { lines, state, clock } = afterOneOutage();
    // Down again a second later, and for good: logged SHORT_OUTAGE_MS into it, not a minute later.
    clock.now += 1000;
    for (let t = 0; t <= SHORT_OUTAGE_MS + 100; t += 50) {
      state.refused(new Error('second'));
      clock.now += 50;
    }
    state.answered();
    await settle();
    assert.deepEqual(lines.map((l) => [l.msg, l.cause ?? null]), [
      ['redis unavailable: requests get 503 until it answers again', 'first'],
      ['redis available again', null],
      ['redis unavailable: requests get 503 until it answers again', 'second'],
      ['redis available again', null],
    ]);
    assert.ok(Number(lines[3]!.downForMs) > SHORT_OUTAGE_MS, JSON.stringify(lines[3]));
  });

  it('logs an outage that started short and lasted with no request meanwhile, when it ends', async () => {
    const { lines, state, clock } = afterOneOutage();
    // 30 s later: three refusals, then no request for ten minutes while it stays down.
    clock.now += 30_000;
    for (let i = 0; i < 3; i++) state.refused(new Error('second'));
    clock.now += 600_000;
    state.answered();
    await settle();
    assert.deepEqual(lines.map((l) => [l.msg, l.cause ?? null, l.downForMs ?? null, l.refused ?? null]), [
      ['redis unavailable: requests get 503 until it answers again', 'first', null, null],
      ['redis available again', null, 100, 1],
      ['redis unavailable: requests get 503 until it answers again', 'second', 600_000, null],
      ['redis available again', null, 600_000, 3],
    ]);
  });

  it('asks a dependency that is down whether it answers again, and logs its end when it does, with no request to tell', async () => {
    const { lines, logger } = capture();
    const state = new DependencyState('postgres', 'data_unavailable', logger);
    let answers = false;
    let asked = 0;
    state.probeWith(() => {
      asked += 1;
      return answers ? Promise.resolve(true) : Promise.reject(new Error('still down'));
    }, 10);
    try {
      state.refused(new Error('connect ECONNREFUSED'));
      const asking = Date.now() + 2000;
      while (asked < 2 && Date.now() < asking) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.ok(state.down && asked >= 2, `asked ${asked} times`);
      answers = true;
      const deadline = Date.now() + 2000;
      while (state.down && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      await settle();
      assert.deepEqual(lines.map((l) => l.msg), ['postgres unavailable: requests get 503 until it answers again', 'postgres available again']);
      // Up again, it is asked no more.
      const after = asked;
      await new Promise((resolve) => setTimeout(resolve, 60));
      assert.equal(asked, after);
    } finally {
      state.close();
    }
  });

  it("takes a probe's answer for the outage it asked about only, and asks nothing once closed", async () => {
    const { logger } = capture();
    const state = new DependencyState('redis', 'rate_limit_unavailable', logger);
    let answer: ((value: boolean) => void) | undefined;
    let asked = 0;
    state.probeWith(() => {
      asked += 1;
      return new Promise<boolean>((resolve) => (answer = resolve));
    }, 10);
    try {
      state.refused(new Error('first'));
      const deadline = Date.now() + 3000;
      while (answer === undefined && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.ok(answer, 'asked');
      // A request ends that outage, another begins; then the first probe answers.
      state.answered();
      state.refused(new Error('second'));
      answer(true);
      await settle();
      assert.equal(state.down, true, 'the second outage goes on');
      state.close();
      const before = asked;
      state.refused(new Error('third'));
      await new Promise((resolve) => setTimeout(resolve, 1200));
      assert.equal(asked, before, 'closed: asked no more');
    } finally {
      state.close();
    }
  });
});
