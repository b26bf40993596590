/** A minimal HTTPS client for tests: trusts the test certificate, keeps connections alive. */
import https from 'node:https';

export interface TestResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body's bytes as received (still compressed when the server compressed it). */
  body: Buffer;
  text: string;
  json: () => unknown;
  /** The client's port of the connection it came on: which kept-alive connection served it. */
  localPort?: number;
}

/** Headers that differ between any two answers, or are about the connection. */
const VARYING = new Set(['x-request-id', 'date', 'connection', 'keep-alive', 'ratelimit']);

/** An answer's headers but those that differ between any two answers: for comparing two answers. */
export function stableHeaders(res: TestResponse): Record<string, string | string[] | undefined> {
  return Object.fromEntries(Object.entries(res.headers).filter(([name]) => !VARYING.has(name)));
}

export interface RequestOptions {
  method?: string;
  key?: string | null;
  headers?: Record<string, string | string[]>;
  /** Whether a GET or HEAD reset on a kept-alive connection goes again on a new one (default true). */
  retryReset?: boolean;
}

export function httpsClient(origin: string, ca: string) {
  const agent = new https.Agent({ keepAlive: true, ca, maxSockets: 16 });
  return {
    agent,
    request(path: string, opts: RequestOptions = {}): Promise<TestResponse> {
      const headers: Record<string, string | string[]> = { ...opts.headers };
      if (opts.key) headers.authorization = `Bearer ${opts.key}`;
      const method = opts.method ?? 'GET';
      const send = (): Promise<TestResponse> => new Promise((resolve, reject) => {
        const req = https.request(`${origin}${path}`, { method, headers, agent }, (res) => {
          const localPort = res.socket.localPort;
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const body = Buffer.concat(chunks);
            const text = body.toString('utf8');
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, json: () => JSON.parse(text) as unknown, localPort });
          });
          res.on('error', reject);
        });
        req.on('error', (err: NodeJS.ErrnoException) => {
          // A kept-alive connection the server closed for idling just as this request went
          // out on it: the server never read it, so a GET or HEAD goes again on a new one
          // (as Node's documentation advises any client to do).
          if (opts.retryReset !== false && req.reusedSocket && err.code === 'ECONNRESET' && (method === 'GET' || method === 'HEAD')) send().then(resolve, reject);
          else reject(err);
        });
        req.end();
      });
      return send();
    },
    close: () => agent.destroy(),
  };
}
