/**
 * Whether Redis applied a usage-recording script call whose reply never came (the
 * connection dropped, or went silent past the client's command timeout), so that each
 * request's usage counts exactly once: in Redis, or in this process when Redis did not
 * record it. docs/decisions.md ("Usage with Redis is recorded in Redis") says why so.
 */

/** The requests a call carries, by key id. */
export type CallUsage = ReadonlyMap<string, number>;

/** Counts requests of a key that Redis did not record, at the time they were asked. */
export type Unrecorded = (keyId: string, requests: number, at: number) => void;

interface Lost {
  seq: number;
  usage: CallUsage;
  at: number;
}

/** One connection's calls. */
export interface Stream {
  /** Its key in Redis. */
  readonly key: string;
  /** The last place given out. */
  sent: number;
  lost: Lost[];
  /** What the last settle learnt: places up to `voided` are settled; those up to `last` applied. */
  voided: number;
  last: number;
}

/** Reads a stream's last applied place and voids every place up to `upTo` (SETTLE). */
export type Settle = (streamKey: string, upTo: number) => Promise<number>;

/**
 * Each connection is a stream with a key of its own in Redis; each call carries the
 * stream's key and its place on it (1, 2, ...). Redis runs a connection's calls in order;
 * the script notes the highest place applied (`last`) and skips a call at or below the
 * stream's `void` mark. Settling a stream reads `last` and raises `void` to the last place
 * sent, in one script (SETTLE in redis.ts): the lost calls above `last` never apply later
 * (bytes still on their way on the dead connection included), and are counted here.
 */
export class CallLedger {
  private readonly streams = new WeakMap<object, Stream>();
  private readonly unsettled = new Set<Stream>();
  /** Calls sent whose answer (or loss) is still due. */
  private readonly inFlight = new Set<Promise<void>>();
  private settling: Promise<void> | null = null;
  private closed = false;
  private unrecorded: Unrecorded = () => undefined;

  private readonly newStreamKey: () => string;
  private readonly settle: Settle;
  private readonly retryMs: number;

  constructor(
    newStreamKey: () => string,
    settle: Settle,
    retryMs: number,
  ) {
    this.newStreamKey = newStreamKey;
    this.settle = settle;
    this.retryMs = retryMs;
  }

  /** Where usage Redis did not record is counted (the usage recorder's memory). */
  countInto(unrecorded: Unrecorded): void {
    this.unrecorded = unrecorded;
  }

  /** The stream of a connection (its socket), and the next place on it. */
  place(connection: object): { stream: Stream; seq: number } {
    let stream = this.streams.get(connection);
    if (stream === undefined) {
      stream = { key: this.newStreamKey(), sent: 0, lost: [], voided: 0, last: 0 };
      this.streams.set(connection, stream);
    }
    stream.sent += 1;
    return { stream, seq: stream.sent };
  }

  /** A call Redis did not apply, for certain (never sent, or its writes refused): counted here. */
  notApplied(usage: CallUsage, at: number): void {
    for (const [keyId, requests] of usage) this.unrecorded(keyId, requests, at);
  }

  /**
   * Follows a call sent at place `seq` of `stream`: `applied` resolves once Redis answered
   * it, with whether the script recorded the usage; it rejects when the reply is lost, and
   * the call is then settled later.
   */
  follow(stream: Stream, seq: number, usage: CallUsage, at: number, applied: Promise<boolean>): void {
    const followed: Promise<void> = applied.then(
      (yes) => {
        if (!yes) this.notApplied(usage, at);
      },
      () => this.lost(stream, { seq, usage, at }),
    );
    this.inFlight.add(followed);
    void followed.finally(() => this.inFlight.delete(followed));
  }

  private lost(stream: Stream, call: Lost): void {
    if (call.seq <= stream.voided || this.closed) {
      // Settled already (or no more settles): applied if at or below the last applied place.
      if (this.closed || call.seq > stream.last) this.notApplied(call.usage, call.at);
      return;
    }
    stream.lost.push(call);
    this.unsettled.add(stream);
    this.settleAll();
  }

  /** Settles every stream with lost calls, retrying every `retryMs` while Redis does not answer. */
  private settleAll(): void {
    this.settling ??= (async () => {
      while (this.unsettled.size > 0 && !this.closed) {
        if (!(await this.settleOnce())) await new Promise((r) => setTimeout(r, this.retryMs).unref());
      }
    })().finally(() => {
      this.settling = null;
    });
  }

  /** One settle of each unsettled stream; false if one failed. */
  private async settleOnce(): Promise<boolean> {
    for (const stream of [...this.unsettled]) {
      const upTo = stream.sent;
      let last: number;
      try {
        last = await this.settle(stream.key, upTo);
      } catch {
        return false;
      }
      if (upTo > stream.voided) stream.voided = upTo;
      if (last > stream.last) stream.last = last;
      const lost = stream.lost;
      stream.lost = [];
      for (const call of lost) this.lost(stream, call);
      if (stream.lost.length === 0) this.unsettled.delete(stream);
    }
    return true;
  }

  /**
   * Before the last write of usage at shutdown: waits up to `boundMs` for the answers still
   * due and for one settle, then counts here every call still unsettled. Such a call may
   * then count twice, if Redis applied it; never not at all.
   */
  async close(boundMs: number): Promise<void> {
    const bound = new Promise<void>((r) => setTimeout(r, boundMs).unref());
    await Promise.race([Promise.allSettled([...this.inFlight]), bound]);
    if (this.unsettled.size > 0) await Promise.race([this.settleOnce(), bound]);
    this.closed = true;
    for (const stream of this.unsettled) {
      for (const call of stream.lost) this.notApplied(call.usage, call.at);
      stream.lost = [];
    }
    this.unsettled.clear();
  }
}
