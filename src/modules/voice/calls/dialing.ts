/**
 * Dialing from a call: a second leg placed from a call that is up (a call script's `<Dial>`), and
 * the call joined to a conference by name (the conferences service: created on the first join).
 * The leg is an ordinary placed call (placing's `placeInTx`, in the dialing call's transaction:
 * the same checks, reservation, event and placement as a conference leg), marked with
 * `metadata.dialed_by`, with a `dial_timeout` timer for how long it may ring. Its answer and its
 * end are told to the dialing call by a job (DIAL_LEG_JOB): the leg's change never locks the
 * dialing call's row (a call's change locks one call; the job locks the other afterwards), and
 * hanging a leg up from the dialing call goes the same way. On live calls the same path serves
 * once the media bridge joins the two legs' audio on `answered`.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import { systemScope } from '../../../platform/auth/scope.ts';
import type { TenantRef } from '../../../platform/db/tenant.ts';
import { ServiceError } from '../../../platform/errors.ts';
import type { Jobs } from '../../../platform/jobs/jobs.ts';
import { organizationPlan } from '../../../platform/tenancy/plan.ts';
import type { ConferencesService } from '../conferences/conferences.service.ts';
import type { CallLookupReads } from '../placing/lookups.ts';
import type { CallPlacing } from '../placing/placing.service.ts';
import type { CallRows, LockedCalls } from '../store/locked.ts';
import type { Call } from '../voice.entities.ts';
import { CALL_MAX_DURATION } from '../voice.schemas.ts';
import { isFinal } from '../voice.states.ts';
import type { CallLifecycle, CallTimer, DialControl, DialedLeg, DialOrder, DialRefusal, JoinOrder } from './lifecycle.ts';

export const DIAL_LEG_JOB = 'voice.dial-leg';
/** A leg's answer or end, for the call that dialed it; or (`hangup`) a leg to hang up for it. */
export type DialLegNotice = { organizationId: string; mode: 'live' | 'test'; legId: string; parentId: string; event: 'answered' | 'ended' | 'hangup'; reason?: string };

const trx = (tx: EntityManager) => tx.getTransactionContext<Transaction<unknown>>()!;

export class CallDialing implements DialControl {
  readonly #placing: CallPlacing;
  readonly #lookups: CallLookupReads;
  readonly #lifecycle: CallLifecycle;
  readonly #locks: LockedCalls<CallTimer>;
  readonly #rows: CallRows;
  readonly #conferences: ConferencesService;
  readonly #jobs: Pick<Jobs, 'enqueue'>;

  /** Installs the legs' hooks on the lifecycle: a dialed leg answered or ended is told to the call that dialed it. */
  constructor(deps: {
    placing: CallPlacing; lookups: CallLookupReads; lifecycle: CallLifecycle; locks: LockedCalls<CallTimer>; rows: CallRows; conferences: ConferencesService; jobs: Pick<Jobs, 'enqueue'>;
  }) {
    this.#placing = deps.placing;
    this.#lookups = deps.lookups;
    this.#lifecycle = deps.lifecycle;
    this.#locks = deps.locks;
    this.#rows = deps.rows;
    this.#conferences = deps.conferences;
    this.#jobs = deps.jobs;
    deps.lifecycle.installDialHooks({ answered: (tx, leg) => this.#notify(tx, leg, 'answered'), ended: (tx, leg) => this.#notify(tx, leg, 'ended') });
  }

  async dial(tx: EntityManager, call: Call, order: DialOrder): Promise<{ leg: Call } | { refused: DialRefusal }> {
    const plan = await organizationPlan(trx(tx), call.organizationId);
    if (!plan) throw new Error(`organization ${call.organizationId} not found`);
    const scope = systemScope(call.organizationId, call.mode, plan, `dial-${call.id}`);
    const from = order.callerId ?? call.from;
    // The caller ID is the dialing call's own number (either end), or one of the account's voice numbers.
    if (from !== call.from && from !== call.to && !(await this.#lookups.voiceNumbers(scope, 'callerId').catch(() => [] as string[])).includes(from)) {
      return { refused: { reason: 'caller_id', message: `${from} is neither a number of this call nor one of this account's voice numbers` } };
    }
    try {
      await this.#lookups.assertMayCall(scope, order.to);
    } catch (e) {
      if (e instanceof ServiceError) return { refused: { reason: 'opted_out', message: e.message } };
      throw e;
    }
    const leg = await this.#placing.placeInTx(tx, scope, {
      to: order.to, from, agentId: null, ivrId: null, conferenceId: null, webhookUrl: null, record: order.record,
      maxDuration: Math.min(order.maxDuration ?? CALL_MAX_DURATION.default, CALL_MAX_DURATION.max), metadata: { dialed_by: call.id },
    });
    await this.#lifecycle.timer(tx, { callId: leg.id, kind: 'dial_timeout' }, leg, order.timeoutSeconds);
    return { leg };
  }

  async hangupLeg(tx: EntityManager, call: Call, legId: string, reason: string): Promise<void> {
    const notice: DialLegNotice = { organizationId: call.organizationId, mode: call.mode, legId, parentId: call.id, event: 'hangup', reason };
    await this.#jobs.enqueue(DIAL_LEG_JOB, notice, { em: tx });
  }

  join(tx: EntityManager, call: Call, room: JoinOrder, now: Date): Promise<{ conferenceId: string; created: boolean } | { refused: DialRefusal }> {
    return this.#conferences.joinByName(tx, call, room, now);
  }

  leave(tx: EntityManager, call: Call, now: Date): Promise<void> {
    return this.#conferences.leave(tx, call, now);
  }

  /** The leg's answer or end, queued for the call that dialed it (committed with the leg's change). */
  async #notify(tx: EntityManager, leg: Call, event: 'answered' | 'ended'): Promise<void> {
    const notice: DialLegNotice = { organizationId: leg.organizationId, mode: leg.mode, legId: leg.id, parentId: String(leg.metadata.dialed_by), event };
    await this.#jobs.enqueue(DIAL_LEG_JOB, notice, { em: tx });
  }

  /** DIAL_LEG_JOB: a leg hung up for the call that dialed it, or that call told of its leg. */
  async apply(n: DialLegNotice): Promise<void> {
    const tenant: TenantRef = { organizationId: n.organizationId, mode: n.mode };
    if (n.event === 'hangup') {
      await this.#locks.locked(tenant, n.legId, async (tx, leg, now) => {
        if (isFinal(leg.status)) return;
        this.#lifecycle.step(leg, 'dial_hangup', now, { reason: n.reason ?? 'dialing_call' });
        await this.#lifecycle.end(tx, leg, leg.status === 'in_progress' ? 'completed' : 'cancelled', n.reason ?? 'dial_hangup', now);
      });
      return;
    }
    const leg = await this.#rows.byId(tenant, n.legId);
    if (!leg) return;
    const seen: DialedLeg = {
      id: leg.id, to: leg.to, status: leg.status, durationSeconds: leg.durationSeconds ?? null, answered: leg.answeredAt != null, sipCode: leg.sipCode ?? null,
    };
    const event = n.event;
    await this.#locks.locked(tenant, n.parentId, async (tx, call, now) => {
      if (isFinal(call.status)) return;
      await this.#lifecycle.script()?.dialed?.(tx, call, seen, event, now);
    });
  }
}
