/**
 * Rate-limit counters in Redis (used when REDIS_URL is set): the same conditional increments, as
 * Lua scripts. Concurrent takes are batched (platform/db/batcher.ts) into one script call that
 * serves them in order, atomically (Redis runs a script alone).
 */
import { Redis } from 'ioredis';
import { Batcher } from '../db/batcher.ts';
import { ServiceError, UNAVAILABLE_RETRY_AFTER_SECONDS } from '../errors.ts';
import type { CounterSlot, CounterStore } from './limiter.ts';

// KEYS: two per take (first, second; second repeats first when there is none). ARGV: per take
// limit1, expiry1, limit2 (-1: no second), expiry2. Returns two numbers per take, -1 for full / not tried.
const TAKE_BATCH = `
local out = {}
for i = 1, #KEYS / 2 do
  local k1, k2 = KEYS[2 * i - 1], KEYS[2 * i]
  local l1, e1, l2, e2 = tonumber(ARGV[4 * i - 3]), ARGV[4 * i - 2], tonumber(ARGV[4 * i - 1]), ARGV[4 * i]
  local a = tonumber(redis.call('GET', k1) or '0')
  local b = -1
  if a >= l1 then
    a = -1
  else
    a = redis.call('INCR', k1)
    redis.call('PEXPIREAT', k1, e1)
    if l2 >= 0 then
      b = tonumber(redis.call('GET', k2) or '0')
      if b >= l2 then
        b = -1
      else
        b = redis.call('INCR', k2)
        redis.call('PEXPIREAT', k2, e2)
      end
    end
  end
  out[2 * i - 1] = a
  out[2 * i] = b
end
return out`;

// KEYS[1] counter: one unit back, never below zero.
const RELEASE = `
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
if c > 0 then redis.call('DECR', KEYS[1]) end
return 0`;

type Take = { first: CounterSlot; second: CounterSlot | null };

export class RedisCounterStore implements CounterStore {
  readonly #redis: Redis;
  readonly #prefix: string;

  /**
   * `timeoutMs` bounds the connection attempt and every command (REDIS_TIMEOUT_MS): a Redis that is
   * down or hangs fails the request's admission with 503 SERVICE_UNAVAILABLE instead of holding it.
   */
  constructor(url: string, prefix = 'rl:', timeoutMs = 1000) {
    this.#redis = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true, connectTimeout: timeoutMs, commandTimeout: timeoutMs });
    this.#redis.on('error', () => { /* surfaced by the failing command */ });
    this.#prefix = prefix;
  }

  async #call<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch {
      throw new ServiceError('SERVICE_UNAVAILABLE', 'The rate-limit store is not reachable right now; retry with exponential backoff',
        { retry_after: UNAVAILABLE_RETRY_AFTER_SECONDS }, { headers: { 'Retry-After': String(UNAVAILABLE_RETRY_AFTER_SECONDS) } });
    }
  }

  readonly #batcher = new Batcher<Take, { first: number | null; second: number | null }>((takes) => this.#take(takes), { maxInFlight: 2 });

  async #take(takes: Take[]): Promise<{ first: number | null; second: number | null }[]> {
    const key = (slot: CounterSlot) => `${this.#prefix}${slot.bucket}:${slot.windowStart}`;
    const keys = takes.flatMap((t) => [key(t.first), key(t.second ?? t.first)]);
    const args = takes.flatMap((t) => [t.first.limit, t.first.expiresAt.getTime(), t.second ? t.second.limit : -1, (t.second ?? t.first).expiresAt.getTime()]);
    const out = (await this.#call(() => this.#redis.eval(TAKE_BATCH, keys.length, ...keys, ...args))) as number[];
    return takes.map((_, i) => {
      const a = Number(out[2 * i]);
      const b = Number(out[2 * i + 1]);
      return { first: a < 0 ? null : a, second: b < 0 ? null : b };
    });
  }

  async tryIncrement(bucket: string, windowStart: number, limit: number, expiresAt: Date): Promise<number | null> {
    return (await this.#batcher.submit({ first: { bucket, windowStart, limit, expiresAt }, second: null })).first;
  }

  async tryIncrementBoth(a: CounterSlot, b: CounterSlot): Promise<{ first: number | null; second: number | null }> {
    return this.#batcher.submit({ first: a, second: b });
  }

  async count(bucket: string, windowStart: number): Promise<number> {
    return Number((await this.#call(() => this.#redis.get(`${this.#prefix}${bucket}:${windowStart}`))) ?? 0);
  }

  async release(bucket: string, windowStart: number): Promise<void> {
    await this.#call(() => this.#redis.eval(RELEASE, 1, `${this.#prefix}${bucket}:${windowStart}`));
  }

  /** Redis expires counters itself. */
  async prune(): Promise<number> {
    return 0;
  }

  async close(): Promise<void> {
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }
}
