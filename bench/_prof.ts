import fs from 'node:fs';
const file = process.argv[2]!;
interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount: number; children?: number[] }
const prof = JSON.parse(fs.readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[] };
const self = new Map<string, number>();
let total = 0;
for (const n of prof.nodes) {
  const k = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.replace(/^.*\/(node_modules|main)\//, '')}:${n.callFrame.lineNumber}`;
  self.set(k, (self.get(k) ?? 0) + n.hitCount);
  total += n.hitCount;
}
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(process.argv[3] ?? 30))) console.log((100 * v / total).toFixed(1).padStart(5), k);
