/**
 * A progress bar on stderr: redrawn in place on a terminal, a line every tenth of the
 * way otherwise (a log file should not get thousands of carriage returns).
 */
export class Progress {
  private done = 0;
  private readonly started = Date.now();
  private lastDraw = 0;
  private lastTenth = -1;
  private readonly tty = Boolean(process.stderr.isTTY);

  private readonly label: string;
  private readonly total: number;

  constructor(
    label: string,
    total: number,
  ) {
    this.label = label;
    this.total = total;
  }

  add(n: number): void {
    this.done += n;
    const now = Date.now();
    if (this.tty && now - this.lastDraw < 200 && this.done < this.total) return;
    this.lastDraw = now;
    const tenth = Math.floor((10 * this.done) / this.total);
    if (!this.tty && tenth === this.lastTenth) return;
    this.lastTenth = tenth;
    this.draw(now);
  }

  finish(): void {
    this.draw(Date.now());
    if (this.tty) process.stderr.write('\n');
  }

  private draw(now: number): void {
    const fraction = Math.min(1, this.done / this.total);
    const seconds = (now - this.started) / 1000;
    const rate = this.done / Math.max(seconds, 0.001);
    const eta = rate > 0 ? (this.total - this.done) / rate : 0;
    const width = 30;
    const bar = '#'.repeat(Math.round(fraction * width)).padEnd(width, '-');
    const line = `${this.label} [${bar}] ${(100 * fraction).toFixed(0).padStart(3)}% ${human(this.done)}/${human(this.total)} rows, ${human(rate)}/s, ${seconds.toFixed(0)} s elapsed, ETA ${eta.toFixed(0)} s`;
    process.stderr.write(this.tty ? `\r${line}\x1b[K` : `${line}\n`);
  }
}

function human(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(0)}k`;
  return n.toFixed(0);
}
