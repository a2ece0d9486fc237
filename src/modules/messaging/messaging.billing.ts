/**
 * Live-mode sends are paid (issue 17): the price (per SMS segment, email recipient or message, the
 * plan's price table) is reserved from the credit balance in the transaction that accepts the
 * message (INSUFFICIENT_CREDITS 402 or SUBSCRIPTION_INACTIVE 403, and nothing accepted, when it
 * cannot be), captured on delivery and released on failure; the ledger key is the message id, so a
 * campaign's batch and messaging never charge one message twice. In a group commit the reservations
 * are one more CTE of the batch's statement (the billing context's SQL, `sendReservations`). A starter plan stops at its
 * included messages (QUOTA_EXCEEDED 429). Test mode never touches the ledger. Both ports are
 * optional: without the billing module sends are not charged.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Scope } from '../../platform/auth/scope.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { Ports } from '../manifest.ts';
import type { Reservations } from './messaging.batching.ts';
import type { Message } from './messaging.entities.ts';

type Usage = { kind: string; quantity: number };

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

  /** What a live send costs (undefined in test mode, without billing, or when free). */
  chargeOf(scope: Scope, m: Pick<Message, 'id'>, usage: Usage): { amount: number; key: string } | undefined {
    const credits = scope.mode === 'live' ? this.#credits() : undefined;
    if (!credits?.chargesLive()) return undefined;
    const amount = credits.priceOf(scope, usage.kind, usage.quantity);
    return amount > 0 ? { amount, key: m.id } : undefined;
  }

  /** Reserves inside the caller's ORM transaction (sends made `within` another context's transaction). */
  async reserveWithin(scope: Scope, charge: { amount: number; key: string } | undefined, tx: EntityManager): Promise<void> {
    if (!charge) return;
    await this.#credits()!.reserve(scope, { amount: charge.amount, key: charge.key, referenceId: charge.key }, tx);
  }

  /** The reservation CTE the group commit joins (undefined without the billing module). */
  reservations(): Reservations | undefined {
    return this.#credits()?.sendReservations;
  }

  /** Captures (delivered) or releases (failed) a live message's reservation; no-op in test mode or without billing. */
  async settle(tenant: TenantRef, messageId: string, outcome: 'delivered' | 'failed'): Promise<void> {
    if (tenant.mode !== 'live') return;
    await this.#credits()?.settleByKey(tenant, messageId, outcome === 'delivered' ? 'capture' : 'release');
  }
}
