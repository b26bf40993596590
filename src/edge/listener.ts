/**
 * The HTTPS listeners of the service: TLS settings, the server's limits (docs/operations.md,
 * "Server limits"), a client's closed side (its answers still sent), the serving of a
 * request with an unknown expectation where Node would refuse it (417), and the API's
 * server; CONNECT is answered by each app (src/app.ts, src/cabinet/app.ts). Shared by the
 * API and the director's cabinet.
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Config } from '../config/index.js';
import type { TlsMaterial } from '../tls.js';
import { closeLingering } from './raw.js';

/** TLS 1.2 is allowed with forward-secret AEAD suites only; TLS 1.3 suites are all strong. */
export const TLS12_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

export type ListenerLimits = Pick<
  Config,
  'tlsHandshakeTimeoutMs' | 'maxHeaderBytes' | 'headersTimeoutMs' | 'requestTimeoutMs' | 'idleTimeoutMs' | 'keepAliveTimeoutMs' | 'maxConnections'
>;

/** The TLS settings and the limits Node takes when the server is made. */
export function serverOptions(config: ListenerLimits, tls: TlsMaterial): https.ServerOptions {
  return {
    key: tls.key,
    cert: tls.cert,
    minVersion: 'TLSv1.2',
    ciphers: TLS12_CIPHERS,
    honorCipherOrder: true,
    // HTTP/1.1 and 1.0 only (no HTTP/2); Node's default offers http/1.1 alone, and refused
    // the handshake of a client that offers only http/1.0 (curl --http1.0).
    ALPNProtocols: ['http/1.1', 'http/1.0'],
    handshakeTimeout: config.tlsHandshakeTimeoutMs,
    maxHeaderSize: config.maxHeaderBytes,
    headersTimeout: config.headersTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    // How often Node looks for requests past those two timeouts (its default is 30 s,
    // which would let a slowloris client hold a connection for that much longer).
    connectionsCheckingInterval: 1000,
  };
}

/**
 * The limits set on a server once it exists: the one place for the keep-alive, request and
 * idle timeouts of both listeners, and the cap on open connections (a new one past it is
 * closed before its TLS handshake).
 */
export function limitServer(server: https.Server, config: ListenerLimits): void {
  server.headersTimeout = config.headersTimeoutMs;
  server.requestTimeout = config.requestTimeoutMs;
  server.keepAliveTimeout = config.keepAliveTimeoutMs;
  server.setTimeout(config.idleTimeoutMs);
  server.maxConnections = config.maxConnections;
  // A client may close its side once its requests are sent and still read their answers
  // (RFC 9112 section 9.6): Node then ends the connection after the last of them, where it
  // would end it at once. Only a connection past its handshake stays open so; before it, a
  // client's end closes the connection at once.
  (server as https.Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  server.on('secureConnection', (socket: TLSSocket) => {
    socket.allowHalfOpen = true;
    // What the server closes is read a while longer, so the client's unread answers are not lost to a reset.
    socket.destroySoon = destroySoonLingering;
  });
}

/** Each connection's `destroySoon`, which Node calls to close it after its last answer. */
function destroySoonLingering(this: TLSSocket): void {
  closeLingering(this);
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A Fastify serverFactory for the API's listener. */
export function apiServerFactory(config: ListenerLimits, tls: TlsMaterial) {
  return (handler: Handler): https.Server => {
    // A missing Host is answered by the app (src/edge/checks.ts) as problem+json, not by Node's bare 400.
    const server = https.createServer({ ...serverOptions(config, tls), requireHostHeader: false }, handler);
    limitServer(server, config);
    serveUnknownExpectations(server);
    return server;
  };
}

/** An unknown expectation is ignored (RFC 9110 allows it) and the request served, where Node would answer a bare 417. */
export function serveUnknownExpectations(server: https.Server): void {
  server.on('checkExpectation', (req, res) => server.emit('request', req, res));
}
