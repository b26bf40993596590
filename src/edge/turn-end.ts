/**
 * Answers made in the turn of the event loop that read their requests are written together
 * at its end (setImmediate), so a busy server's answers leave in one burst instead of waking
 * each client in turn (docs/performance.md, "Answers leave at the end of the turn"). Rules:
 * - only answers to reads (GET, HEAD) wait (Node closes a connection right after the turn
 *   that read a PRI request); one made in a later turn (a PostgreSQL query came back) does not;
 * - a query starting writes what waits once the first of it has waited HOLD_AT_MOST_MS
 *   (`beforeQuery`; docs/performance.md, "Answers wait through short queries");
 * - what waits is written before Node ends a connection in the turn (a parse error after a
 *   request: src/edge/raw.ts). The queue is the process's, like its event loop.
 */
let held: (() => void)[] = [];
/** performance.now() when the first of `held` was held. */
let heldSince = 0;

/** How long an answer waits for the turn's end while queries start before it is written anyway. */
export const HOLD_AT_MOST_MS = 1;

/**
 * Writes every held answer now, in the order held. A write that throws does not keep the
 * others from being written; its error is thrown after them.
 */
export function flushHeldAnswers(): void {
  if (held.length === 0) return;
  const all = held;
  held = [];
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

/** Runs `write` at the end of this turn of the event loop, after the writes held before it. */
export function holdUntilTurnEnd(write: () => void): void {
  if (held.push(write) === 1) {
    heldSince = performance.now();
    setImmediate(flushHeldAnswers);
  }
}

/**
 * Called as a query starts: writes the held answers now if the first of them has waited
 * HOLD_AT_MOST_MS; otherwise they go on waiting for the turn's end with the rest.
 */
export function beforeQuery(): void {
  if (held.length > 0 && performance.now() - heldSince >= HOLD_AT_MOST_MS) flushHeldAnswers();
}

/** Whether the answer to a request with this method may wait for the turn's end: only a read's. */
export function isRead(method: string | undefined): boolean {
  return method === 'GET' || method === 'HEAD';
}

let turn = 0;
let turnEnding = false;

/**
 * A number that stays the same for the rest of this turn of the event loop and differs in
 * the next: an answer made in the turn its request arrived in has the same number.
 */
export function currentTurn(): number {
  if (!turnEnding) {
    turnEnding = true;
    setImmediate(nextTurn);
  }
  return turn;
}

function nextTurn(): void {
  turn += 1;
  turnEnding = false;
}
