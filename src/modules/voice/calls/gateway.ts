/**
 * What the gateway is told and what it reports, applied to calls under their row locks
 * (store/locked.ts) through the lifecycle (calls/lifecycle.ts): placing calls (the placement job,
 * or the sandbox timeline's placement rows), gateway events (ringing, answered, keys, speech, the
 * end; a job each for live calls, timeline steps for test calls), call timers (max_duration, IVR
 * waits, voicemail length, a script's waits) and hanging a call up at its gateway. Concurrent
 * jobs share their statements (platform/db/batcher.ts). The sandbox timeline places and applies
 * through it (TimelineTarget).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { TenantRef } from '../../../platform/db/tenant.ts';
import type { Scope } from '../../../platform/auth/scope.ts';
import { Batcher } from '../../../platform/db/batcher.ts';
import { asError } from '../../../platform/errors.ts';
import { GatewayError, type GatewayEvent, type TrunkOrder } from '../../../providers/voice/types.ts';
import type { Call } from '../voice.entities.ts';
import { EventTooEarly, isFinal } from '../voice.states.ts';
import type { IvrRunner } from '../ivr/runner.ts';
import { nextRow, TIMER_SEQ, type TimelineTarget } from '../sandbox/timeline.ts';
import type { LockedCalls } from '../store/locked.ts';
import { type CallLifecycle, type CallTimer, type GatewayHangup } from './lifecycle.ts';
import type { CallRoutes } from './routes.ts';

export const GATEWAY_EVENT_JOB = 'voice.gateway-event';

type Placement = { scope: Scope; callId: string };

export class CallGateway implements TimelineTarget {
  readonly #pool: Pool;
  readonly #locks: LockedCalls<CallTimer>;
  readonly #calls: CallLifecycle;
  readonly #routes: CallRoutes;
  readonly #ivr: IvrRunner;
  readonly #placements: Batcher<Placement, void>;
  readonly #events: Batcher<GatewayEvent, void>;

  constructor(deps: { pool: Pool; locks: LockedCalls<CallTimer>; lifecycle: CallLifecycle; routes: CallRoutes; ivr: IvrRunner }) {
    this.#pool = deps.pool;
    this.#locks = deps.locks;
    this.#calls = deps.lifecycle;
    this.#routes = deps.routes;
    this.#ivr = deps.ivr;
    // The jobs' handlers run a fetched batch at once: they land in one batch here. Two at a time, as the queues' concurrency.
    this.#placements = new Batcher((items) => this.#placeMany(items), { maxInFlight: 2, isolate: true, maxBatch: 64 });
    this.#events = new Batcher((events) => this.#applyEvents(events), { maxInFlight: 2, isolate: true, maxBatch: 64 });
  }

  /** The placement job: hands the call to the gateway once; a refusal fails the call with its SIP code. */
  place(scope: Scope, callId: string): Promise<void> {
    return this.#placements.submit({ scope, callId });
  }

  /** Applies one gateway event under the call's row lock; events that would move a status backwards are ignored. */
  apply(event: GatewayEvent): Promise<void> {
    return this.#events.submit(event);
  }

  /** A timer job: max_duration ends the call; IVR waits and voicemail limits go to the runner, a script's waits to the script. */
  async fireTimer(timer: CallTimer): Promise<void> {
    await this.#locks.locked(timer, timer.callId, async (tx, call, now) => {
      if (isFinal(call.status)) return;
      if (timer.kind === 'max_duration') {
        this.#calls.step(call, 'max_duration_reached', now, { max_duration: call.maxDuration });
        return this.#calls.end(tx, call, 'completed', 'max_duration', now);
      }
      if (timer.kind === 'ivr_timeout') return this.#ivr.timedOut(tx, call, timer.prompt ?? 0, now);
      if (timer.kind === 'script') return this.#calls.script()?.timedOut(tx, call, timer.prompt ?? 0, now);
      if (timer.kind === 'dial_timeout') {
        // A dialed leg rang for its dial's timeout without an answer: given up, as no-answer.
        if (call.status === 'in_progress') return;
        this.#calls.step(call, 'dial_timeout', now);
        return this.#calls.end(tx, call, 'no_answer', 'dial_timeout', now);
      }
      return this.#ivr.voicemailLimit(tx, call, now);
    });
  }

  /** The gateway-hangup job: a live call we ended here is hung up at its gateway. */
  async hangupAtGateway(job: GatewayHangup): Promise<void> {
    await this.#routes.gateway(job).hangup(job.callId, job.reference);
  }

  /** Placements claimed together from the sandbox timeline (already one batch). */
  placeBatch(items: Placement[]): Promise<(void | Error)[]> {
    return this.#placeMany(items);
  }

  /**
   * max_duration timers claimed together from the timeline: per tenant, one locked transaction ends
   * the calls still up and deletes the timers' rows (noted in `consumed` once committed). A
   * tenant's failure fails its timers alone (due again: sandbox/timeline.ts).
   */
  async fireTimers(callIds: string[], consumed: Set<string>, tenants: ReadonlyMap<string, TenantRef>): Promise<(void | Error)[]> {
    const results: (void | Error)[] = callIds.map(() => undefined);
    // No such call: its row goes.
    for (const { tenant, indexes } of byTenant(callIds.map((id) => tenants.get(id)))) {
      const ids = indexes.map((i) => callIds[i]!);
      try {
        await this.#locks.lockedMany(tenant, ids, async (tx, calls, now) => {
          for (const id of ids) {
            const call = calls.get(id);
            if (!call) continue;
            this.#consume(tx, id, TIMER_SEQ);
            if (isFinal(call.status)) continue;
            this.#calls.step(call, 'max_duration_reached', now, { max_duration: call.maxDuration });
            await this.#calls.end(tx, call, 'completed', 'max_duration', now);
          }
        });
        for (const id of ids) consumed.add(`${id}:${TIMER_SEQ}`);
      } catch (e) {
        for (const i of indexes) results[i] = asError(e);
      }
    }
    return results;
  }

  /**
   * Steps claimed together from the sandbox timeline: applied as the jobs' events are, each step's
   * row deleted in the transaction that applies (or ignores) it, and noted in `consumed`. When a
   * tenant's transaction fails, its steps are applied one by one, so one bad step fails alone.
   */
  async applyBatch(events: GatewayEvent[], consumed: Set<string>, tenants?: ReadonlyMap<string, TenantRef>): Promise<(void | Error)[]> {
    try {
      return await this.#applyEvents(events, consumed, tenants);
    } catch {
      return Promise.all(events.map((e) => this.#applyEvents([e], consumed, tenants).then((r) => r[0], (err: unknown) => (err instanceof Error ? err : new Error(String(err))))));
    }
  }

  /** Deletes the sandbox timeline's row of the step (or timer) with the locked change (sandbox/timeline.ts). */
  #consume(tx: EntityManager, callId: string, seq: number): void {
    this.#locks.writes(tx)?.consumed.push({ callId, seq });
  }

  /**
   * Placements of concurrent jobs: one read of their calls, the gateway orders, then one UPDATE of
   * the gateway references. A gateway refusal fails its call alone, under the row lock.
   */
  async #placeMany(items: Placement[]): Promise<(void | Error)[]> {
    const { rows } = await this.#pool.query<{ id: string; from: string; to: string; record: boolean }>({
      name: 'voice_placements_read',
      text: `select c.id, c."from", c."to", c.record from calls c
               join unnest($1::text[], $2::text[], $3::text[]) as r(id, org, mode) on c.id = r.id and c.organization_id = r.org and c.mode = r.mode
              where c.status = 'initiating' and c.gateway_reference is null`,
      values: [items.map((i) => i.callId), items.map((i) => i.scope.organizationId), items.map((i) => i.scope.mode)],
    });
    const byId = new Map(rows.map((r) => [r.id, r]));
    // Live calls go out on their organization's trunk (read once per organization of the batch).
    const trunks = new Map<string, Promise<TrunkOrder | null>>();
    const trunkOf = (scope: Scope) => {
      if (scope.mode === 'test') return Promise.resolve(null);
      let t = trunks.get(scope.organizationId);
      if (!t) trunks.set(scope.organizationId, t = this.#routes.trunk(scope));
      return t;
    };
    const placed: { item: Placement; reference: string }[] = [];
    const results = await Promise.all(items.map(async (item): Promise<void | Error> => {
      const call = byId.get(item.callId);
      if (!call) return;
      try {
        const trunk = await trunkOf(item.scope);
        if (item.scope.mode === 'live' && !trunk) throw new GatewayError('the account has no SIP trunk any more');
        placed.push({ item, reference: (await this.#routes.gateway(item.scope).place({ callId: call.id, from: call.from, to: call.to, record: call.record, ...(trunk ? { trunk } : {}) })).reference });
      } catch (e) {
        if (!(e instanceof GatewayError)) return asError(e);
        try {
          await this.#locks.locked(item.scope, item.callId, async (tx, c, now) => {
            c.errorCode = e.errorCode ?? (e.sipCode ? 'SIP_ERROR' : 'VOICE_GATEWAY_ERROR');
            c.sipCode = e.sipCode ?? null;
            this.#calls.step(c, 'gateway_error', now, { message: e.message, sip_code: e.sipCode ?? null });
            await this.#calls.end(tx, c, 'failed', 'gateway', now);
          });
        } catch (failed) {
          return failed instanceof Error ? failed : new Error(String(failed));
        }
      }
    }));
    if (placed.length > 0) {
      // The reference is kept once (a repeated placement answers the same one); a call ended meanwhile keeps it too.
      await this.#pool.query({
        name: 'voice_placements_write',
        text: `update calls c set gateway_reference = r.ref
                 from unnest($1::text[], $2::text[], $3::text[], $4::text[]) as r(id, org, mode, ref)
                where c.id = r.id and c.organization_id = r.org and c.mode = r.mode and c.gateway_reference is null`,
        values: [placed.map((p) => p.item.callId), placed.map((p) => p.item.scope.organizationId), placed.map((p) => p.item.scope.mode), placed.map((p) => p.reference)],
      });
    }
    return results;
  }

  /**
   * Gateway events of concurrent jobs: per tenant, one transaction that locks their calls (in id
   * order) and applies the events in call and sequence order, then commits every change, event
   * and timer at once. An event that overtook an earlier one fails alone (its job is retried);
   * any other failure fails the batch, which is then applied event by event.
   */
  async #applyEvents(events: GatewayEvent[], consumed?: Set<string>, tenants?: ReadonlyMap<string, TenantRef>): Promise<(void | Error)[]> {
    // The calls' tenants: read here, unless the caller read them already (the timeline's claim).
    let tenantOf: ReadonlyMap<string, TenantRef> | undefined = tenants;
    if (!tenantOf) {
      const { rows } = await this.#pool.query<{ id: string; organization_id: string; mode: 'live' | 'test' }>({
        name: 'voice_gateway_event_tenants',
        text: 'select id, organization_id, mode from calls where id = any($1::text[])',
        values: [[...new Set(events.map((e) => e.callId))]],
      });
      tenantOf = new Map(rows.map((r) => [r.id, { organizationId: r.organization_id, mode: r.mode }]));
    }
    // An unknown call: nothing to apply.
    const groups = byTenant(events.map((e) => tenantOf.get(e.callId)));
    const results: (void | Error)[] = events.map(() => undefined);
    for (const { tenant, indexes } of groups) {
      indexes.sort((a, b) => (events[a]!.callId < events[b]!.callId ? -1 : events[a]!.callId > events[b]!.callId ? 1 : events[a]!.seq - events[b]!.seq));
      const applied: string[] = [];
      await this.#locks.lockedMany(tenant, indexes.map((i) => events[i]!.callId), async (tx, calls, now) => {
        for (const i of indexes) {
          const call = calls.get(events[i]!.callId);
          if (!call) continue;
          const event = events[i]!;
          const fresh = !isFinal(call.status) && event.seq === call.gatewaySeq + 1;
          try {
            await this.#applyEvent(tx, call, event, now);
          } catch (e) {
            if (!(e instanceof EventTooEarly)) throw e;
            results[i] = e;
            continue;
          }
          if (consumed) {
            this.#consume(tx, call.id, event.seq);
            applied.push(`${call.id}:${event.seq}`);
            // A timeline step applied for the first time schedules its script's next one, unless
            // the call has ended (what remains of its script would change nothing).
            const next = fresh && !isFinal(call.status) ? nextRow(event) : undefined;
            if (next) this.#locks.writes(tx)?.timeline.push(next);
          }
        }
      });
      // Committed: those steps' rows are gone with it.
      for (const key of applied) consumed?.add(key);
    }
    return results;
  }

  async #applyEvent(tx: EntityManager, call: Call, event: GatewayEvent, now: Date): Promise<void> {
    // An ended call ignores what is still in flight; a repeated event is applied once; an event
    // that overtook an earlier one waits for it (the job is retried), so steps keep their order.
    // A live call's recording reports its length when its media closed, usually after the end:
    // an ended call takes it whatever came before it (nothing else changes an ended call).
    if (event.type === 'recorded' && isFinal(call.status) && event.seq > call.gatewaySeq) {
      call.gatewaySeq = event.seq;
      return this.#recorded(call, event);
    }
    if (isFinal(call.status) || event.seq <= call.gatewaySeq) return;
    if (event.seq > call.gatewaySeq + 1) throw new EventTooEarly(event, call.gatewaySeq);
    call.gatewaySeq = event.seq;
    if (event.reference) call.gatewayReference = event.reference;
    switch (event.type) {
      case 'ringing':
        if (!this.#calls.move(call, 'ringing', now)) return;
        call.ringingAt = now;
        return this.#calls.emit(tx, call, now);
      case 'answered':
        return this.#answered(tx, call, now);
      case 'dtmf':
        for (const key of event.digits ?? '') {
          if (call.status !== 'in_progress') break;
          if (call.ivrState?.pin && !call.conferenceId) {
            await this.#calls.legs()?.pinKey?.(tx, call, key, now);
            continue;
          }
          await this.#ivr.key(tx, call, key, now);
          if (call.status === 'in_progress') await this.#calls.script()?.key(tx, call, key, now);
        }
        return;
      case 'speech':
        if (call.status === 'in_progress') await this.#ivr.speech(tx, call, event.seconds ?? 0, now, event.recording);
        return;
      case 'prompted':
        if (call.status === 'in_progress') await this.#ivr.prompted(tx, call, event.prompt ?? 0, now);
        return;
      case 'recorded':
        return this.#recorded(call, event);
      case 'completed':
        if (event.endReason) this.#calls.step(call, event.endReason, now, event.message ? { [event.endReason === 'voicemail' ? 'ended_by' : 'outcome']: event.message } : undefined);
        if (event.errorCode) call.errorCode = event.errorCode;
        // Ended by the gateway before it was answered (a transfer's second leg whose first hung up): cancelled.
        return this.#calls.end(tx, call, !call.answeredAt && event.endReason === 'transfer_ended' ? 'cancelled' : 'completed', event.endReason ?? 'remote', now);
      case 'busy': case 'no_answer':
        return this.#calls.end(tx, call, event.type, 'remote', now);
      case 'failed':
        if (event.errorCode) {
          // The far end answered, and its media could not be used (a codec mismatch…): the gateway hung up.
          call.errorCode = event.errorCode;
          this.#calls.step(call, 'media_error', now, { error_code: event.errorCode, message: event.message ?? null });
          return this.#calls.end(tx, call, 'failed', 'gateway', now);
        }
        call.errorCode = 'SIP_ERROR';
        call.sipCode = event.sipCode ?? null;
        return this.#calls.end(tx, call, 'failed', 'remote', now);
    }
  }

  #recorded(call: Call, event: GatewayEvent): void {
    if (call.record) call.recordingSeconds = Math.max(0, Math.round(event.recordedSeconds ?? 0));
  }

  async #answered(tx: EntityManager, call: Call, now: Date): Promise<void> {
    if (!this.#calls.move(call, 'in_progress', now)) return;
    call.answeredAt = now;
    this.#calls.emit(tx, call, now);
    await this.#calls.timer(tx, { callId: call.id, kind: 'max_duration' }, call, call.maxDuration);
    if (call.agentId) await this.#calls.agentJoined(tx, call);
    if (call.conferenceId) await this.#calls.legs()?.answered(tx, call, now);
    if (call.ivrState?.pin && !call.conferenceId) this.#calls.legs()?.pinAsked?.(tx, call, now);
    if (typeof call.metadata?.dialed_by === 'string') await this.#calls.dials()?.answered(tx, call, now);
    if (call.ivrId && !isFinal(call.status)) await this.#ivr.start(tx, call, now);
    if (!isFinal(call.status)) await this.#calls.script()?.answered(tx, call, now);
  }
}

/** Item indexes grouped by tenant (organization and mode); items without one are left out. */
function byTenant(tenants: readonly (TenantRef | undefined)[]): { tenant: TenantRef; indexes: number[] }[] {
  const groups = new Map<string, { tenant: TenantRef; indexes: number[] }>();
  tenants.forEach((tenant, i) => {
    if (!tenant) return;
    const key = `${tenant.organizationId}:${tenant.mode}`;
    const group = groups.get(key) ?? { tenant: { organizationId: tenant.organizationId, mode: tenant.mode }, indexes: [] };
    group.indexes.push(i);
    groups.set(key, group);
  });
  return [...groups.values()];
}
