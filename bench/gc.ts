/**
 * The server's garbage collections during a measured slice, from the histogram its
 * metrics already export (prom-client's `nodejs_gc_duration_seconds`, by kind). Each
 * collection stops the event loop for its pause and every request in flight waits for
 * it: what a p99 is made of when no single request is slow.
 */

const GC_KINDS = ['major', 'minor', 'incremental'] as const;
type GcKind = (typeof GC_KINDS)[number];

interface GcPauses {
  count: number;
  totalMs: number;
  /** Pauses longer than 10 ms (the histogram's bucket boundary nearest a p99 target). */
  over10ms: number;
}

export type GcSummary = Record<GcKind, GcPauses>;

export const emptyGc = (): GcSummary => ({ major: none(), minor: none(), incremental: none() });

const none = (): GcPauses => ({ count: 0, totalMs: 0, over10ms: 0 });

/** The value of one series (a regular expression: its name and labels) in a metrics text; 0 if absent. */
export function metricValue(text: string, series: string): number {
  return Number(new RegExp(`^${series} ([\\d.e+-]+)$`, 'm').exec(text)?.[1] ?? 0);
}

/** The collections counted so far in a metrics text (cumulative since the server started). */
export function gcFromMetrics(text: string): GcSummary {
  const summary = emptyGc();
  const value = (series: string) => metricValue(text, series);
  for (const kind of GC_KINDS) {
    const count = value(`nodejs_gc_duration_seconds_count\\{kind="${kind}"\\}`);
    summary[kind] = {
      count,
      totalMs: 1000 * value(`nodejs_gc_duration_seconds_sum\\{kind="${kind}"\\}`),
      over10ms: count - value(`nodejs_gc_duration_seconds_bucket\\{le="0\\.01",kind="${kind}"\\}`),
    };
  }
  return summary;
}

/** `into` += `after` - `before`: the collections of one slice, added up. */
export function addGcDelta(into: GcSummary, before: GcSummary, after: GcSummary): void {
  for (const kind of GC_KINDS) {
    into[kind].count += after[kind].count - before[kind].count;
    into[kind].totalMs += after[kind].totalMs - before[kind].totalMs;
    into[kind].over10ms += after[kind].over10ms - before[kind].over10ms;
  }
}

export function formatGc(gc: GcSummary, seconds: number): string {
  const part = (kind: GcKind) => {
    const p = gc[kind];
    return `${kind} ${(p.count / seconds).toFixed(1)}/s, ${((100 * p.totalMs) / (seconds * 1000)).toFixed(1)} % of the time, ${p.over10ms} over 10 ms`;
  };
  return `GC: ${GC_KINDS.map(part).join('; ')}`;
}
