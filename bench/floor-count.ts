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

export interface FloorCounter {
  /** Counts `counts[i]` requests of the school `keys[i]`; the reply is each school's count and ms left, in turn. */
  count(keys: string[], counts: number[]): Promise<number[]>;
  disconnect(): void;
}

/** A client calling the script by its hash (EVALSHA), as the service calls its own. */
export function floorCounter(url: string): FloorCounter {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 }) as Redis & { floorCount(keys: number, ...args: (string | number)[]): Promise<number[]> };
  redis.defineCommand('floorCount', { lua: COUNT_SCRIPT });
  return {
    count: (keys, counts) => redis.floorCount(keys.length, ...keys, ...counts),
    disconnect: () => redis.disconnect(),
  };
}
