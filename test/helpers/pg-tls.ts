/**
 * A PostgreSQL server that speaks TLS, for tests: a loopback proxy in front of the real
 * server. It answers a client's SSLRequest with 'S', takes the TLS handshake with the
 * certificate it is given and passes the decrypted bytes on; a client that starts without
 * TLS is passed on as it is. Without a certificate it answers 'N', as a server without TLS
 * does. `tlsSessions` counts the handshakes it finished.
 */
import net from 'node:net';
import tls from 'node:tls';

/** PostgreSQL's SSLRequest: length 8, code 80877103. */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);

export class PgTlsProxy {
  tlsSessions = 0;
  private readonly sockets = new Set<net.Socket>();

  private readonly server: net.Server;

  private constructor(server: net.Server) {
    this.server = server;
  }

  /** `material` null: a server without TLS, which answers an SSLRequest 'N'. */
  static async start(target: { host: string; port: number }, material: { cert: string; key: string } | null): Promise<PgTlsProxy> {
    const server = net.createServer();
    const proxy = new PgTlsProxy(server);
    server.on('connection', (socket) => proxy.accept(socket, target, material));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  private accept(socket: net.Socket, target: { host: string; port: number }, material: { cert: string; key: string } | null): void {
    this.track(socket);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      if (head.length < SSL_REQUEST.length) return;
      socket.off('data', onData);
      socket.pause();
      if (material === null && head.equals(SSL_REQUEST)) {
        socket.write('N');
        head = Buffer.alloc(0);
        socket.on('data', onData);
        socket.resume();
        return;
      }
      const upstream = this.track(net.connect(target));
      if (material !== null && head.equals(SSL_REQUEST)) {
        socket.write('S');
        const secure = new tls.TLSSocket(socket, { isServer: true, cert: material.cert, key: material.key });
        secure.on('secure', () => this.tlsSessions++);
        this.join(secure, upstream);
      } else {
        upstream.write(head);
        this.join(socket, upstream);
        socket.resume();
      }
    };
    socket.on('data', onData);
  }

  private join(client: net.Socket, upstream: net.Socket): void {
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  private track(socket: net.Socket): net.Socket {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
    return socket;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
