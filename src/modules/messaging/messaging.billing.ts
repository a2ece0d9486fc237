/**
 * Live-mode sends are paid (issue 17): the price (per SMS segment, email recipient or message, the
 * plan's price table) is reserved from the credit balance in the transaction that accepts the
 * message (INSUFFICIENT_CREDITS 402 or SUBSCRIPTION_INACTIVE 403, and nothing accepted, when it
 * cannot be), captured on delivery and released on failure — except while the plan's included
 * messages last: a send the billing period's pool still covers takes a unit from it instead (1 per
 * message, 1 per email recipient) and is not charged; the ledger key is the message id, so a
 * campaign's batch and messaging never charge one message twice. In a group commit the reservations
 * are one more CTE of the batch's statement (the billing context's SQL, `sendReservations`). A starter plan stops at its
 * included messages (QUOTA_EXCEEDED 429). Test mode never touches the ledger. Both ports are
 * optional: without the billing module sends are not charged.
 *
 * A reservation the delivery never settled (the process died between the status change and the
 * settlement, or the delivery job ended without sending) is settled by billing's stale-reservation
 * sweep, which asks this context (port `messageCharges`, {@link MessageCharges}) what became of the
 * message.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { Mode, TenantRef } from '../../platform/db/tenant.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Ports } from '../manifest.ts';
import type { ChargeOutcome, ReservationOwnerPort } from '../billing/billing.ports.ts';
import type { Reservations, SendCharge } from './messaging.batching.ts';
import type { Message, MessageStatus } from './messaging.entities.ts';
import type { DeliveryQueue } from './messaging.queue.ts';

type Usage = { kind: string; quantity: number };
/** What the ledger charged for a message: `amount` in minor units (cents), `currency` its code (`usd`). */
export type MessageCharge = { amount: number; currency: string };
/** A message read with what it was charged (`null`: nothing yet). */
export type PricedMessage = Message & { charge?: MessageCharge | null };

/** Gives up a message whose send never went out (the delivery does; it releases what was reserved). */
type Abandoning = { abandon(tenant: TenantRef, messageId: string): Promise<boolean> };

export class MessageBilling {
  readonly #credits: () => Ports['credits'] | undefined;
  readonly #quotas: () => Ports['planQuotas'] | undefined;

  constructor(deps: { credits: () => Ports['credits'] | undefined; quotas: () => Ports['planQuotas'] | undefined }) {
    this.#credits = deps.credits;
    this.#quotas = deps.quotas;
  }

  /** QUOTA_EXCEEDED (429) when the plan blocks past its included messages (1 per message, 1 per email recipient). */
  async checkQuota(scope: Scope, channel: string, recipients: number): Promise<void> {
    if (scope.mode !== 'live') return;
    await this.#quotas()?.check(scope, 'messages', channel === 'email' ? recipients : 1);
  }

  /**
   * What a live send costs (undefined in test mode, without billing, or when free), and the units it
   * takes from the plan's included messages: billing charges it only once that pool is spent.
   */
  chargeOf(scope: Scope, m: Pick<Message, 'id'>, usage: Usage): SendCharge | undefined {
    const credits = scope.mode === 'live' ? this.#credits() : undefined;
    if (!credits?.chargesLive()) return undefined;
    const amount = credits.priceOf(scope, usage.kind, usage.quantity);
    return amount > 0 ? { amount, key: m.id, units: usage.kind === 'email.recipient' ? usage.quantity : 1 } : undefined;
  }

  /** Inside the caller's ORM transaction (sends made `within` another context's transaction): the pool first, then credits. */
  async reserveWithin(scope: Scope, charge: SendCharge | undefined, tx: EntityManager): Promise<void> {
    if (!charge) return;
    await this.#credits()!.reserveSend(scope, { amount: charge.amount, key: charge.key, referenceId: charge.key, units: charge.units }, tx);
  }

  /** The reservation CTE the group commit joins (undefined without the billing module). */
  reservations(): Reservations | undefined {
    return this.#credits()?.sendReservations;
  }

  /**
   * What the ledger charged for each message (by id), in minor units and the account's currency;
   * messages with nothing captured yet (queued, failed, covered by the plan's included messages,
   * test mode, no billing module) are absent.
   */
  async chargesOf(tenant: TenantRef, ids: readonly string[]): Promise<Map<string, MessageCharge>> {
    const credits = tenant.mode === 'live' ? this.#credits() : undefined;
    return credits && ids.length > 0 ? credits.chargesOf(tenant, ids) : new Map();
  }

  /** Captures (delivered) or releases (failed) a live message's reservation; no-op in test mode or without billing. */
  async settle(tenant: TenantRef, messageId: string, outcome: 'delivered' | 'failed'): Promise<void> {
    if (tenant.mode !== 'live') return;
    await this.#credits()?.settleByKey(tenant, messageId, outcome === 'delivered' ? 'capture' : 'release');
  }
}

/**
 * A sent message (not email) with no delivery report for this long counts as delivered for billing:
 * the provider took it, and a report that never came must not hold the money forever.
 */
export const UNREPORTED_SEND_MS = 72 * 3_600_000;
/** pg-boss states of a delivery job that may still send its message. */
const JOB_UNDER_WAY = new Set(['created', 'retry', 'active']);

/**
 * Port `messageCharges`: what to do with the reservation of a message (ledger key: its id) that is
 * still open past billing's bound. By the message's status: delivered or read → capture; failed →
 * release; sent → capture for email (final once the server took it, as on delivery) or once
 * {@link UNREPORTED_SEND_MS} passed without a report, else wait; queued → wait while its delivery
 * may still run (a row of the delivery queue, or a delivery job from before it), else the message
 * is failed (MESSAGE_SEND_FAILED) and released. No such message
 * of the tenant → release (nothing was accepted for the money).
 */
export class MessageCharges implements ReservationOwnerPort {
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #jobs: Pick<Jobs, 'states'>;
  readonly #delivery: Abandoning;
  readonly #deliverJob: { name: string; idsOf(messageId: string): readonly string[] };
  readonly #queue: Pick<DeliveryQueue, 'pending'>;

  constructor(deps: {
    pool: Pool; clock: Clock; jobs: Pick<Jobs, 'states'>; delivery: Abandoning; queue: Pick<DeliveryQueue, 'pending'>;
    deliverJob: { name: string; idsOf(messageId: string): readonly string[] };
  }) {
    this.#queue = deps.queue;
    this.#pool = deps.pool;
    this.#clock = deps.clock;
    this.#jobs = deps.jobs;
    this.#delivery = deps.delivery;
    this.#deliverJob = deps.deliverJob;
  }

  async outcomes(items: readonly { organizationId: string; mode: Mode; key: string }[]): Promise<ChargeOutcome[]> {
    const read = async (ids: readonly string[]) => {
      const { rows } = await this.#pool.query<{ id: string; organization_id: string; mode: Mode; channel: string; status: MessageStatus; sent_ms: string | null }>(
        `select id, organization_id, mode, channel, status, (extract(epoch from sent_at) * 1000)::bigint::text as sent_ms from messages where id = any($1::text[])`, [[...ids]]);
      return new Map(rows.map((r) => [r.id, r]));
    };
    const messages = await read(items.map((i) => i.key));
    const mine = (i: { organizationId: string; mode: Mode; key: string }) => {
      const m = messages.get(i.key);
      return m && m.organization_id === i.organizationId && m.mode === i.mode ? m : undefined;
    };
    // Queued: their deliveries first, then the messages again (a delivery over cannot move its message any more).
    const queued = items.filter((i) => mine(i)?.status === 'queued').map((i) => i.key);
    const rows = await this.#queue.pending(queued);
    const unrowed = queued.filter((id) => !rows.has(id));
    // Without a queue row, a delivery job from before the queue (the one of its acceptance and, for a paced send, the one of its slot).
    const jobs = unrowed.length ? await this.#jobs.states(this.#deliverJob.name, unrowed.flatMap((id) => this.#deliverJob.idsOf(id))) : new Map<string, string>();
    const over = unrowed.filter((id) => !this.#deliverJob.idsOf(id).some((j) => JOB_UNDER_WAY.has(jobs.get(j) ?? 'gone')));
    const again = over.length ? await read(over) : undefined;
    const now = this.#clock.now().getTime();
    const out: ChargeOutcome[] = [];
    for (const i of items) {
      const m = mine(i);
      if (!m) {
        out.push('release');
        continue;
      }
      switch (m.status) {
        case 'delivered':
        case 'read':
          out.push('capture');
          break;
        case 'failed':
          out.push('release');
          break;
        case 'sent':
          out.push(m.channel === 'email' || (m.sent_ms !== null && now - Number(m.sent_ms) > UNREPORTED_SEND_MS) ? 'capture' : null);
          break;
        case 'queued': {
          const still = again?.get(m.id)?.status === 'queued';
          out.push(still && (await this.#delivery.abandon(i, m.id)) ? 'release' : null);
          break;
        }
        default:
          out.push(null);
      }
    }
    return out;
  }
}
