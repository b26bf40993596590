/**
 * Answers made during one turn of the event loop are written together, at its end.
 *
 * A busy server reads the requests of many keep-alive connections in one turn. Writing
 * each answer as soon as it is made means: read a request, write its answer, read the
 * next, write again... and each write can wake a client that fell asleep since the
 * previous one. Waking a process that waits on another core takes an interrupt between
 * the cores, which on a virtual machine can cost more than a small answer's whole TLS and
 * HTTP work (docs/performance.md, "Answers leave at the end of the turn"). Held to the end
 * of the turn's I/O (setImmediate runs right after it), the turn's answers go out in one
 * burst: still one write per connection, and an answer waits at most for the rest of the
 * turn in which it was made.
 *
 * This is for answers made in the turn that read their requests: all of them on SQLite,
 * where the access check and the queries are synchronous. On PostgreSQL an answer is made
 * when a lookup or query comes back, in a later turn, and the lookups of a turn come back
 * together, so their answers already leave in a burst: there they are written at once
 * (holding them too made the mixed workload's p99 worse, docs/performance.md).
 *
 * Only answers to reads (GET, HEAD) wait: the load is there, and any other method is a
 * rare refusal. It must not wait, besides: Node closes the connection right after the
 * turn that read a PRI request (the first line of HTTP/2's preface), and an answer held
 * past that turn would be lost.
 *
 * The queue is the process's, like its event loop.
 */
let waiting: (() => void)[] = [];

/**
 * Writes what waits now: before work that may take a while (a query), so that answers do
 * not wait for it, and before Node ends a connection in the turn that read its request
 * (a parse error after a request, a client that closed its side: src/app.ts). A write
 * that throws does not keep the others from being written; its error is thrown after them.
 */
export function writeWaiting(): void {
  if (waiting.length === 0) return;
  const all = waiting;
  waiting = [];
  let failure: { error: unknown } | undefined;
  for (const write of all) {
    try {
      write();
    } catch (error) {
      failure ??= { error };
    }
  }
  if (failure !== undefined) throw failure.error;
}

/** Runs `write` at the end of this turn of the event loop, after the writes queued before it. */
export function atTurnEnd(write: () => void): void {
  if (waiting.push(write) === 1) setImmediate(writeWaiting);
}

/** Whether the answer to a request with this method may wait for the turn's end: only a read's. */
export function mayHold(method: string | undefined): boolean {
  return method === 'GET' || method === 'HEAD';
}
