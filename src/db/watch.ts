/**
 * Keys kept on PostgreSQL (docs/decisions.md, "Keys kept on PostgreSQL"): a server keeps the
 * key rows it looked up while it knows nothing they hold has changed.
 * - Triggers announce every change of what a lookup reads on `school_data_keys` (payload: the
 *   schema; migration 0014), whoever made it; each announcement starts a new generation.
 * - A server holds a lease in `key_watchers`, renewed every quarter of it, and keeps nothing
 *   while it is not listening or is past its lease by its own clock (less a fifth).
 * - A writer whose change the next request must see everywhere (a revoke, a plan change, an
 *   import) sends a barrier after its commit and waits until every leaseholder has acknowledged
 *   it or been evicted and run out (`announceKeyChanges`); a server acknowledges after starting
 *   a new generation, and announcements arrive in commit order.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { PostgresAdapter, sql, type Kysely } from 'kysely';
import type pg from 'pg';
import type { Database } from './schema.js';
import { waitAtMost } from './sockets.js';

export const KEY_CHANNEL = 'school_data_keys';

/** PostgreSQL's clock in epoch milliseconds: leases are judged by the database's clock alone. */
const NOW = '(extract(epoch from clock_timestamp()) * 1000)::bigint';
const NOW_MS = sql.raw<number>(NOW);

/** A lease's length by default; a lost server delays a writer by at most this. */
export const DEFAULT_LEASE_MS = 10_000;

/** Pauses after a lost connection before listening again. */
const RETRY_MS = [100, 500, 1000, 2000, 5000];

export interface KeyWatchOptions {
  /** A new client with the store's connection settings and this name, not yet connected. */
  client: (name: string) => pg.Client;
  leaseMs?: number;
  /** Told when the watch is lost and when it is back (for the logs). */
  onState?: (listening: boolean, error?: unknown) => void;
}

export class KeyWatch {
  /** Changes with every announcement, and whenever what was kept can no longer be trusted. */
  generation = 0;
  /** This server's row in key_watchers: a new one each time it listens again. */
  private id = randomUUID();
  private readonly leaseMs: number;
  private client: pg.Client | null = null;
  private schema = '';
  /** performance.now() up to which what is kept may be used: the lease less a margin. */
  private trustedUntil = 0;
  private renewal: NodeJS.Timeout | null = null;
  private retry: NodeJS.Timeout | null = null;
  private failures = 0;
  private closed = false;
  /** The last statement sent on the watch's connection: each waits for the one before (pg 9 refuses overlapping queries on a client). */
  private sent: Promise<unknown> = Promise.resolve();
  /** The latest start, settled once it listens or has failed: a close waits for it. */
  private starting: Promise<void> = Promise.resolve();

  private readonly options: KeyWatchOptions;

  constructor(options: KeyWatchOptions) {
    this.options = options;
    this.leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  }

  /** The name its connection gives PostgreSQL (`application_name`), this server's lease in it. */
  get name(): string {
    return `school-data key watch ${this.id}`;
  }

  /** Whether kept keys may answer now. */
  get trusted(): boolean {
    return this.client !== null && performance.now() < this.trustedUntil;
  }

  /** Sends one statement on `client` once the statements sent before it have finished. */
  private query<R extends pg.QueryResultRow>(client: pg.Client, text: string, values?: unknown[]): Promise<pg.QueryResult<R>> {
    const result = this.sent.then(() => client.query<R>(text, values));
    this.sent = result.catch(() => undefined);
    return result;
  }

  /** Listens and takes a lease; on failure keeps trying in the background (nothing is kept meanwhile). */
  start(): Promise<void> {
    this.starting = this.listen();
    return this.starting;
  }

  private async listen(): Promise<void> {
    // A lease of an earlier connection is given up once this one listens: a barrier sent
    // meanwhile was not heard on it.
    const earlier = this.id;
    this.id = randomUUID();
    const client = this.options.client(this.name);
    // A statement left on an earlier connection is not waited for.
    this.sent = Promise.resolve();
    let gone = false;
    const lost = (err?: unknown) => {
      if (gone) return;
      gone = true;
      this.lost(client, err);
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (message) => this.announced(client, message, lost));
    try {
      await client.connect();
      this.schema = (await this.query<{ schema: string }>(client, 'select current_schema() as schema')).rows[0]!.schema;
      // Listening first: an announcement committed after the lease was taken is heard.
      await this.query(client, `listen ${KEY_CHANNEL}`);
      if (this.closed) throw new Error('closed');
      await this.query(client, 'delete from key_watchers where id = $1', [earlier]);
      await this.query(client, `delete from key_watchers where lease_until < ${NOW} - 60000`);
      await this.query(client, 'delete from key_acks where watcher not in (select id from key_watchers)');
      this.client = client;
      await this.renew(client);
      if (this.closed) {
        // Closed while it started: the close left the lease to this start to give up.
        this.client = null;
        this.trustedUntil = 0;
        await this.giveUp(client);
        return;
      }
      this.failures = 0;
      this.options.onState?.(true);
      this.renewal = setInterval(() => void this.renew(client).catch(lost), this.leaseMs / 4);
      this.renewal.unref();
    } catch (err) {
      lost(err);
    }
  }

  private announced(client: pg.Client, message: pg.Notification, lost: (err: unknown) => void): void {
    if (message.channel !== KEY_CHANNEL || client !== this.client) return;
    const [schema, barrier] = (message.payload ?? '').split(' ');
    if (schema !== this.schema) return;
    this.generation += 1;
    if (barrier !== undefined) {
      this.query(client, 'insert into key_acks (watcher, barrier) values ($1, $2) on conflict do nothing', [this.id, barrier]).catch(lost);
    }
  }

  /** Extends the lease (taking it again if a writer evicted this server); what is kept is trusted to its end, less a fifth. */
  private async renew(client: pg.Client): Promise<void> {
    const asked = performance.now();
    const renewed = await this.query(client, `update key_watchers set lease_until = ${NOW} + $2 where id = $1`, [this.id, this.leaseMs]);
    if (renewed.rowCount === 0) {
      // New, or evicted by a writer (what was kept may have missed its barrier).
      this.generation += 1;
      await this.query(client, `insert into key_watchers (id, lease_until) values ($1, ${NOW} + $2)`, [this.id, this.leaseMs]);
    }
    if (client === this.client) this.trustedUntil = asked + this.leaseMs * 0.8;
  }

  /** Once per client: what was kept is dropped, and the watch starts again after a pause. */
  private lost(client: pg.Client, error?: unknown): void {
    const wasListening = this.client === client;
    if (wasListening) this.client = null;
    this.generation += 1;
    this.trustedUntil = 0;
    if (this.renewal !== null) clearInterval(this.renewal);
    this.renewal = null;
    client.removeAllListeners('notification');
    void client.end().catch(() => undefined);
    if (this.closed) return;
    if (wasListening) this.options.onState?.(false, error);
    const pause = RETRY_MS[Math.min(this.failures, RETRY_MS.length - 1)]!;
    this.failures += 1;
    this.retry ??= setTimeout(() => {
      this.retry = null;
      if (!this.closed) void this.start();
    }, pause);
    this.retry.unref();
  }

  /**
   * Stops listening and gives the lease up, so no writer waits for this server. A connection
   * lost or silent meanwhile is no error: the lease then runs out by itself, and the close
   * waits no more than CLOSE_WAIT_MS for it (a stopping server is not held up by a partition).
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.retry !== null) clearTimeout(this.retry);
    this.trustedUntil = 0;
    // A start under way gives its lease up itself once its statements return (see listen).
    await waitAtMost(this.starting, CLOSE_WAIT_MS);
    if (this.renewal !== null) clearInterval(this.renewal);
    const client = this.client;
    this.client = null;
    if (client !== null) await this.giveUp(client);
  }

  /** Gives the lease up and ends the connection, each waited for no longer than CLOSE_WAIT_MS. */
  private async giveUp(client: pg.Client): Promise<void> {
    // Lost: a writer waits for this server no longer than the lease.
    const givenUp = this.query(client, 'delete from key_watchers where id = $1', [this.id]).catch(() => undefined);
    await waitAtMost(givenUp, CLOSE_WAIT_MS);
    // With a statement still out, pg drops the connection at once; without, it waits for the
    // server to close its side, which a silent server never does: the store's close drops it then.
    await waitAtMost(client.end().catch(() => undefined), CLOSE_WAIT_MS);
  }
}

/** How long closing waits for its lease to be given up: the statement takes milliseconds when the database answers. */
const CLOSE_WAIT_MS = 1000;

/** How long a writer waits for the acknowledgements before it evicts the servers that did not give one. */
const ACK_WAIT_MS = 2000;

/**
 * After a commit that changed what key lookups read: returns once every PostgreSQL server
 * that keeps keys has dropped what it kept from before the commit (see above); at once on
 * SQLite, whose servers read the file's data version every turn. Call it on the store's
 * own Kysely instance, after the transaction, never inside one.
 */
export async function announceKeyChanges(db: Kysely<Database>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  const live = (await db.selectFrom('key_watchers').select('id').where('lease_until', '>', NOW_MS).execute()).map((w) => w.id);
  if (live.length === 0) return;
  const barrier = randomUUID();
  await sql`select pg_notify(${KEY_CHANNEL}, current_schema() || ' ' || ${barrier})`.execute(db);
  const started = performance.now();
  try {
    for (let pause = 1; ; pause = Math.min(2 * pause, 50)) {
      const waiting = await db
        .selectFrom('key_watchers as w')
        .select(['w.id', sql<number>`w.lease_until - ${NOW_MS}`.as('left')])
        .where('w.id', 'in', live)
        .where('w.lease_until', '>', NOW_MS)
        .where((eb) => eb.not(eb.exists(eb.selectFrom('key_acks as a').select('a.watcher').whereRef('a.watcher', '=', 'w.id').where('a.barrier', '=', barrier))))
        .execute();
      if (waiting.length === 0) return;
      if (performance.now() - started > ACK_WAIT_MS) {
        // Evicted, a server can renew no lease: it keeps nothing past the one it holds.
        await db.deleteFrom('key_watchers').where('id', 'in', waiting.map((w) => w.id)).execute();
        await delay(Math.max(...waiting.map((w) => Number(w.left))) + 1);
        return;
      }
      await delay(pause);
    }
  } finally {
    await db.deleteFrom('key_acks').where('barrier', '=', barrier).execute();
  }
}
