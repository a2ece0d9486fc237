/**
 * Live-mode agent invocations are paid (issue 17), like messaging's sends: a turn that is about to
 * call the live model reserves the plan's `agent.invocation` price from the credit balance first
 * (402 INSUFFICIENT_CREDITS or 403 SUBSCRIPTION_INACTIVE, and no model call, nothing stored, when it
 * cannot); the reservation is captured in the transaction that stores the answer (complete, partial
 * or replaced by an output guardrail: the model ran) and released when the turn fails (provider
 * error or deadline, tool failure, the conversation ended meanwhile). A turn answered by an input
 * guardrail (blocked topic, escalation keyword) never calls the model and is not charged. Test mode
 * and deployments without a live payments provider (`chargesLive()`) never touch the ledger; the
 * `credits` port is optional (without billing, turns are not charged).
 *
 * Ledger key: `agent_turn:<hash>` of the turn's retry key (the request's Idempotency-Key claim, a
 * flow step), so a retried turn finds its reservation: still open (the first attempt died) → it is
 * reused, unless it is older than half of BILLING_STALE_RESERVATION_SECONDS (then it is released,
 * since the stale-reservation sweep could release it under the retry); captured → the turn was
 * paid, nothing more is reserved; released (the first attempt failed) → the next key `…#2`, `…#3`
 * is tried, so a turn is paid at most once. Without a retry key every turn has a fresh ledger key.
 *
 * A turn whose process died after reserving leaves its reservation open: billing's
 * stale-reservation sweep asks this context (port `agentCharges`) and releases it. That is always
 * right: the answer and the capture commit in one transaction, and that transaction fails (AGENT_ERROR,
 * nothing stored) when it finds the reservation released, so an open reservation past the bound
 * means no answer was stored, and none can be stored after the sweep released it.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ServiceError } from '../../platform/errors.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { Ports } from '../manifest.ts';
import type { ChargeOutcome, ReservationOwnerPort } from '../billing/billing.ports.ts';

/** The unit a turn is priced by (billing's price table). */
export const INVOCATION_UNIT = 'agent.invocation';
/** Attempts of one retry key whose reservations were released, after which a turn gets a fresh key. */
const MAX_ATTEMPT_KEYS = 20;

/** A turn's reservation: `paid` when a previous attempt of the turn already paid it (nothing to settle). */
export type TurnCharge = { reservationId: string; key: string; paid: boolean };

/** The stable key of a turn with a retry key (tenant-wide unique; also the base of its usage keys). */
export function turnKeyOf(tenant: TenantRef, retryKey: string): string {
  return `agent_turn:${createHash('sha256').update(`${tenant.organizationId}\n${tenant.mode}\n${retryKey}`).digest('base64url').slice(0, 32)}`;
}

export class AgentBilling {
  readonly #credits: () => Ports['credits'] | undefined;

  constructor(credits: () => Ports['credits'] | undefined) {
    this.#credits = credits;
  }

  /** The price of one invocation when this scope's turns are charged (undefined: test mode, no billing, free). */
  #charged(scope: Scope): { credits: Ports['credits']; amount: number } | undefined {
    const credits = scope.mode === 'live' ? this.#credits() : undefined;
    if (!credits?.chargesLive()) return undefined;
    const amount = credits.priceOf(scope, INVOCATION_UNIT, 1);
    return amount > 0 ? { credits, amount } : undefined;
  }

  /** Before a stream starts: 402/403 as plain HTTP errors when the balance cannot pay one invocation now (reserves nothing). */
  async precheck(scope: Scope): Promise<void> {
    const c = this.#charged(scope);
    if (c) await c.credits.assertCovers(scope, c.amount);
  }

  /** Reserves one invocation for a turn about to call the model (undefined when not charged). */
  async reserve(scope: Scope, turn: { key: string | undefined; conversationId: string }): Promise<TurnCharge | undefined> {
    const c = this.#charged(scope);
    if (!c) return undefined;
    const input = (key: string) => ({ amount: c.amount, key, referenceId: turn.conversationId, description: 'Agent invocation', renewAged: true });
    if (turn.key) {
      for (let n = 1; n <= MAX_ATTEMPT_KEYS; n++) {
        const key = n === 1 ? turn.key : `${turn.key}#${n}`;
        const r = await c.credits.reserve(scope, input(key));
        if (r.earlier === 'released') continue;
        return { reservationId: r.reservationId, key, paid: r.earlier === 'captured' };
      }
    }
    const key = `agent_turn:${randomBytes(16).toString('base64url')}`;
    const r = await c.credits.reserve(scope, input(key));
    return { reservationId: r.reservationId, key, paid: false };
  }

  /**
   * Makes the reservation final, in the transaction that stores the turn. A reservation released
   * meanwhile (the stale-reservation sweep, for a turn that ran past its bound) fails the turn with
   * AGENT_ERROR, so that transaction stores nothing: an answer is never stored unpaid. Captured by
   * another attempt of the same turn: paid once, nothing more to do.
   */
  async capture(tenant: TenantRef, charge: TurnCharge | undefined, tx: EntityManager): Promise<void> {
    if (!charge || charge.paid) return;
    const credits = this.#credits()!;
    if (await credits.capture(tenant, charge.reservationId, tx)) return;
    if ((await credits.stateOf(tenant, charge.reservationId, tx)) === 'captured') return;
    throw new ServiceError('AGENT_ERROR', 'The turn ran past its time limit and its credit reservation was given back; nothing was stored or charged, send the message again', {
      reason: 'reservation_released',
    });
  }

  /** Gives the reservation back (the turn failed); idempotent. */
  async release(tenant: TenantRef, charge: TurnCharge | undefined): Promise<void> {
    if (!charge || charge.paid) return;
    await this.#credits()!.release(tenant, charge.reservationId);
  }
}

/**
 * Port `agentCharges` (billing's stale-reservation sweep): an agent turn's reservation still open
 * past the bound is released. The turn's answer and its capture commit together (see above), so an
 * open reservation means nothing was stored; and a turn still running that late cannot store its
 * answer once the reservation is released.
 */
export const agentCharges: ReservationOwnerPort = {
  outcomes: async (items) => items.map((): ChargeOutcome => 'release'),
};
