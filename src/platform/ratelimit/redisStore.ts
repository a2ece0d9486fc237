/** Rate-limit counters in Redis (used when REDIS_URL is set): the same conditional increment, as one Lua script. */
import { Redis } from 'ioredis';
import type { CounterStore } from './limiter.ts';

// KEYS[1] counter; ARGV[1] limit; ARGV[2] expiry (Unix ms). Returns the new count, or -1 when full.
const TRY_INCREMENT = `
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
if c >= tonumber(ARGV[1]) then return -1 end
c = redis.call('INCR', KEYS[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return c`;

export class RedisCounterStore implements CounterStore {
  readonly #redis: Redis;
  readonly #prefix: string;

  constructor(url: string, prefix = 'rl:') {
    this.#redis = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true });
    this.#redis.on('error', () => { /* surfaced by the failing command */ });
    this.#prefix = prefix;
  }

  async tryIncrement(bucket: string, windowStart: number, limit: number, expiresAt: Date): Promise<number | null> {
    const n = Number(await this.#redis.eval(TRY_INCREMENT, 1, `${this.#prefix}${bucket}:${windowStart}`, limit, expiresAt.getTime()));
    return n < 0 ? null : n;
  }

  async count(bucket: string, windowStart: number): Promise<number> {
    return Number((await this.#redis.get(`${this.#prefix}${bucket}:${windowStart}`)) ?? 0);
  }

  /** Redis expires counters itself. */
  async prune(): Promise<number> {
    return 0;
  }

  async close(): Promise<void> {
    await this.#redis.quit();
  }
}
