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

export type CallCharge = { reservationId: string; minutes: number };

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
   * Reserves the call's minutes (undefined when not charged): all of `maxDuration`, or as many
   * whole minutes as the balance covers. Pass `em` to join the caller's transaction.
   */
  async reserve(scope: Scope, callId: string, maxDuration: number, em?: EntityManager): Promise<CallCharge | undefined> {
    const c = this.#charged(scope);
    if (!c) return undefined;
    const wanted = Math.max(1, Math.ceil(maxDuration / 60));
    const input = (minutes: number) => ({ amount: minutes * c.price, key: `${KEY_PREFIX}${callId}`, referenceId: callId, description: `Voice call (${minutes} min reserved)` });
    try {
      const r = await c.credits.reserve(scope, input(wanted), em);
      return { reservationId: r.reservationId, minutes: Math.round(r.amount / c.price) || wanted };
    } catch (e) {
      const balance = e instanceof ServiceError && e.code === 'INSUFFICIENT_CREDITS' ? Number(e.details?.balance) : NaN;
      const affordable = Number.isFinite(balance) ? Math.floor(balance / c.price) : 0;
      if (affordable < 1 || affordable >= wanted) throw e;
      // The balance moved meanwhile: a second refusal stands.
      const r = await c.credits.reserve(scope, input(affordable), em);
      return { reservationId: r.reservationId, minutes: affordable };
    }
  }

  /** Gives a reservation back (the call was not stored). */
  async release(tenant: TenantRef, reservationId: string): Promise<void> {
    await this.#credits()?.release(tenant, reservationId);
  }

  /**
   * In the transaction that ends the call: captures `minutes` of the reservation at the plan's
   * price, releases the rest (all of it for a call never answered).
   */
  async settle(tenant: TenantRef, reservationId: string, minutes: number, em: EntityManager): Promise<void> {
    const credits = this.#credits();
    if (!credits) return;
    const [org] = await em.getConnection().execute<{ plan: Plan }[]>('select plan from organizations where id = ?', [tenant.organizationId]);
    const keep = org && minutes > 0 ? minutes * credits.priceOf(org, MINUTE_UNIT, 1) : 0;
    await credits.capture(tenant, reservationId, em, keep);
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
