/**
 * The baseline: a bare node:https server with the service's certificate and TLS
 * settings and keep-alive, answering every request with one fixed JSON body. It is
 * what one Node process can do with TLS on this machine when the application does
 * nothing, so each scenario is reported as a fraction of it.
 *
 * Run by the benchmark as a child process (fork, with an IPC channel): it prints
 * nothing, reports its port as { port }, and takes { size } to change the body's
 * size in bytes, answering { size } once the new body is in place.
 */
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { TLS12_CIPHERS } from '../src/edge/listener.js';

const [certFile, keyFile] = process.argv.slice(2);
if (!certFile || !keyFile || !process.send) throw new Error('usage: fork bare-server.ts CERT_FILE KEY_FILE (with an IPC channel)');
const send = process.send.bind(process);

/** A JSON body of exactly `size` bytes (at least 13). */
function bodyOf(size: number): Buffer {
  const frame = '{"padding":""}';
  return Buffer.from(`{"padding":"${'x'.repeat(Math.max(0, size - frame.length))}"}`);
}

let body = bodyOf(1024);
let headers = { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(body.length) };

const server = https.createServer(
  {
    cert: fs.readFileSync(certFile),
    key: fs.readFileSync(keyFile),
    minVersion: 'TLSv1.2',
    ciphers: TLS12_CIPHERS,
    honorCipherOrder: true,
    keepAliveTimeout: 5_000,
  },
  (_request, response) => {
    response.writeHead(200, headers);
    response.end(body);
  },
);

process.on('message', (message: { size?: number }) => {
  if (typeof message.size !== 'number') return;
  body = bodyOf(message.size);
  headers = { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(body.length) };
  send({ size: body.length });
});
process.on('disconnect', () => server.close(() => process.exit(0)));

server.listen(0, '127.0.0.1', () => send({ port: (server.address() as AddressInfo).port }));
