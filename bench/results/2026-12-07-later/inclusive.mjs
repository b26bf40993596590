// Inclusive time per function of a `.cpuprofile` (a function's own time and its callees'; a
// function met twice in one stack counted once), as a share of the busy time, the top N.
// Run: node bench/results/2026-12-07-later/inclusive.mjs FILE.cpuprofile [N] [TEXT: only names holding it]
import fs from 'node:fs';

const [file, top = '40', only = ''] = process.argv.slice(2);
const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const parentOf = new Map();
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);

const sampled = new Map();
profile.samples.forEach((id, i) => sampled.set(id, (sampled.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));

const name = (node) => `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.replace(/.*\//, '')}:${node.callFrame.lineNumber}`;
const inclusive = new Map();
let busy = 0;
for (const [id, time] of sampled) {
  if (nodes.get(id).callFrame.functionName === '(idle)') continue;
  busy += time;
  const seen = new Set();
  for (let at = id; at !== undefined; at = parentOf.get(at)) {
    const key = name(nodes.get(at));
    if (seen.has(key)) continue;
    seen.add(key);
    inclusive.set(key, (inclusive.get(key) ?? 0) + time);
  }
}
console.log(`busy ${(busy / 1e6).toFixed(1)} s`);
for (const [key, time] of [...inclusive].filter(([key]) => key.includes(only)).sort((a, b) => b[1] - a[1]).slice(0, Number(top))) {
  console.log(`${((100 * time) / busy).toFixed(1).padStart(6)} %  ${key}`);
}
