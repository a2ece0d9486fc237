/**
 * Locked call changes: `change` runs on the tenant's calls, locked in id order (calls.rows.ts), in
 * one transaction; what it adds (the calls' events, usage, timers, timeline rows) is recorded per
 * transaction (`writes(tx)`) and written with the changed calls in one statement, sent with the
 * COMMIT right behind it (sql.ts `sendBeforeCommit`). Once committed, this instance's
 * `callUpdated` subscribers get the calls as committed (calls.committed.ts), live notices go out,
 * and the sandbox timeline is woken for the steps the change scheduled. CallsService (calls.service.ts)
 * and the gateway side (calls.gateway.ts) make their changes through it.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import type { Clock } from '../../../platform/clock.ts';
import { tenantEm, type TenantRef } from '../../../platform/db/tenant.ts';
import { sendBeforeCommit, sqlQuery } from '../../../platform/db/sql.ts';
import type { LiveNotice } from '../../../platform/events/bus.ts';
import type { Call } from '../voice.entities.ts';
import type { CallRows, CallWrites } from './locked.ts';
import type { CallTimer } from '../calls/lifecycle.ts';
import { CommittedCalls } from './committed.ts';
import type { SandboxTimeline } from '../sandbox/timeline.ts';

export class LockedCalls {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #rows: CallRows;
  readonly #timeline: SandboxTimeline | undefined;
  readonly #live: ((notices: readonly LiveNotice[]) => void) | undefined;
  readonly #watched: (callId: string) => boolean;
  /** Calls as this instance committed them, for its callUpdated subscribers (calls.committed.ts). */
  readonly committed = new CommittedCalls();
  /** What a locked transaction's change adds (events, usage, timers), written with its calls before it commits. */
  readonly #writes = new WeakMap<EntityManager, CallWrites<CallTimer>>();

  constructor(deps: {
    orm: MikroORM; clock: Clock; rows: CallRows; timeline: SandboxTimeline | undefined;
    live: ((notices: readonly LiveNotice[]) => void) | undefined; watched: (callId: string) => boolean;
  }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#rows = deps.rows;
    this.#timeline = deps.timeline;
    this.#live = deps.live;
    this.#watched = deps.watched;
  }

  /** The writes of the locked transaction `tx` is in (undefined outside one: write through `tx` itself). */
  writes(tx: EntityManager): CallWrites<CallTimer> | undefined {
    return this.#writes.get(tx);
  }

  /** Runs `change` on the locked row in a transaction; returns the row (undefined when it does not exist). */
  async locked(tenant: TenantRef, id: string, change: (tx: EntityManager, call: Call, now: Date) => Promise<void>): Promise<Call | undefined> {
    return this.lockedMany(tenant, [id], async (tx, calls, now) => {
      const call = calls.get(id);
      if (call) await change(tx, call, now);
      return call;
    });
  }

  /**
   * Runs `change` on the tenant's calls `ids` (plain rows, locked in id order: calls.rows.ts) in one
   * transaction; the changed calls, their events, usage and timers are written in one statement.
   * That statement is sent with the COMMIT right behind it (`sendBeforeCommit`: one round trip for
   * both) unless it ends with timer jobs; it is guarded to fail outside this transaction, and when it
   * failed (the COMMIT then rolled the transaction back) its error is this call's.
   */
  async lockedMany<R>(tenant: TenantRef, ids: readonly string[], change: (tx: EntityManager, calls: Map<string, Call>, now: Date) => Promise<R>): Promise<R> {
    let notices: LiveNotice[] = [];
    let changed: Call[] = [];
    let due: number[] = [];
    let after: (() => void)[] = [];
    let sent: Promise<unknown> | undefined;
    let out: R;
    try {
      out = await tenantEm(this.#orm, tenant).transactional(async (tx) => {
        const trx = tx.getTransactionContext<Transaction<unknown>>()!;
        const { calls, txid } = await this.#rows.lockTx(trx, tenant, ids);
        const before = this.#rows.snapshot(calls);
        const writes: CallWrites<CallTimer> = { events: [], usage: [], timers: [], consumed: [], timeline: [], after: [] };
        this.#writes.set(tx, writes);
        let result: R;
        try {
          result = await change(tx, new Map(calls.map((c) => [c.id, c])), this.#clock.now());
        } finally {
          this.#writes.delete(tx);
        }
        const statement = await this.#rows.statement(calls, before, writes, txid);
        if (statement?.guarded) sent = sendBeforeCommit(trx, statement.sql, statement.params);
        else if (statement) await sqlQuery(trx, statement.sql, statement.params);
        notices = statement?.notices ?? [];
        changed = writes.events.map((e) => e.call);
        due = writes.timeline.map((r) => r.due_at.getTime());
        after = writes.after;
        // Noted before the COMMIT: the commit's NOTIFY of these events can reach this process before
        // the COMMIT's reply does (it is sent at the same moment, on another connection), and its
        // subscribers then find the calls as committed instead of reading them again. An event id
        // is announced only once committed, so what a rolled-back transaction noted is never asked for.
        this.#note(notices, changed);
        return result;
      });
    } catch (e) {
      // The write's own error first (what the ORM then failed on followed from it).
      await sent;
      throw e;
    }
    await sent;
    // Again for the calls a subscriber began to watch while the COMMIT was on its way.
    this.delivered(notices, changed);
    // The timeline looks when each row this change added falls due (a script's next step, a timer).
    if (due.length > 0) this.#timeline?.expect(due);
    for (const run of after) run();
    return out;
  }

  /**
   * Calls this instance has just committed with events (`notices[i]` the event of `calls[i]`): its
   * `callUpdated` subscribers hear of them now (the commit's NOTIFY tells the other instances, and
   * is skipped here), with the calls as committed. Only after the commit.
   */
  delivered(notices: readonly LiveNotice[], calls: readonly Call[]): void {
    if (notices.length === 0) return;
    this.#note(notices, calls);
    this.#live?.(notices);
  }

  /** Notes the calls (`notices[i]` the event of `calls[i]`) a subscriber here watches, for calls.committed.ts. */
  #note(notices: readonly LiveNotice[], calls: readonly Call[]): void {
    // Kept only for the calls a subscriber here watches (a later one reads the call when it starts).
    const eventIds: string[] = [];
    const watched: Call[] = [];
    notices.forEach((n, i) => {
      const call = calls[i];
      if (call && !this.committed.has(n.id) && this.#watched(call.id)) {
        eventIds.push(n.id);
        watched.push(call);
      }
    });
    if (watched.length > 0) this.committed.note(eventIds, watched);
  }
}
