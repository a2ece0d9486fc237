/**
 * Live calls are paid from the credit balance (issue 17), by started minute at the plan's
 * `voice.minute` price, prepaid like a calling card: placing a call reserves the price of its
 * whole `max_duration` (402 INSUFFICIENT_CREDITS or 403 SUBSCRIPTION_INACTIVE, nothing stored, when
 * not even one minute is covered); when the balance covers fewer minutes, the call is placed with
 * `max_duration` cut to what it covers (a `credit_limit` step on the call says so). When the call
 * ends, the transaction that ends it captures the minutes it was billed (`billedMinutes`: 0 when it
 * was never answered) and gives the rest back: one reservation, settled once.
 *
 * Test mode and deployments without a live payments provider (`chargesLive()`) never touch the
 * ledger; the `credits` port is optional (without billing, calls are not charged). Ledger key:
 * `call:<call id>`. A reservation whose call row never committed (the process died between the
 * two) is released by billing's stale-reservation sweep, which asks this context (`callCharges`).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Scope } from '../../platform/auth/scope.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { ServiceError } from '../../platform/errors.ts';
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';
import type { Ports } from '../manifest.ts';
import type { ChargeOutcome, ReservationOwnerPort } from '../billing/billing.ports.ts';

/** The unit calls are priced by (billing's price table). */
export const MINUTE_UNIT = 'voice.minute';
const KEY_PREFIX = 'call:';

/**
 * What a paid call holds: minutes taken from the plan's included pool (`poolMinutes`, of the period
 * `poolPeriod`) and a credit reservation for the rest (`reservationId`, `creditMinutes`; none when
 * the pool covers all of it). `minutes` is what the call may last.
 */
export type CallCharge = { reservationId: string | null; creditMinutes: number; poolMinutes: number; poolPeriod: Date | null; minutes: number };

export class CallBilling {
  readonly #credits: () => Ports['credits'] | undefined;

  constructor(credits: () => Ports['credits'] | undefined) {
    this.#credits = credits;
  }

  #charged(scope: Scope): { credits: Ports['credits']; price: number } | undefined {
    const credits = scope.mode === 'live' ? this.#credits() : undefined;
    if (!credits?.chargesLive()) return undefined;
    const price = credits.priceOf(scope, MINUTE_UNIT, 1);
    return price > 0 ? { credits, price } : undefined;
  }

  /**
   * Holds the call's minutes (undefined when not charged): first from the billing period's included
   * voice minutes, then a credit reservation for the rest of `maxDuration`, or for as many whole
   * minutes as the balance covers. 402 when neither covers a minute (nothing held). Pass `em` to
   * join the caller's transaction.
   */
  async reserve(scope: Scope, callId: string, maxDuration: number, em?: EntityManager): Promise<CallCharge | undefined> {
    const c = this.#charged(scope);
    if (!c) return undefined;
    const wanted = Math.max(1, Math.ceil(maxDuration / 60));
    const pool = await c.credits.takePool(scope, 'voice_minutes', Array.from({ length: wanted }, () => 1), em);
    const rest = wanted - pool.taken;
    const held = (reservationId: string | null, creditMinutes: number): CallCharge => ({
      reservationId, creditMinutes, poolMinutes: pool.taken, poolPeriod: pool.periodStart, minutes: pool.taken + creditMinutes,
    });
    if (rest === 0) return held(null, 0);
    const input = (minutes: number) => ({ amount: minutes * c.price, key: `${KEY_PREFIX}${callId}`, referenceId: callId, description: `Voice call (${minutes} min reserved)` });
    try {
      const r = await c.credits.reserve(scope, input(rest), em);
      return held(r.reservationId, rest);
    } catch (first) {
      let refusal = first;
      const balance = first instanceof ServiceError && first.code === 'INSUFFICIENT_CREDITS' ? Number(first.details?.balance) : NaN;
      const affordable = Number.isFinite(balance) ? Math.min(rest - 1, Math.floor(balance / c.price)) : 0;
      if (affordable >= 1) {
        try {
          return held((await c.credits.reserve(scope, input(affordable), em)).reservationId, affordable);
        } catch (again) {
          refusal = again; // the balance moved meanwhile: this refusal stands
        }
      }
      // The pool alone still lets the call run that long; with nothing at all, the refusal stands.
      if (pool.taken > 0) return held(null, 0);
      throw refusal;
    }
  }

  /**
   * What the ledger charged for each call (by id), in minor units and the account's currency: the
   * minutes it was billed past the plan's included ones. Calls with nothing captured (under way,
   * never answered, covered by included minutes, test mode) are absent.
   */
  async chargesOf(tenant: TenantRef, ids: readonly string[]): Promise<Map<string, { amount: number; currency: string }>> {
    const credits = tenant.mode === 'live' ? this.#credits() : undefined;
    if (!credits || ids.length === 0) return new Map();
    const charges = await credits.chargesOf(tenant, ids.map((id) => `${KEY_PREFIX}${id}`));
    return new Map([...charges].map(([key, charge]) => [key.slice(KEY_PREFIX.length), charge]));
  }

  /** Gives back what a call that was not stored held. */
  async release(scope: Scope, charge: CallCharge): Promise<void> {
    const credits = this.#credits();
    if (!credits) return;
    if (charge.reservationId) await credits.release(scope, charge.reservationId);
    if (charge.poolPeriod) await credits.returnPool(scope, 'voice_minutes', charge.poolPeriod, charge.poolMinutes);
  }

  /**
   * In the transaction that ends the call, for the `minutes` it was billed (0 when never answered):
   * the included minutes it took cover them first (the unused ones go back to their period's pool),
   * the credit reservation the rest at the plan's price (the remainder released).
   */
  async settle(tenant: TenantRef, call: { creditReservationId?: string | null; poolMinutes: number; poolPeriod?: Date | null }, minutes: number, em: EntityManager): Promise<void> {
    const credits = this.#credits();
    if (!credits) return;
    const fromPool = Math.min(minutes, call.poolMinutes);
    if (call.poolPeriod && call.poolMinutes > fromPool) await credits.returnPool(tenant, 'voice_minutes', call.poolPeriod, call.poolMinutes - fromPool, em);
    if (!call.creditReservationId) return;
    const paid = minutes - fromPool;
    const [org] = await em.getConnection().execute<{ plan: Plan }[]>('select plan from organizations where id = ?', [tenant.organizationId]);
    const keep = org && paid > 0 ? paid * credits.priceOf(org, MINUTE_UNIT, 1) : 0;
    await credits.capture(tenant, call.creditReservationId, em, keep);
  }
}

/**
 * The `callCharges` port (billing's stale-reservation sweep): a `call:` reservation still open
 * belongs to a call under way (asked again later), or to a call that was never stored (released).
 * An ended call's reservation is settled in the transaction that ended it, so it is never open.
 */
export function callCharges(pool: Pool): ReservationOwnerPort {
  return {
    async outcomes(items) {
      const ids = items.map((i) => (i.key.startsWith(KEY_PREFIX) ? i.key.slice(KEY_PREFIX.length) : ''));
      const { rows } = await pool.query<{ id: string; status: string }>(
        `select c.id, c.status from calls c join unnest($1::text[], $2::text[], $3::text[]) as r(id, org, mode)
            on c.id = r.id and c.organization_id = r.org and c.mode = r.mode`,
        [ids, items.map((i) => i.organizationId), items.map((i) => i.mode)]);
      const status = new Map(rows.map((r) => [r.id, r.status]));
      return ids.map((id): ChargeOutcome => {
        const s = status.get(id);
        if (s === undefined) return 'release';
        return ['initiating', 'ringing', 'in_progress'].includes(s) ? null : 'release';
      });
    },
  };
}
