/**
 * A small fault-injecting TCP proxy on a loopback port, put between the app and
 * PostgreSQL or Redis to make them fail the ways networks do:
 *
 *   forward    pass bytes both ways (optionally each chunk `delayMs` late: a slow link)
 *   refuse     nothing listens on the port: connection refused (live ones are reset)
 *   blackhole  connections are accepted and bytes are held, new and live ones alike:
 *              a partition or a frozen server (held bytes flow again on `forward`, in
 *              order, as TCP would deliver them after a partition heals)
 *   cut()      resets every live connection at once, as a killed server's would be
 */
import net from 'node:net';

export type ProxyMode = 'forward' | 'refuse' | 'blackhole';

/**
 * Ends a socket with a TCP RST. One that is not fully open is destroyed instead: Node
 * waits for a connecting socket to connect before resetting it, and fails to reset a
 * half-closed one (EINVAL), leaving its handle open either way.
 */
function reset(socket: net.Socket): void {
  if (socket.readyState === 'open') socket.resetAndDestroy();
  else socket.destroy();
}

interface Pipe {
  client: net.Socket;
  upstream: net.Socket;
}

export class FaultProxy {
  private server: net.Server | null = null;
  private readonly pipes = new Set<Pipe>();
  private mode: ProxyMode = 'forward';
  /** Extra latency of every chunk in both directions while forwarding. */
  delayMs = 0;

  private target: { host: string; port: number };
  private port: number;

  private constructor(
    target: { host: string; port: number },
    port: number,
  ) {
    this.target = target;
    this.port = port;
  }

  static async start(target: { host: string; port: number }): Promise<FaultProxy> {
    const proxy = new FaultProxy(target, 0);
    await proxy.listen();
    return proxy;
  }

  /** A proxy in front of the server a database URL names, and the same URL through the proxy. */
  static async inFrontOf(databaseUrl: string): Promise<{ proxy: FaultProxy; url: string }> {
    const url = new URL(databaseUrl);
    const proxy = await FaultProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.hostname = proxy.address.host;
    url.port = String(proxy.address.port);
    return { proxy, url: url.toString() };
  }

  /** Sends the connections made from now on to `target` (those open stay where they are), as a failover behind one address does. */
  retarget(target: { host: string; port: number }): void {
    this.target = target;
  }

  get address(): { host: string; port: number } {
    return { host: '127.0.0.1', port: this.port };
  }

  async setMode(mode: ProxyMode): Promise<void> {
    const before = this.mode;
    this.mode = mode;
    // A server that refuses connections has dropped the ones it had, too.
    if (mode === 'refuse' && before !== 'refuse') {
      this.cut();
      await this.unlisten();
    }
    if (mode !== 'refuse' && before === 'refuse') await this.listen();
    for (const pipe of this.pipes) {
      if (mode === 'blackhole') {
        pipe.client.pause();
        pipe.upstream.pause();
      } else {
        pipe.client.resume();
        pipe.upstream.resume();
      }
    }
  }

  /** Resets every live connection (RST on both sides). */
  cut(): void {
    for (const { client, upstream } of this.pipes) {
      reset(client);
      reset(upstream);
    }
    this.pipes.clear();
  }

  get connections(): number {
    return this.pipes.size;
  }

  async close(): Promise<void> {
    this.cut();
    await this.unlisten();
  }

  private listen(): Promise<void> {
    const server = net.createServer((client) => this.accept(client));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => {
        const address = server.address();
        this.port = typeof address === 'object' && address ? address.port : this.port;
        resolve();
      });
    });
  }

  private unlisten(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return Promise.resolve();
    return new Promise((resolve) => server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    const upstream = net.connect(this.target.port, this.target.host);
    const pipe = { client, upstream };
    this.pipes.add(pipe);
    const drop = () => {
      this.pipes.delete(pipe);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    this.relay(client, upstream);
    this.relay(upstream, client);
    if (this.mode === 'blackhole') {
      client.pause();
      upstream.pause();
    }
  }

  private relay(from: net.Socket, to: net.Socket): void {
    from.on('data', (chunk: Buffer) => {
      if (this.delayMs > 0) setTimeout(() => to.write(chunk), this.delayMs);
      else to.write(chunk);
    });
  }
}
