/** Rate-limit counters in Redis (used when REDIS_URL is set): the same conditional increment, as one Lua script. */
import { Redis } from 'ioredis';
import type { CounterSlot, CounterStore } from './limiter.ts';

// KEYS[1] counter; ARGV[1] limit; ARGV[2] expiry (Unix ms). Returns the new count, or -1 when full.
const TRY_INCREMENT = `
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
if c >= tonumber(ARGV[1]) then return -1 end
c = redis.call('INCR', KEYS[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return c`;

// KEYS[1], KEYS[2]; ARGV: limit1, expiry1, limit2, expiry2. Returns {c1, c2} with -1 for full / not tried.
const TRY_INCREMENT_BOTH = `
local a = tonumber(redis.call('GET', KEYS[1]) or '0')
if a >= tonumber(ARGV[1]) then return {-1, -1} end
a = redis.call('INCR', KEYS[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
local b = tonumber(redis.call('GET', KEYS[2]) or '0')
if b >= tonumber(ARGV[3]) then return {a, -1} end
b = redis.call('INCR', KEYS[2])
redis.call('PEXPIREAT', KEYS[2], ARGV[4])
return {a, b}`;

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

  async tryIncrementBoth(a: CounterSlot, b: CounterSlot): Promise<{ first: number | null; second: number | null }> {
    const [x, y] = (await this.#redis.eval(TRY_INCREMENT_BOTH, 2, `${this.#prefix}${a.bucket}:${a.windowStart}`, `${this.#prefix}${b.bucket}:${b.windowStart}`,
      a.limit, a.expiresAt.getTime(), b.limit, b.expiresAt.getTime())) as [number, number];
    return { first: x < 0 ? null : Number(x), second: y < 0 ? null : Number(y) };
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
