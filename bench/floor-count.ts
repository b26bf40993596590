/**
 * The least an exact rate limit shared through Redis does (the floor's, bench/bare-server.ts):
 * one script call counts the requests of a turn, each school's under a key that expires a
 * minute after its first (a fixed window), and answers each school's count and the
 * milliseconds left of its window.
 */
import { Redis } from 'ioredis';

const COUNT_SCRIPT = `local out = {}
for i, key in ipairs(KEYS) do
  local used = redis.call('INCRBY', key, ARGV[i])
  if used == tonumber(ARGV[i]) then redis.call('PEXPIRE', key, 60000) end
  out[2 * i - 1] = used
  out[2 * i] = redis.call('PTTL', key)
end
return out`;

/** How long a call may go unanswered: longer than the service's default limit (250 ms), so a busy floor is not taken for a slow Redis. */
const COMMAND_TIMEOUT_MS = 1000;

export interface FloorCounter {
  /** Counts `counts[i]` requests of the school `keys[i]`; the reply is each school's count and ms left, in turn. */
  count(keys: string[], counts: number[]): Promise<number[]>;
  /** Resolves once connected (calls made before fail: nothing is queued). */
  ready(): Promise<void>;
  disconnect(): void;
}

/**
 * A client calling the script by its hash (EVALSHA), as the service calls its own. Like the
 * service's, it fails a call rather than wait: nothing is queued while disconnected, and a
 * call Redis leaves unanswered fails after COMMAND_TIMEOUT_MS.
 */
export function floorCounter(url: string): FloorCounter {
  const redis = new Redis(url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, commandTimeout: COMMAND_TIMEOUT_MS }) as Redis & {
    floorCount(keys: number, ...args: (string | number)[]): Promise<number[]>;
  };
  // A failed call is the caller's to answer (with 503); the connection's errors say nothing more.
  redis.on('error', () => undefined);
  redis.defineCommand('floorCount', { lua: COUNT_SCRIPT });
  return {
    count: (keys, counts) => redis.floorCount(keys.length, ...keys, ...counts),
    ready: () => (redis.status === 'ready' ? Promise.resolve() : new Promise((resolve) => redis.once('ready', () => resolve()))),
    disconnect: () => redis.disconnect(),
  };
}
