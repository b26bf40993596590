/**
 * The state of one dependency (PostgreSQL, SQLite, Redis): up or down, and what that
 * cost. An outage is logged by its changes of state, never per request: one error line
 * when it stops answering, at most one reminder a minute, one info line when it answers
 * again; an outage that begins within a minute of the last line is short until it has
 * lasted SHORT_OUTAGE_MS, and only counted in the next line (docs/operations.md,
 * "Outages"). Every refusal is counted for the metric; a failure beside the requests
 * (the usage flush) marks the same state without being a refusal. `refused` and
 * `answered` are a few comparisons unless the state changes. While it is down, a state
 * given a probe asks the dependency every PROBE_MS whether it answers, so an outage's end
 * is logged when it ends, not at the next request to come.
 */
import type { Logger } from 'pino';

/** The least time between two lines of one outage (the reminder), and the span after a line in which a new outage starts short. */
export const REMINDER_MS = 60_000;
/** How long an outage that started short lasts before it is logged as an outage of its own. */
export const SHORT_OUTAGE_MS = 5_000;
/**
 * How often a state with a probe asks a dependency that is down whether it answers again; the
 * first time within the span an outage is short, so a blip ended by the probe stays one.
 */
export const PROBE_MS = 5_000;
const FIRST_PROBE_MS = 1_000;

/** What a failure was, in one short text: its code and message, never a stack trace. */
export function causeOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  const text = typeof code === 'string' && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
  // A wrapper (RateLimiterUnavailable) says what failed; its cause says why.
  const cause = err.cause instanceof Error ? `; ${causeOf(err.cause)}` : '';
  return (text + cause).slice(0, 300);
}

export class DependencyState {
  /** Requests refused because of this dependency since the process started (for the metric). */
  refusedTotal = 0;
  /** When the current outage began (epoch ms); 0 while the dependency answers. */
  private downSince = 0;
  /** Requests refused since the outage began. */
  private refusedInOutage = 0;
  /** Failures of work beside the requests (the usage flush) since the outage began. */
  private otherFailures = 0;
  /** Whether the current outage's start was logged (else it is short: see above). */
  private logged = false;
  /** The short outages ended since the last line, and the requests they refused. */
  private shortOutages = 0;
  private refusedInShortOutages = 0;
  /** When the last line was written (epoch ms); 0 before any. */
  private lastLineAt = 0;
  /** The current outage's first failure: what its first line says, when it is written. */
  private first: { cause: string; refusal: boolean; what?: string } = { cause: '', refusal: true };

  readonly store: string;
  readonly cause: string;
  private readonly log: Logger;
  private readonly now: () => number;
  /** Whether the dependency answers now (probeWith), asked while it is down; null: only the requests tell. */
  private probe: (() => Promise<boolean>) | null = null;
  private probeEveryMs = PROBE_MS;
  private probing: NodeJS.Timeout | null = null;
  /** Which outage's probing is running: a probe answered after its outage ended asks no more. */
  private probeChain = 0;
  private closed = false;

  /**
   * `store`: the dependency's name in the lines (postgres, sqlite, redis); `cause`: the
   * problem code of the requests it refuses (the metric's label).
   */
  constructor(
    store: string,
    cause: string,
    log: Logger,
    now: () => number = Date.now,
  ) {
    this.store = store;
    this.cause = cause;
    this.log = log;
    this.now = now;
  }

  get down(): boolean {
    return this.downSince !== 0;
  }

  /** Asks `probe` while the dependency is down (first after at most a second, then every `everyMs`); its first true ends the outage. */
  probeWith(probe: () => Promise<boolean>, everyMs = PROBE_MS): void {
    this.probe = probe;
    this.probeEveryMs = everyMs;
  }

  /** Stops probing (the app closes). */
  close(): void {
    this.closed = true;
    this.stopProbing();
  }

  private startProbing(): void {
    if (this.probe === null || this.probing !== null || this.closed) return;
    this.probeChain += 1;
    this.scheduleProbe(this.probeChain, Math.min(FIRST_PROBE_MS, this.probeEveryMs));
  }

  private scheduleProbe(chain: number, ms: number): void {
    this.probing = setTimeout(() => this.runProbe(chain), ms);
    this.probing.unref();
  }

  private runProbe(chain: number): void {
    const probe = this.probe;
    if (probe === null || this.closed || this.downSince === 0 || chain !== this.probeChain) return;
    // Its answer ends this outage only: one ended and another begun meanwhile is not the one it asked about.
    const outage = this.downSince;
    probe().then(
      (answers) => {
        if (answers && !this.closed && this.downSince === outage) this.answered();
      },
      () => undefined,
    ).finally(() => {
      if (!this.closed && this.downSince !== 0 && chain === this.probeChain) this.scheduleProbe(chain, this.probeEveryMs);
    });
  }

  private stopProbing(): void {
    if (this.probing !== null) clearTimeout(this.probing);
    this.probing = null;
    this.probeChain += 1;
  }

  /** A request refused because the dependency failed (`err`). */
  refused(err: unknown): void {
    this.refusedTotal += 1;
    this.refusedInOutage += 1;
    this.failed(err, true);
  }

  /** Work beside the requests failed on the dependency (`what`, e.g. "usage flush"); not a refusal. */
  failedBeside(err: unknown, what: string): void {
    this.otherFailures += 1;
    this.failed(err, false, what);
  }

  /** The dependency answered: ends an outage if there was one. */
  answered(): void {
    if (this.downSince !== 0) this.recovered();
  }

  private failed(err: unknown, refusal: boolean, what?: string): void {
    const now = this.now();
    if (this.downSince === 0) {
      this.downSince = now;
      this.logged = false;
      this.first = { cause: causeOf(err), refusal, what };
      this.startProbing();
    }
    if (!this.logged) {
      // A first outage, one a minute after the last line, or a short one that went on.
      if (this.lastLineAt !== 0 && now - this.lastLineAt < REMINDER_MS && now - this.downSince < SHORT_OUTAGE_MS) return;
      this.logStart(now);
      return;
    }
    if (now - this.lastLineAt >= REMINDER_MS) {
      this.lastLineAt = now;
      this.log.warn(
        { store: this.store, cause: causeOf(err), downForMs: now - this.downSince, refused: this.refusedInOutage, otherFailures: this.otherFailures },
        what && !refusal ? `${what} still failing on ${this.store}` : `${this.store} still unavailable`,
      );
    }
  }

  /** The outage's first line, from its first failure (`downForMs` when it is written late, at its end). */
  private logStart(now: number): void {
    this.logged = true;
    this.lastLineAt = now;
    const { cause, refusal, what } = this.first;
    const msg = refusal ? `${this.store} unavailable: requests get 503 until it answers again` : `${what} failing on ${this.store}; retried until it succeeds`;
    const late = now - this.downSince > 0 ? { downForMs: now - this.downSince } : {};
    this.log.error({ store: this.store, cause, ...(what ? { during: what } : {}), ...late, ...this.takeShortOutages() }, msg);
  }

  private recovered(): void {
    const now = this.now();
    // An outage that started short but lasted (no failure came to log it meanwhile) is one.
    if (!this.logged && now - this.downSince >= SHORT_OUTAGE_MS) this.logStart(now);
    if (this.logged) {
      this.lastLineAt = now;
      const msg = this.refusedInOutage === 0 && this.otherFailures > 0 ? `${this.store} works again` : `${this.store} available again`;
      this.log.info({ store: this.store, downForMs: now - this.downSince, refused: this.refusedInOutage, otherFailures: this.otherFailures, ...this.takeShortOutages() }, msg);
    } else {
      this.shortOutages += 1;
      this.refusedInShortOutages += this.refusedInOutage;
    }
    this.downSince = 0;
    this.refusedInOutage = 0;
    this.otherFailures = 0;
    this.stopProbing();
  }

  /** The short outages since the last line, as the next line's fields (none if there were none). */
  private takeShortOutages(): { shortOutages?: number; refusedInShortOutages?: number } {
    if (this.shortOutages === 0) return {};
    const fields = { shortOutages: this.shortOutages, refusedInShortOutages: this.refusedInShortOutages };
    this.shortOutages = 0;
    this.refusedInShortOutages = 0;
    return fields;
  }
}
