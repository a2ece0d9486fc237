/**
 * Rate limiting shared by REST and GraphQL: fixed 60 s windows per identity and endpoint, and a
 * per-second burst limit per identity whose overflow waits (up to 5 s) for a later second's slot.
 * Counters live in PostgreSQL (an UNLOGGED table) so limits hold across instances; increments are
 * conditional, so a rejected request never consumes quota.
 */
import type { Pool } from 'pg';
import type { Clock } from '../clock.ts';
import { ServiceError } from '../errors.ts';
import type { Plan } from '../tenancy/tenancy.entities.ts';
import { Batcher } from '../db/batcher.ts';
import type { Rider } from '../db/pairedReads.ts';
import { arrayLiteral } from '../db/rowsets.ts';
import { BURST_PER_SECOND, BURST_QUEUE_MS, WINDOW_SECONDS, endpointLimit } from './plans.ts';

export type RateLimitResult = { limit: number; remaining: number; reset: number };

export type CounterSlot = { bucket: string; windowStart: number; limit: number; expiresAt: Date };

export interface CounterStore {
  /** Adds one to (bucket, window) unless it already holds `limit`; returns the new count, or null when full. */
  tryIncrement(bucket: string, windowStart: number, limit: number, expiresAt: Date): Promise<number | null>;
  /**
   * Both increments in one round trip: `second` is only tried when `first` had room.
   * Returns the new counts (null: full, or not tried). `queued` is handed the take as it is queued
   * when the store batches takes (PgCounterStore): a statement its rider rides in can then tell
   * this request's take among those it carries (the voice POST's gated insert).
   */
  tryIncrementBoth(first: CounterSlot, second: CounterSlot, queued?: (take: CounterTake) => void): Promise<{ first: number | null; second: number | null }>;
  count(bucket: string, windowStart: number): Promise<number>;
  /** Gives back one unit of (bucket, window) taken earlier (never below zero). */
  release(bucket: string, windowStart: number): Promise<void>;
  prune(now: Date): Promise<number>;
  close?(): Promise<void>;
  /**
   * The store's queued takes as a rider of another batched statement on `pool` (platform/db/pairedReads.ts):
   * the requests that both take and read send one statement. Undefined when the store cannot (not
   * PostgreSQL, or another database).
   */
  rider?(pool: Pool): Rider<CounterTake, CounterTaken> | undefined;
}

/** One request's take: the first slot, and the second only when the first had room. */
export type CounterTake = { first: CounterSlot; second: CounterSlot | null };
/** The new counts (null: full, or not tried). */
export type CounterTaken = { first: number | null; second: number | null };

/** One conditional increment of (bucket, window): the row is created at 1 or moved by 1 while under `limit`; locked, unchanged and not returned when full. */
const TAKE_ONE = (n: number) => `insert into rate_limit_counters as c (bucket, window_start, count, expires_at) values ($${n}, $${n + 1}, 1, $${n + 2})
  on conflict (bucket, window_start) do update set count = c.count + 1, expires_at = greatest(c.expires_at, excluded.expires_at) where c.count < $${n + 3}
  returning count`;

/**
 * A batch of one request (every request at low load) as one plain statement: the burst slot, then
 * the window only when the burst had room (`from f`). It answers as `rate_limit_take` would, in
 * about a third of its time (0.24 vs 0.82 ms p50 from an idle process on the 2-core machine: the
 * function's set-up — array aggregation, a join, a loop, three statements — costs more than the
 * work for one request). Its two rows are locked in the function's global order (every burst
 * bucket `b:…` sorts before every window bucket `w:…`), so it cannot deadlock with a batch.
 */
const TAKE_BOTH_SQL = `with f as (${TAKE_ONE(1)}), s as (${TAKE_ONE(5).replace('values ($5, $6, 1, $7)', 'select $5, $6, 1, $7 from f')})
  select (select count from f) as first_count, (select count from s) as second_count`;
const TAKE_FIRST_SQL = `with f as (${TAKE_ONE(1)}) select (select count from f) as first_count, null::integer as second_count`;

/** A batch of takes as `rate_limit_take`'s eight arrays (each column one array literal: platform/db/rowsets.ts). */
function takeColumns(takes: readonly CounterTake[]): string[] {
  const column = (pick: (t: CounterTake) => string | number | Date | null) => arrayLiteral(takes.map(pick));
  return [
    column((t) => t.first.bucket), column((t) => t.first.windowStart), column((t) => t.first.limit), column((t) => t.first.expiresAt),
    column((t) => t.second?.bucket ?? null), column((t) => t.second?.windowStart ?? null), column((t) => t.second?.limit ?? null), column((t) => t.second?.expiresAt ?? null),
  ];
}

/** `rate_limit_take`'s rows (`idx` from 1, in the batch's order) as each take's counts. */
function takenByIdx(rows: readonly { idx: number | string; first_count: number | null; second_count: number | null }[], count: number): CounterTaken[] {
  const byIdx = new Map(rows.map((r) => [Number(r.idx), r]));
  return Array.from({ length: count }, (_, i) => {
    const r = byIdx.get(i + 1);
    return { first: r?.first_count ?? null, second: r?.second_count ?? null };
  });
}

/** A batch's call of `rate_limit_take` from parameter `$first` on. */
const takeSql = (first: number) => `select idx, first_count, second_count from rate_limit_take(${Array.from({ length: 8 }, (_, i) => `$${first + i}`).join(', ')})`;

/**
 * Counters in PostgreSQL. Increments of concurrent requests are batched (platform/db/batcher.ts)
 * into one call of `rate_limit_take` (see its migration): one round trip for a whole batch, with the
 * same answers as if the requests had come one by one; a batch of one is a single statement
 * (TAKE_BOTH_SQL).
 */
export class PgCounterStore implements CounterStore {
  readonly #pool: Pool;
  readonly #batcher: Batcher<CounterTake, CounterTaken>;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.#batcher = new Batcher((takes) => this.#take(takes), { maxInFlight: 1 });
  }

  async #take(takes: CounterTake[]): Promise<CounterTaken[]> {
    const only = takes.length === 1 ? takes[0]! : undefined;
    // A limit below 1 never admits: the single statement would insert its row at 1, so the function answers it.
    if (only && only.first.limit >= 1 && (only.second === null || only.second.limit >= 1)) return [await this.#takeOne(only.first, only.second)];
    const { rows } = await this.#pool.query<{ idx: number; first_count: number | null; second_count: number | null }>({
      name: 'rate_limit_take', text: takeSql(1), values: takeColumns(takes),
    });
    return takenByIdx(rows, takes.length);
  }

  /**
   * The queued takes ride along with a statement of `pool`'s batched reads that goes out in the same
   * turn (the voice call lookups: each POST takes its slots and reads at once), as one call of
   * `rate_limit_take` inside it; the takes answer exactly as from their own statement.
   */
  rider(pool: Pool): Rider<CounterTake, CounterTaken> | undefined {
    if (pool !== this.#pool) return undefined;
    return {
      part: {
        params: 8,
        sql: takeSql,
        values: takeColumns,
        answers: (rows, takes) => takenByIdx(rows as { idx: number; first_count: number | null; second_count: number | null }[], takes.length),
      },
      handOver: () => this.#batcher.handOver(),
      follow: (leaderFlushing) => this.#batcher.follow(leaderFlushing),
    };
  }

  async #takeOne(first: CounterSlot, second: CounterSlot | null): Promise<{ first: number | null; second: number | null }> {
    const slot = (t: CounterSlot) => [t.bucket, t.windowStart, t.expiresAt, t.limit];
    const { rows } = await this.#pool.query<{ first_count: number | null; second_count: number | null }>(second
      ? { name: 'rate_limit_take_both', text: TAKE_BOTH_SQL, values: [...slot(first), ...slot(second)] }
      : { name: 'rate_limit_take_first', text: TAKE_FIRST_SQL, values: slot(first) });
    return { first: rows[0]?.first_count ?? null, second: rows[0]?.second_count ?? null };
  }

  async tryIncrement(bucket: string, windowStart: number, limit: number, expiresAt: Date): Promise<number | null> {
    return (await this.#batcher.submit({ first: { bucket, windowStart, limit, expiresAt }, second: null })).first;
  }

  async tryIncrementBoth(a: CounterSlot, b: CounterSlot, queued?: (take: CounterTake) => void): Promise<{ first: number | null; second: number | null }> {
    const take = { first: a, second: b };
    queued?.(take);
    return this.#batcher.submit(take);
  }

  async count(bucket: string, windowStart: number): Promise<number> {
    const { rows } = await this.#pool.query('select count from rate_limit_counters where bucket = $1 and window_start = $2', [bucket, windowStart]);
    return rows[0] ? Number(rows[0].count) : 0;
  }

  async release(bucket: string, windowStart: number): Promise<void> {
    await this.#pool.query('update rate_limit_counters set count = count - 1 where bucket = $1 and window_start = $2 and count > 0', [bucket, windowStart]);
  }

  async prune(now: Date): Promise<number> {
    const { rowCount } = await this.#pool.query('delete from rate_limit_counters where expires_at < $1', [now]);
    return rowCount ?? 0;
  }
}

export class RateLimiter {
  readonly #store: CounterStore;
  readonly #clock: Clock;

  constructor(store: CounterStore, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
  }

  get store(): CounterStore {
    return this.#store;
  }

  #windowSlot(identity: string, plan: Plan, endpoint: string, nowMs: number): CounterSlot & { reset: number } {
    const limit = endpointLimit(plan, endpoint);
    const windowStart = Math.floor(nowMs / 1000 / WINDOW_SECONDS) * WINDOW_SECONDS;
    const reset = windowStart + WINDOW_SECONDS;
    return { bucket: `w:${identity}:${endpoint}`, windowStart, limit, expiresAt: new Date(reset * 1000 + 60_000), reset };
  }

  #windowResult(slot: CounterSlot & { reset: number }, count: number | null, nowMs: number, endpoint: string): RateLimitResult {
    const { limit, reset } = slot;
    if (count === null) {
      const retryAfter = Math.max(1, Math.ceil(reset - nowMs / 1000));
      throw new ServiceError('RATE_LIMIT_EXCEEDED', `Rate limit of ${limit} requests per ${WINDOW_SECONDS} s exceeded for ${endpoint}`,
        { retry_after: retryAfter, limit, window: `${WINDOW_SECONDS}s`, endpoint },
        { headers: { 'Retry-After': String(retryAfter), ...headersOf({ limit, remaining: 0, reset }) } });
    }
    return { limit, remaining: Math.max(0, limit - count), reset };
  }

  /** Where `identity` stands in `endpoint`'s current window, counting nothing. */
  async peek(identity: string, plan: Plan, endpoint: string): Promise<RateLimitResult> {
    const slot = this.#windowSlot(identity, plan, endpoint, this.#clock.now().getTime());
    const used = await this.#store.count(slot.bucket, slot.windowStart);
    return { limit: slot.limit, remaining: Math.max(0, slot.limit - used), reset: slot.reset };
  }

  /** Counts one request of `identity` against `endpoint`'s per-minute window; throws RATE_LIMIT_EXCEEDED when full. */
  async consume(identity: string, plan: Plan, endpoint: string): Promise<RateLimitResult> {
    const nowMs = this.#clock.now().getTime();
    const slot = this.#windowSlot(identity, plan, endpoint, nowMs);
    return this.#windowResult(slot, await this.#store.tryIncrement(slot.bucket, slot.windowStart, slot.limit, slot.expiresAt), nowMs, endpoint);
  }

  /**
   * Burst slot and window count in one round trip when this second has room (the common case);
   * otherwise the burst queue, then the window. `queued`: the store's take of burst and window
   * (CounterStore.tryIncrementBoth); admitted exactly when both its counts come back.
   */
  async admit(identity: string, plan: Plan, endpoint: string, queued?: (take: CounterTake) => void): Promise<RateLimitResult> {
    const nowMs = this.#clock.now().getTime();
    const second = Math.floor(nowMs / 1000);
    const burst: CounterSlot = { bucket: `b:${identity}`, windowStart: second, limit: BURST_PER_SECOND[plan], expiresAt: new Date((second + 60) * 1000) };
    const window = this.#windowSlot(identity, plan, endpoint, nowMs);
    const both = await this.#store.tryIncrementBoth(burst, window, queued);
    if (both.first !== null) return this.#windowResult(window, both.second, nowMs, endpoint);
    await this.acquireBurst(identity, plan, second + 1);
    return this.consume(identity, plan, endpoint);
  }

  /**
   * Gives back the window unit `admit` counted for a request that then did not run the endpoint at
   * all (a GraphQL document refused before execution), so a refused request costs no quota. The
   * burst slot stays taken.
   */
  async release(identity: string, plan: Plan, endpoint: string, counted: RateLimitResult): Promise<void> {
    const slot = this.#windowSlot(identity, plan, endpoint, (counted.reset - WINDOW_SECONDS) * 1000);
    await this.#store.release(slot.bucket, slot.windowStart);
  }

  /**
   * Takes one slot of `identity`'s per-second burst allowance. When this second is full the request
   * queues for the first later second with a free slot, up to BURST_QUEUE_MS, then is rejected.
   */
  async acquireBurst(identity: string, plan: Plan, from?: number): Promise<void> {
    const limit = BURST_PER_SECOND[plan];
    const nowMs = this.#clock.now().getTime();
    const first = Math.floor(nowMs / 1000);
    for (let second = from ?? first; second * 1000 <= nowMs + BURST_QUEUE_MS; second++) {
      const count = await this.#store.tryIncrement(`b:${identity}`, second, limit, new Date((second + 60) * 1000));
      if (count !== null) {
        if (second > first) await this.#clock.sleep(second * 1000 - this.#clock.now().getTime());
        return;
      }
    }
    const retryAfter = Math.max(1, Math.ceil((nowMs + BURST_QUEUE_MS) / 1000 - nowMs / 1000));
    throw new ServiceError('BURST_LIMIT_EXCEEDED', `More than ${limit} requests per second, and the queue is full`,
      { retry_after: retryAfter, limit, window: '1s' }, { headers: { 'Retry-After': String(retryAfter) } });
  }
}

export function headersOf(r: RateLimitResult): Record<string, string> {
  return { 'X-RateLimit-Limit': String(r.limit), 'X-RateLimit-Remaining': String(r.remaining), 'X-RateLimit-Reset': String(r.reset) };
}
