/**
 * Key usage (request counter and last use) is counted in memory and written in
 * batches: one UPDATE per used key per flush, never a write per request. Increments
 * are relative (`request_count + n`), so any number of instances can count the same
 * key; a failed flush keeps its counts for the next one; close() flushes what is left.
 */
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../db/schema.js';
import { formatTimestamp } from '../domain/time.js';

interface Pending {
  count: number;
  /** Epoch milliseconds: formatted once per flush, not once per request. */
  lastUsedAt: number;
}

export class UsageRecorder {
  private pending = new Map<string, Pending>();
  private timer: NodeJS.Timeout | null;
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly log: Logger,
    flushMs: number,
  ) {
    this.timer = setInterval(() => void this.flush(), flushMs);
    this.timer.unref();
  }

  record(keyId: string): void {
    const now = Date.now();
    const entry = this.pending.get(keyId);
    if (entry) {
      entry.count += 1;
      entry.lastUsedAt = now;
    } else {
      this.pending.set(keyId, { count: 1, lastUsedAt: now });
    }
  }

  /** Writes the pending counts. Concurrent calls share one write. */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async write(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    try {
      await this.db.transaction().execute(async (trx) => {
        for (const [id, pending] of batch) {
          const { count } = pending;
          const lastUsedAt = formatTimestamp(pending.lastUsedAt);
          await trx
            .updateTable('api_keys')
            .set((eb) => ({
              request_count: eb('request_count', '+', count),
              last_used_at: eb
                .case()
                .when(eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', lastUsedAt)]))
                .then(lastUsedAt)
                .else(eb.ref('last_used_at'))
                .end(),
            }))
            .where('id', '=', id)
            .execute();
        }
      });
    } catch (err) {
      // Keep the counts: they are merged into what arrived meanwhile and retried.
      for (const [id, entry] of batch) {
        const now = this.pending.get(id);
        if (now) {
          now.count += entry.count;
          if (entry.lastUsedAt > now.lastUsedAt) now.lastUsedAt = entry.lastUsedAt;
        } else {
          this.pending.set(id, entry);
        }
      }
      this.log.warn({ err, keys: batch.size }, 'usage flush failed; will retry');
    }
  }

  /** Stops the timer and writes everything still pending, retrying briefly. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (let attempt = 0; attempt < 5; attempt++) {
      await this.flush();
      if (this.pending.size === 0) return;
      await new Promise((r) => setTimeout(r, 200 * (attempt + 1)));
    }
    this.log.error({ keys: this.pending.size }, 'usage counts could not be written before shutdown');
  }
}
