/**
 * The sandbox gateway's timeline: the placement and the delayed steps of test-mode calls as rows
 * of `voice_sandbox_events` (call, seq, due_at, event) instead of one pg-boss job each (a job is
 * fetched, completed and archived in statements of its own; a sandbox call had five). A test
 * call's script is a chain (providers/voice/types.ts chainScript): its first step's row (seq 1)
 * commits with the call (its group commit) and carries the later steps with their due times; the
 * locked change that applies a step adds the next one's row (nextRow), so a call has one pending
 * step at a time and a call that ended schedules nothing more. Until session 16 every step's row
 * was written with the call: four rows per call on the POST path, and rows of hung-up calls were
 * still claimed and applied as no-ops. A placement row (seq 0: a gateway without a script) is
 * placed by the ticker, and the sandbox writes its chain's first step `on conflict do nothing`, so
 * a repeated placement schedules nothing twice.
 *
 * Each instance running the workers has one ticker: one statement claims every due row (up to a
 * batch, `for update skip locked`, so instances share them) by moving its `due_at` a lease ahead;
 * the placements are made together (calls/gateway.ts), and the steps applied together under their
 * calls' row locks, each step's row deleted in the transaction that applies it: exactly once in
 * effect. A crash between claim and apply leaves the row, due again when the lease lapses; a step
 * that came before its turn (EventTooEarly) or failed is due again shortly, and dropped (logged)
 * after MAX_ATTEMPTS. The ticker looks every `tickMs`, and when a step this instance scheduled
 * falls due sooner: every step of a call's script, not only its first (the due times are kept,
 * DueTimes, and the loop is woken for the next one after each tick; steps due within GATHER_MS
 * of the previous look wait for the next one, so a stream of due steps costs a claim and a
 * transaction per GATHER_MS, not per step). Before, only the script's first step woke the loop:
 * the later ones (answer, hangup) waited for the next look, up to `tickMs` late, and were applied
 * in the larger batch that had gathered meanwhile.
 *
 * A process that stores steps but runs no ticker (`--no-workers`: the POST path writes each test
 * call's first step) tells the others when they fall due, after its commit: a NOTIFY on
 * TIMELINE_CHANNEL with their due times, which every ticker LISTENs for and wakes on like its own
 * (`expect`). Without it such a step waited for a ticker's regular look, up to `tickMs` late, and
 * was applied in the larger batch gathered meanwhile: with the roles split, `callUpdated`'s
 * ringing arrived 18–20 ms after the step at the median against 5–7 in one process
 * (docs/benchmarks.md, voice, session 22). A notice lost (no ticker listening, a reconnection)
 * leaves the regular look, as before.
 *
 * Every answered call's `max_duration` timer (live and test calls alike) is a row here too (seq
 * TIMER_SEQ), committed with the change that answers the call and deleted with the one that ends
 * it; when it falls due first, the ticker ends the call in a locked transaction that deletes the
 * row (the same lease and retries: a crash fires it again, the end applies once). Other call
 * timers (IVR waits, voicemail length) are still pg-boss jobs.
 */
import type { Pool } from 'pg';
import type { Logger } from '../../../platform/logger.ts';
import type { TenantRef } from '../../../platform/db/tenant.ts';
import { systemScope, type Scope } from '../../../platform/auth/scope.ts';
import type { Plan } from '../../../platform/tenancy/tenancy.entities.ts';
import { Batcher } from '../../../platform/db/batcher.ts';
import { DueTicker, settleDue, type DueTable } from '../../../platform/jobs/dueTicker.ts';
import { asError } from '../../../platform/errors.ts';
import { Listener } from '../../../platform/db/listen.ts';
import { chainScript, nextInChain, type GatewayEvent, type GatewayEventSink, type PlaceScript, type VoiceGateway } from '../../../providers/voice/types.ts';
import type { Call } from '../voice.entities.ts';
import { EventTooEarly } from '../voice.states.ts';

/** The placement of a test call: its row commits with the call. */
export type PlaceStep = { type: 'place'; organizationId: string; mode: 'live' | 'test'; plan: Plan; requestId: string };
/**
 * A call's `max_duration` timer (any mode): its row (seq TIMER_SEQ) commits with the answer, and is
 * deleted with the change that ends the call or, when due first, with the one that ends it by its
 * timer (calls/gateway.ts).
 */
export type TimerStep = { type: 'timer'; kind: 'max_duration' };
/** The seq of a call's max_duration timer row (the sandbox's steps are 1…, its placement 0). */
export const TIMER_SEQ = -1;
/** A claimed row, with its call's tenant (null: no such call). */
type Claimed = { call_id: string; seq: number; attempts: number; event: GatewayEvent | PlaceStep | TimerStep; tenant: TenantRef | null };

/** A claimed row is due again after this when its instance did not finish it. */
const LEASE_SECONDS = 15;
/** Due again after this when it came too early or failed (× attempts for failures). */
const RETRY_MS = 200;
const MAX_ATTEMPTS = 8;

export const TIMELINE_TABLE = 'voice_sandbox_events';

/** The sandbox steps' table as `settleDue` sees it: finished steps deleted, the others due again. */
export const TIMELINE_DUE: DueTable<Claimed> = {
  statement: 'voice_timeline_settle',
  table: TIMELINE_TABLE,
  keys: [{ column: 'call_id', type: 'text' }, { column: 'seq', type: 'int' }],
  key: (r) => [r.call_id, r.seq],
};

/** The row of a call's placement (seq 0, due at once), for the call's group commit. */
export function placeRow(scope: Scope, callId: string, now: Date): Record<string, unknown> {
  const event: PlaceStep = { type: 'place', organizationId: scope.organizationId, mode: scope.mode, plan: scope.plan, requestId: scope.requestId };
  return { call_id: callId, seq: 0, due_at: now, event };
}

/**
 * The row of a placement's script (PlaceScript) for the call's group commit: its first step, due
 * `delayMs` after `now`, carrying the rest (chainScript); none for an empty script.
 */
export function scriptRows(script: PlaceScript, now: Date): Record<string, unknown>[] {
  const first = chainScript(script, now.getTime());
  return first ? [{ call_id: first.event.callId, seq: first.event.seq, due_at: new Date(now.getTime() + first.delayMs), event: first.event }] : [];
}

/** The timeline row of the step after `event` in its chain (nextInChain), or undefined at its end. */
export function nextRow(event: GatewayEvent): { call_id: string; seq: number; due_at: Date; event: GatewayEvent } | undefined {
  const next = nextInChain(event);
  return next ? { call_id: next.event.callId, seq: next.event.seq, due_at: new Date(next.dueMs), event: next.event } : undefined;
}

/**
 * A test call's rows of the timeline, for its group commit: its gateway's script (the call placed
 * as it commits: the reference is noted on the call), else a placement row; and when each is due
 * (ms since the epoch).
 */
export function timelinePlacement(gateway: VoiceGateway, scope: Scope, call: Call): { rows: Record<string, unknown>[]; due: number[] } {
  const script = gateway.script?.({ callId: call.id, from: call.from, to: call.to, record: call.record });
  if (!script) return { rows: [placeRow(scope, call.id, call.createdAt)], due: [Date.now()] };
  call.gatewayReference = script.reference;
  const first = script.events[0];
  return { rows: scriptRows(script, call.createdAt), due: first ? [Date.now() + first.delayMs] : [] };
}

/** The row of a call's max_duration timer, due at `due`, for the locked change that answers it. */
export function timerRow(callId: string, due: Date): { call_id: string; seq: number; due_at: Date; event: TimerStep } {
  return { call_id: callId, seq: TIMER_SEQ, due_at: due, event: { type: 'timer', kind: 'max_duration' } };
}

/** The columns of placeRow, scriptRows and timerRow. */
export const TIMELINE_COLUMNS = ['call_id', 'seq', 'due_at', 'event'];

export type TimelineTarget = {
  /** Places the calls (a gateway refusal fails its call); one result per item. */
  placeBatch(items: { scope: Scope; callId: string }[]): Promise<(void | Error)[]>;
  /** Applies the steps (their calls' tenants known), deleting each applied step's row in its transaction (`consumed` gets `callId:seq`). */
  applyBatch(events: GatewayEvent[], consumed: Set<string>, tenants: ReadonlyMap<string, TenantRef>): Promise<(void | Error)[]>;
  /** Fires the calls' max_duration timers (their tenants known), each row deleted in the transaction that ends its call (`consumed` as above). */
  fireTimers(callIds: string[], consumed: Set<string>, tenants: ReadonlyMap<string, TenantRef>): Promise<(void | Error)[]>;
};

/** Where processes without a ticker tell the tickers when the steps they stored fall due (comma-separated ms since the epoch). */
export const TIMELINE_CHANNEL = 'voice_timeline';
/** Due times one notice carries at most (~14 bytes each, under the 8,000-byte NOTIFY limit): later ones wait for a regular look. */
const TOLD_MAX = 400;

/** The due times of a TIMELINE_CHANNEL notice (what does not read as a time is left out). */
export function toldDue(payload: string | undefined): number[] {
  return (payload ?? '').split(',').map(Number).filter((at) => Number.isFinite(at) && at > 0);
}

/** The payload telling `due` (distinct, soonest first, at most TOLD_MAX). */
export function tellDue(due: readonly number[]): string {
  return [...new Set(due.map((at) => Math.round(at)))].sort((a, b) => a - b).slice(0, TOLD_MAX).join(',');
}

/** Steps due within this of the previous look wait for the next one (ms): a tick claims them together. */
export const GATHER_MS = 10;
/** Due times kept at most (a step beyond them is found by the regular look, `tickMs`). */
const DUE_TIMES_KEPT = 100_000;

/**
 * The due times of steps this instance scheduled, soonest first (a binary min-heap): the ticker
 * is woken for each, not only for the soonest at the time it was scheduled.
 */
export class DueTimes {
  readonly #heap: number[] = [];
  readonly #max: number;

  constructor(max = DUE_TIMES_KEPT) {
    this.#max = max;
  }

  get size(): number {
    return this.#heap.length;
  }

  /** Keeps `at` (ms since the epoch); false when full (the regular look finds that step). */
  add(at: number): boolean {
    const h = this.#heap;
    if (h.length >= this.#max) return false;
    h.push(at);
    for (let i = h.length - 1; i > 0;) {
      const up = (i - 1) >> 1;
      if (h[up]! <= h[i]!) break;
      [h[up], h[i]] = [h[i]!, h[up]!];
      i = up;
    }
    return true;
  }

  /** Forgets the times up to `at` (a look then claimed what was due) and returns the next one after, if any. */
  after(at: number): number | undefined {
    const h = this.#heap;
    while (h.length > 0 && h[0]! <= at) {
      const last = h.pop()!;
      if (h.length === 0) break;
      h[0] = last;
      for (let i = 0; ;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && h[l]! < h[m]!) m = l;
        if (r < h.length && h[r]! < h[m]!) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i]!, h[m]!];
        i = m;
      }
    }
    return h[0];
  }
}

/**
 * Rows a tick claims and applies in one transaction. A step's subscribers hear of it when its
 * transaction commits, so a wave of steps due at once (a burst of calls placed together rings
 * together) waits for the batches ahead of it: 96 rather than 256 kept `callUpdated`'s p99 within
 * the target once calls were accepted faster (docs/benchmarks.md, voice session 18); a full batch
 * claims the next at once, so a wave still goes as fast as the batches commit.
 */
export const TIMELINE_BATCH = 96;

/**
 * A tick's claim: up to $1 due rows, leased for $2 seconds, with their calls' tenants. The locking
 * subquery is an InitPlan (`= any(array(…))`: run once, its rows' ctids then updated), never a
 * join's inner side: a generic plan made while the table was empty (a named statement planned
 * between two bursts) put it inside a nested loop, rescanned once per row of the table, and each
 * rescan locked and leased more rows: a claim of 96 took all ~1,800 due rows in 200–500 ms
 * (docs/benchmarks.md, voice, session 19; test/claims-plans.test.ts).
 */
export const TIMELINE_CLAIM_SQL = `update voice_sandbox_events e set due_at = now() + make_interval(secs => $2), attempts = e.attempts + 1
   where e.ctid = any(array(select ctid from voice_sandbox_events where due_at <= now() order by due_at limit $1 for update skip locked))
   returning e.call_id, e.seq, e.attempts, e.event,
             (select jsonb_build_object('organizationId', c.organization_id, 'mode', c.mode) from calls c where c.id = e.call_id) as tenant`;

export class SandboxTimeline extends DueTicker implements GatewayEventSink {
  readonly #pool: Pool;
  readonly #log: Logger;
  readonly #batch: number;
  #target: TimelineTarget | undefined;
  /** When the steps this instance scheduled fall due (DueTimes). */
  readonly #due = new DueTimes();
  readonly #inserts = new Batcher<{ event: GatewayEvent; delayMs: number }, void>(async (items) => {
    await this.#pool.query({
      name: 'voice_timeline_schedule',
      text: `insert into voice_sandbox_events (call_id, seq, due_at, event)
             select r.call_id, r.seq, now() + make_interval(secs => r.delay_ms / 1000.0), r.event
               from unnest($1::text[], $2::int[], $3::int[], $4::jsonb[]) as r(call_id, seq, delay_ms, event)
             on conflict (call_id, seq) do nothing`,
      values: [items.map((i) => i.event.callId), items.map((i) => i.event.seq), items.map((i) => Math.max(0, Math.round(i.delayMs))), items.map((i) => JSON.stringify(i.event))],
    });
    return items.map(() => undefined);
  }, { maxInFlight: 2, isolate: true });

  /** Due times this process (no ticker here) tells the tickers, gathered into one NOTIFY while one is on its way. */
  readonly #tell = new Batcher<readonly number[], void>(async (items) => {
    await this.#pool.query({ name: 'voice_timeline_tell', text: 'select pg_notify($1, $2)', values: [TIMELINE_CHANNEL, tellDue(items.flat())] });
    return items.map(() => undefined);
  });
  readonly #listen: { url: string; connectTimeoutMs: number } | undefined;
  #listener: Listener | undefined;

  /**
   * `batch`: most rows one tick claims and applies in one transaction (default TIMELINE_BATCH);
   * `listen`: where the ticker LISTENs for TIMELINE_CHANNEL (without it, it hears nothing of other processes' steps).
   */
  constructor(deps: { pool: Pool; log: Logger; tickMs: number; batch?: number; listen?: { url: string; connectTimeoutMs: number } }) {
    super({ batch: deps.batch ?? TIMELINE_BATCH, tickMs: deps.tickMs, log: deps.log, name: 'voice sandbox timeline' });
    this.#pool = deps.pool;
    this.#log = deps.log;
    this.#batch = deps.batch ?? TIMELINE_BATCH;
    this.#listen = deps.listen;
  }

  /** Starts the ticker and its LISTEN for the steps other processes store (a reconnection looks at once: notices were missed). */
  async run(): Promise<void> {
    this.start();
    if (!this.#listen || this.#listener) return;
    this.#listener = new Listener({
      ...this.#listen, channel: TIMELINE_CHANNEL, log: this.#log,
      onNotification: (payload) => this.expect(toldDue(payload)),
      onReconnect: () => this.wake(Date.now()),
    });
    await this.#listener.start();
  }

  override async stop(): Promise<void> {
    const listener = this.#listener;
    this.#listener = undefined;
    await listener?.stop();
    await super.stop();
  }

  /** The gateway side that places and applies (calls/gateway.ts; set once both exist). */
  bind(target: TimelineTarget): void {
    this.#target = target;
  }

  /** The sandbox gateway's sink: the step is stored (once per call and seq) before this resolves. */
  async schedule(event: GatewayEvent, delayMs: number): Promise<void> {
    await this.#inserts.submit({ event, delayMs });
    this.expect([Date.now() + delayMs]);
  }

  /**
   * Steps this instance stored fall due at `due` (ms since the epoch): the loop looks at each. In a
   * process whose ticker does not run, the tickers elsewhere are told instead (call it after the
   * steps' commit).
   */
  expect(due: readonly number[]): void {
    if (due.length === 0) return;
    if (!this.running) {
      this.#tell.submit(due).catch((e: unknown) => this.#log.warn({ err: e }, 'voice sandbox timeline: could not tell the tickers of new steps (their regular look finds them)'));
      return;
    }
    let soonest = Number.POSITIVE_INFINITY;
    for (const at of due) {
      this.#due.add(at);
      soonest = Math.min(soonest, at);
    }
    if (soonest < Number.POSITIVE_INFINITY) this.wake(soonest);
  }

  /** Places or applies the due steps and timers; then wakes the loop for the next step this instance scheduled. */
  async tick(): Promise<number> {
    const started = Date.now();
    try {
      return await this.#tick();
    } finally {
      const next = this.#due.after(started);
      if (next !== undefined) this.wake(Math.max(next, started + GATHER_MS));
    }
  }

  async #tick(): Promise<number> {
    const target = this.#target;
    if (!target) return 0;
    const { rows } = await this.#pool.query<Claimed>({ name: 'voice_timeline_claim', text: TIMELINE_CLAIM_SQL, values: [this.#batch, LEASE_SECONDS] });
    if (rows.length === 0) return 0;
    const places = rows.filter((r) => r.event.type === 'place');
    const timers = rows.filter((r) => r.event.type === 'timer');
    const steps = rows.filter((r) => r.event.type !== 'place' && r.event.type !== 'timer');
    const done: Claimed[] = [];
    const again: { row: Claimed; error: Error }[] = [];
    const sortOut = (batch: Claimed[], results: (void | Error)[], consumed?: Set<string>) => batch.forEach((row, i) => {
      const r = results[i];
      if (r instanceof Error) again.push({ row, error: r });
      else if (!consumed?.has(`${row.call_id}:${row.seq}`)) done.push(row);
    });
    if (places.length > 0) {
      const items = places.map((r) => {
        const p = r.event as PlaceStep;
        return { scope: systemScope(p.organizationId, p.mode, p.plan, p.requestId), callId: r.call_id };
      });
      sortOut(places, await target.placeBatch(items).catch((e: unknown) => items.map(() => asError(e))));
    }
    if (steps.length > 0) {
      const consumed = new Set<string>();
      const events = steps.map((r) => ({ ...(r.event as GatewayEvent), callId: r.call_id, seq: r.seq }));
      const tenants = new Map(steps.flatMap((r) => (r.tenant ? [[r.call_id, r.tenant] as const] : [])));
      sortOut(steps, await target.applyBatch(events, consumed, tenants).catch((e: unknown) => events.map(() => asError(e))), consumed);
    }
    if (timers.length > 0) {
      const consumed = new Set<string>();
      const ids = timers.map((r) => r.call_id);
      const tenants = new Map(timers.flatMap((r) => (r.tenant ? [[r.call_id, r.tenant] as const] : [])));
      sortOut(timers, await target.fireTimers(ids, consumed, tenants).catch((e: unknown) => ids.map(() => asError(e))), consumed);
    }
    await this.#finish(done, again);
    return rows.length;
  }

  /**
   * Deletes the rows finished outside an applying transaction (placements, steps of unknown or
   * ended calls), and makes the others due again soon: a step before its turn after RETRY_MS, a
   * failure after RETRY_MS × attempts; past MAX_ATTEMPTS a failure is dropped and logged.
   */
  async #finish(done: Claimed[], again: { row: Claimed; error: Error }[]): Promise<void> {
    const retry: { row: Claimed; ms: number }[] = [];
    for (const { row, error } of again) {
      if (error instanceof EventTooEarly) {
        retry.push({ row, ms: RETRY_MS });
      } else if (row.attempts >= MAX_ATTEMPTS) {
        this.#log.error({ err: error, call_id: row.call_id, seq: row.seq, type: row.event.type }, 'voice sandbox timeline: step dropped after repeated failures');
        done.push(row);
      } else {
        this.#log.warn({ err: error, call_id: row.call_id, seq: row.seq, type: row.event.type, attempt: row.attempts }, 'voice sandbox timeline: step failed, due again');
        retry.push({ row, ms: RETRY_MS * row.attempts });
      }
    }
    await settleDue(this.#pool, TIMELINE_DUE, done, retry, (at) => this.wake(at));
  }
}
