import fs from 'node:fs';
import pino, { type Logger } from 'pino';
import type { Config } from './config/index.js';

/** JSON logs, on stdout unless told otherwise (batched, see LineBatcher). Key values never reach a log line: the header is redacted. */
export function createLogger(config: Pick<Config, 'logLevel'>, destination: pino.DestinationStream = LineBatcher.stdout()): Logger {
  return pino(
    {
      level: config.logLevel,
      redact: { paths: ['req.headers.authorization', 'headers.authorization', 'authorization'], censor: '[redacted]' },
      base: { pid: process.pid },
    },
    destination,
  );
}

/**
 * Writes a finished log line (ending in a newline) to the logger's destination as it is,
 * past pino's formatting: for the access line, which is formatted once by accessLine.
 */
export function lineWriter(logger: Logger): (line: string) => void {
  const stream = (logger as unknown as Record<symbol, pino.DestinationStream>)[pino.symbols.streamSym]!;
  return (line) => stream.write(line);
}

/** Lines kept at most while the destination does not take them (a stuck pipe): then new lines are dropped and counted. */
const MAX_PENDING_BYTES = 16 * 1024 * 1024;
/** A batch is written at once past this size, without waiting for the end of the event-loop turn. */
const FLUSH_BYTES = 64 * 1024;
const RETRY_MS = 20;

const NEWLINE = 0x0a;

/**
 * A log destination that writes the lines of one event-loop turn with one system call.
 *
 * Every request writes an access line, and under load a write per line (pino's
 * synchronous destination) or a write per line through the thread pool (its
 * asynchronous one, which also measures the UTF-8 length of its whole pending buffer at
 * every line) cost more than the rest of a refused request's logging; see
 * docs/performance.md. Here a line is appended to an array, and the array is written
 * once the turn's I/O is done (setImmediate), or at once past FLUSH_BYTES: the lines of
 * a busy turn go out together, an idle server's line goes out at once, and a line is
 * never held longer than one turn of the loop.
 *
 * Writes are synchronous, so a line written before a crash or exit is on its way, and
 * `flush()` empties what is pending (called on exit). If the destination cannot take
 * more (EAGAIN on a non-blocking pipe whose reader is slow), the rest is retried shortly;
 * past MAX_PENDING_BYTES new lines are dropped rather than stalling the server or growing
 * without bound. Lost output (that, or a destination that fails) is counted and reported
 * in a line of its own once lines go out again, on a line of its own even when the
 * destination failed in the middle of one.
 */
export class LineBatcher implements pino.DestinationStream {
  private lines: string[] = [];
  /** Bytes of an earlier batch the destination has not taken yet; they go first. */
  private unwritten: Buffer | null = null;
  private pendingBytes = 0;
  private scheduled = false;
  private retry: NodeJS.Timeout | null = null;
  /** Bytes of log lines lost (refused by the destination, or over MAX_PENDING_BYTES), reported once lines go out again. */
  private droppedBytes = 0;
  /** The destination took part of a line and then failed (a disk filled): the next output ends that line first. */
  private midLine = false;

  private readonly fd: number;
  private readonly writeSync: (fd: number, data: Buffer) => number;

  /** `write` is fs.writeSync's contract (tests give one that refuses or takes part). */
  constructor(
    fd: number,
    writeSync: (fd: number, data: Buffer) => number = fs.writeSync,
  ) {
    this.fd = fd;
    this.writeSync = writeSync;
  }

  /** The process's stdout, flushed when the process exits. */
  static stdout(): LineBatcher {
    return LineBatcher.forFd(1);
  }

  /** The process's stderr, likewise: for `serve --json`, whose stdout is its one JSON value. */
  static stderr(): LineBatcher {
    return LineBatcher.forFd(2);
  }

  private static forFd(fd: number): LineBatcher {
    const batcher = new LineBatcher(fd);
    process.on('exit', () => batcher.flush());
    return batcher;
  }

  write(line: string): boolean {
    if (this.pendingBytes >= MAX_PENDING_BYTES) {
      this.droppedBytes += line.length;
      return false;
    }
    this.lines.push(line);
    this.pendingBytes += line.length;
    if (this.retry !== null) return true;
    if (this.pendingBytes >= FLUSH_BYTES) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.onImmediate);
    }
    return true;
  }

  private readonly onImmediate = (): void => {
    this.scheduled = false;
    this.flush();
  };

  /** Writes every pending line now, as far as the destination takes them; pino's `logger.flush(cb)` calls it. */
  flush(done?: (err?: Error) => void): void {
    if (this.droppedBytes > 0 && this.unwritten === null) {
      this.lines.unshift(`${this.midLine ? '\n' : ''}{"level":40,"time":${Date.now()},"pid":${process.pid},"droppedBytes":${this.droppedBytes},"msg":"log output lost: the destination did not take it"}\n`);
      this.droppedBytes = 0;
    }
    if (this.lines.length > 0) {
      const batch = Buffer.from(this.lines.length === 1 ? this.lines[0]! : this.lines.join(''));
      this.unwritten = this.unwritten === null ? batch : Buffer.concat([this.unwritten, batch]);
      this.lines = [];
    }
    let data = this.unwritten;
    while (data !== null && data.length > 0) {
      try {
        const taken = this.writeSync(this.fd, data);
        if (taken > 0) this.midLine = data[taken - 1] !== NEWLINE;
        data = data.subarray(taken);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') {
          // A closed or broken destination (EPIPE, EBADF): a log line is never worth a
          // failed request. What is lost is counted and reported if lines go out again.
          this.droppedBytes += data.length;
          break;
        }
        this.unwritten = data;
        this.pendingBytes = data.length;
        this.retry ??= setTimeout(() => {
          this.retry = null;
          this.flush();
        }, RETRY_MS).unref();
        done?.();
        return;
      }
    }
    this.unwritten = null;
    this.pendingBytes = 0;
    done?.();
  }
}
