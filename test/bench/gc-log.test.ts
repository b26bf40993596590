/**
 * The reading of V8's `--trace-gc-nvp` lines (bench/gc-log.ts), against what this Node
 * really prints: a renamed field must fail here, not turn the summary into zeros.
 * @store-free
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { gcSlices } from '../../bench/gc-log.js';

// Keeps a few MB alive while it allocates more, so that young collections keep part of
// what they find and promote some of it, and ends with a full collection.
const PROGRAM = `
const keep = [];
for (let round = 0; round < 60; round++) {
  keep.push(Array.from({ length: 50000 }, (_, i) => ({ i, s: 'x' + i })));
  if (keep.length > 3) keep.shift();
}
globalThis.gc();
`;

describe('bench: the GC trace summary', () => {
  it('reads the young and full collections of a real process', () => {
    const text = execFileSync(process.execPath, ['--trace-gc-nvp', '--expose-gc', '--max-semi-space-size=1', '-e', PROGRAM], { encoding: 'utf8' });
    const slices = gcSlices(text, 3600);
    assert.equal(slices.length, 1, text.slice(0, 2000));
    const [all] = slices;
    assert.ok(all!.scavenges >= 5, 'no young collections read');
    assert.ok(all!.fullCollections >= 1, 'no full collection read');
    assert.ok(all!.survivedPercent > 0 && all!.survivedPercent <= 100, `kept ${all!.survivedPercent} %`);
    assert.ok(all!.allocatedBytes > 10e6 && all!.promotedBytes > 0 && all!.promotedBytes < all!.allocatedBytes);
    assert.ok(all!.pauseMs > 0);
  });

  // One young and one full collection in each form, the fields the summary reads; the other line's form is never printed by the Node running the test.
  const PAIRS = [
    '[1:0x1:0]      120 ms: pause=2.5 mutator=10.0 gc=s reduce_memory=0 allocated=4000000 promoted=100000 new_space_survive_rate_=12.5 other=1',
    '[1:0x1:0]     1500 ms: pause=7.5 mutator=30.0 gc=mc reduce_memory=0 allocated=0 promoted=0',
  ];
  const JSON_LINES = [
    '[1:0x1:0]      120 ms: GC: {"pause":2.5,"gc":"s","allocated":4000000,"promoted":100000,"new_space_survive_rate":12.5,"nested":{"a":1}}',
    '[1:0x1:0]     1500 ms: GC: {"pause":7.5,"gc":"mc","allocated":0,"promoted":0}',
  ];
  const EXPECTED = [{ from: 0, scavenges: 1, survivedPercent: 12.5, fullCollections: 1, pauseMs: 10, allocatedBytes: 4_000_000, promotedBytes: 100_000 }];

  it('reads both forms of the line (Node.js 22 and 24; 26), with LF or CRLF endings and trailing spaces', () => {
    for (const lines of [PAIRS, JSON_LINES]) {
      assert.deepEqual(gcSlices(lines.join('\n'), 10), EXPECTED);
      assert.deepEqual(gcSlices(lines.map((l) => `${l}  `).join('\r\n') + '\r\n', 10), EXPECTED);
    }
  });

  it('leaves out lines that are not collections', () => {
    assert.deepEqual(gcSlices('hello\n{"level":30}\n', 1), []);
  });
});
