/**
 * The TCP sockets of a store's PostgreSQL connections, followed so that closing the store
 * ends them all: pg ends a connection by saying goodbye and waiting for the server to close
 * its side, which a server that does not answer (a partition) never does, and an open socket
 * keeps the process alive. Those still open a while after the close are dropped.
 */
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';

/** Waits for `work`, at most `ms`, with a timer that does not keep the process alive. */
export async function waitAtMost(work: Promise<unknown>, ms: number): Promise<void> {
  await Promise.race([work, delay(ms, undefined, { ref: false })]);
}

export class Sockets {
  private readonly open = new Set<net.Socket>();

  /** pg's `stream` setting: each connection's socket, followed until it closes. */
  readonly stream = (): net.Socket => {
    const socket = new net.Socket();
    this.open.add(socket);
    socket.once('close', () => this.open.delete(socket));
    return socket;
  };

  /** Resolves once every socket has closed, destroying those still open after `ms`. */
  async closeWithin(ms: number): Promise<void> {
    if (this.open.size === 0) return;
    const closed = Promise.all([...this.open].map((socket) => once(socket, 'close').catch(() => undefined)));
    await waitAtMost(closed, ms);
    for (const socket of this.open) socket.destroy();
  }
}
