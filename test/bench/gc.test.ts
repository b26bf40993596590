/**
 * The benchmark's reading of the server's GC histogram (bench/gc.ts), against what this
 * Node and prom-client really export: a change of names or labels must fail here, not
 * turn the report's GC lines into zeros.
 * @store-free
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { addGcDelta, emptyGc, gcFromMetrics } from '../../bench/gc.js';

// Collects the default metrics as the service does (src/ops/metrics.ts), keeps a few MB
// alive while it allocates more, one step per turn of the event loop (GC observers are
// told between turns), and prints the registry.
const PROGRAM = `
import { collectDefaultMetrics, Registry } from 'prom-client';
const register = new Registry();
collectDefaultMetrics({ register });
const keep = [];
let round = 0;
const step = () => {
  keep.push(Array.from({ length: 50000 }, (_, i) => ({ i, s: 'x' + i })));
  if (keep.length > 3) keep.shift();
  if (++round < 100) setImmediate(step);
  else setTimeout(async () => process.stdout.write(await register.metrics()), 50);
};
step();
`;

describe('bench: GC from the server metrics', () => {
  it('reads the full and young collections of a real process, and adds them up as deltas', () => {
    const text = execFileSync(process.execPath, ['--max-old-space-size=64', '--input-type=module', '-e', PROGRAM], { encoding: 'utf8' });
    const gc = gcFromMetrics(text);
    assert.ok(gc.major.count >= 1, `no full collection read from:\n${text}`);
    assert.ok(gc.minor.count >= 1, 'no young collection read');
    assert.ok(gc.major.totalMs > 0 && gc.major.over10ms <= gc.major.count);

    const slice = emptyGc();
    addGcDelta(slice, gcFromMetrics(''), gc);
    addGcDelta(slice, gc, gc);
    assert.deepEqual(slice, gc);
  });
});
