/**
 * The benchmark's reading of what the kernel counts for a server (bench/servers.ts,
 * osEvents and cpuSecondsByThread), against a real process: a child that sleeps in many
 * short waits and then spins must show its waits, and CPU on its main thread. Linux only,
 * where /proc is.
 * @store-free
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { cpuSecondsByThread, osEvents } from '../../bench/servers.js';

// 200 waits of 1 ms, then 300 ms of its own CPU time, then it says so and waits to be killed.
const PROGRAM = `
let n = 0;
const tick = () => {
  if (++n < 200) return setTimeout(tick, 1);
  const start = process.cpuUsage().user;
  while (process.cpuUsage().user - start < 300000);
  process.stdout.write('done\\n');
  setInterval(() => undefined, 1000);
};
tick();
`;

describe('bench: the kernel counts of a process', { skip: fs.existsSync('/proc/self/schedstat') ? false : 'needs Linux /proc' }, () => {
  it('counts the main thread waits and its CPU', async () => {
    const child = spawn(process.execPath, ['-e', PROGRAM], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const before = osEvents(child.pid!);
      await once(child.stdout, 'data');
      const after = osEvents(child.pid!);
      const threads = cpuSecondsByThread(child.pid!);
      assert.ok(after.voluntarySwitches - before.voluntarySwitches >= 100, `waits: ${after.voluntarySwitches - before.voluntarySwitches}`);
      assert.ok(after.forcedSwitches >= before.forcedSwitches);
      assert.ok(after.runQueueWaitNs >= before.runQueueWaitNs);
      assert.ok(after.pageFaults > 0);
      assert.ok(threads.main >= 0.25, `main thread CPU: ${threads.main} s`);
    } finally {
      child.kill();
    }
  });

  it('gives zeros for a process that is gone', () => {
    assert.deepEqual(osEvents(2 ** 22 + 1), { voluntarySwitches: 0, forcedSwitches: 0, runQueueWaitNs: 0, pageFaults: 0 });
  });
});
