/**
 * The billing context's public face for other modules: its event types and the credits port
 * (`credits`) that paid sends use — messaging's live-mode sends, agents' live invocations, and
 * campaigns once wired at merge:
 * reserve the price when a message is accepted (in the caller's transaction), capture on
 * delivery, release on failure. Test mode never touches the ledger: callers skip it for test scopes.
 * A reservation nobody settled (the process died in between) is settled by the stale-reservation
 * sweep, which asks the owning context through the ports it offers (`messageCharges`, `agentCharges`).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Scope } from '../../platform/auth/scope.ts';
import type { Mode, TenantRef } from '../../platform/db/tenant.ts';
import type { PgQueryable } from '../../platform/db/sql.ts';
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';

export const BILLING_EVENTS = ['billing.subscription_updated', 'billing.credits_topped_up', 'billing.auto_reload_failed', 'invoice.created'] as const;
declare module '../../platform/events/events.ts' {
  interface EventCatalog { billing: (typeof BILLING_EVENTS)[number] }
}

/**
 * `earlier` is set when the key was reserved before: this is that reservation, still `open`, or
 * already `captured` or `released` (a caller retrying a failed attempt reserves under a new key).
 */
export type CreditReservation = { reservationId: string; amount: number; balance: number; earlier?: 'open' | 'captured' | 'released' };

/** What became of a reservation: still `open`, `captured` or `released` (null: no such reservation). */
export type ReservationState = 'open' | 'captured' | 'released' | null;

/**
 * Live sends inside the plan's included messages (`messages_included` per billing period) are not
 * charged: each takes its units (1 per message, 1 per email recipient) from the period's pool,
 * atomically with its acceptance; only sends past the pool reserve credits. Enterprise's unlimited
 * pool never charges messages.
 */
export type CreditsPort = {
  /**
   * Whether live sends are charged at all: only with a live payments provider (Stripe, or
   * BILLING_LIVE_SANDBOX), since without one no balance can ever be topped up.
   */
  chargesLive(): boolean;
  /** The price of `quantity` units (`sms.segment`, `email.recipient`, `voice.minute`, `agent.invocation`, …) on the caller's plan, in minor units. */
  priceOf(tenant: { plan: Plan }, unit: string, quantity: number): number;
  /**
   * Reserves `amount` minor units; INSUFFICIENT_CREDITS (402) when the balance does not cover it
   * (nothing reserved), SUBSCRIPTION_INACTIVE (403) when the subscription is cancelled or paused.
   * `key` makes it idempotent (e.g. the message id). Pass `em` (an ORM transaction, or a pg client
   * inside the caller's own transaction) to join the caller's transaction.
   */
  reserve(scope: Scope, input: ReserveInput, em?: EntityManager | PgQueryable): Promise<CreditReservation>;
  /**
   * A live send made inside another context's transaction: takes `units` from the plan's included
   * messages of the billing period when they still cover it (nothing reserved: `null`), else
   * reserves `amount` like `reserve`.
   */
  reserveSend(scope: Scope, input: ReserveInput & { units: number }, em?: EntityManager | PgQueryable): Promise<CreditReservation | null>;
  /**
   * Takes units (in order, while they fit) from the billing period's included pool of `quota`;
   * answers how many and the period they were taken from (to give unused ones back to it).
   */
  takePool(scope: Scope, quota: PeriodQuota, units: readonly number[], em?: EntityManager): Promise<{ taken: number; periodStart: Date | null }>;
  /** Gives units taken from a period's pool back (a call that used fewer minutes than it took). */
  returnPool(tenant: TenantRef, quota: PeriodQuota, periodStart: Date, units: number, em?: EntityManager): Promise<void>;
  /**
   * Throws what `reserve` would throw for `amount` now (402 INSUFFICIENT_CREDITS, 403
   * SUBSCRIPTION_INACTIVE) and reserves nothing: a check before a stream starts. Advisory only.
   */
  assertCovers(scope: Scope, amount: number): Promise<void>;
  /**
   * Reserves many amounts of one tenant in one statement (a campaign's batch): taken in order while
   * the balance covers them; per item its reservation, or null when the balance ran out.
   */
  reserveMany(scope: Scope, items: readonly { amount: number; key: string; referenceId?: string | null }[], em?: EntityManager | PgQueryable): Promise<(CreditReservation | null)[]>;
  /**
   * Final on delivery; idempotent. Returns whether this call settled it: false when it was settled
   * before, by a capture or by a release (the stale-reservation sweep's included): ask `stateOf`.
   * `keep` captures only that much of the reservation and gives the rest back (a call billed by the
   * minute it actually lasted); by default all of it is captured.
   */
  capture(tenant: TenantRef, reservationId: string, em?: EntityManager, keep?: number): Promise<boolean>;
  /** What became of a reservation (in `em`'s transaction: a settlement it waited for included). */
  stateOf(tenant: TenantRef, reservationId: string, em?: EntityManager): Promise<ReservationState>;
  /** Back to the balance on failure; idempotent. */
  release(tenant: TenantRef, reservationId: string, em?: EntityManager): Promise<boolean>;
  /**
   * Reservations as one more CTE of the caller's own statement (messaging's group commit): `cte(n)`
   * is its SQL with parameters from `$n` (the arrays and the time `params` gives), which debits each
   * tenant's balance for its items' total and writes one `reservation` entry per item (ledger key
   * and reference: `key`), or makes the whole statement fail with an error `isRefusal` recognizes.
   * `refusal` then tells one send why (402 INSUFFICIENT_CREDITS or 403 SUBSCRIPTION_INACTIVE).
   */
  sendReservations: SendReservations;
  /** Captures (delivered) or releases (failed) the reservation made under `key` (a message id); idempotent. */
  settleByKey(tenant: TenantRef, key: string, kind: 'capture' | 'release'): Promise<boolean>;
  /**
   * What the ledger charged under each key (a message id, `call:<id>`), in minor units and the
   * account's currency: the captured part of its reservation. Keys with nothing captured (open,
   * released, covered by the plan's included units, test mode) are absent.
   */
  chargesOf(tenant: TenantRef, keys: readonly string[]): Promise<Map<string, Charge>>;
};

/** An amount the ledger charged, in minor units (cents), and its currency code (`usd`). */
export type Charge = { amount: number; currency: string };

export type ReserveInput = {
  amount: number;
  key: string;
  referenceId?: string | null;
  description?: string | null;
  /**
   * For a retry of work that may take as long again (an agent turn): an earlier reservation under
   * `key` still open after half of BILLING_STALE_RESERVATION_SECONDS is released and answered as
   * `earlier: 'released'` instead of being reused, since the stale-reservation sweep could release
   * it while the retry runs. The caller then reserves under its next key.
   */
  renewAged?: boolean;
};

export type SendReservations = {
  cte(firstParam: number): string;
  /** `units`: what each send takes from its plan's included messages (pooled sends are not charged). */
  params(items: readonly { organizationId: string; mode: string; plan: Plan; amount: number; key: string; units: number }[], now: Date): unknown[];
  isRefusal(e: unknown): boolean;
  refusal(scope: Scope, amount: number): Promise<Error>;
  /**
   * The statement carrying `cte` committed, with charged sends of these tenants: a debit that took
   * a balance below its auto-reload threshold marked the account, and this enqueues the one reload
   * job of each such mark. Returns at once (the work runs on; a mark it misses is the sweeper's).
   */
  committed(tenants: readonly TenantRef[]): void;
};

/**
 * What the stale-reservation sweep does with a reservation still open past
 * BILLING_STALE_RESERVATION_SECONDS, as its owner answers: `capture` (the paid work was done),
 * `release` (it never will be), or null (still under way: asked again later, less and less often).
 */
export type ChargeOutcome = 'capture' | 'release' | null;

/**
 * The owner of a kind of reservation answers for its open ones (a process that died between
 * reserving and settling, a settlement that was never reached). The sweep tells owners by ledger
 * key: a message id (`msg_…`) is messaging's (`messageCharges`), `agent_turn:…` is agents'
 * (`agentCharges`), `call:…` is voice's (`callCharges`); reservations under other keys are never swept. `outcomes` answers item by item.
 */
export type ReservationOwnerPort = {
  outcomes(items: readonly { organizationId: string; mode: Mode; key: string }[]): Promise<ChargeOutcome[]>;
};

/** Quotas counted per billing period from usage entries: the `messages_included` pool (every channel) and `voice_minutes`. */
export type PeriodQuota = 'messages' | 'voice_minutes';

/**
 * Plan quotas (port `planQuotas`, optional for its users): the sending contexts ask it before
 * accepting, so none of them imports billing. Blocking only on plans whose overage policy is
 * `block`, in live mode (see billing.plans.ts `OVERAGE_POLICY`); otherwise every call answers at once
 * without a query.
 */
export type PlanQuotasPort = {
  /** Throws QUOTA_EXCEEDED (429) when `quantity` more units would pass the included amount (details: quota, limit, used, requested, period_end). */
  check(scope: Scope, quota: PeriodQuota, quantity: number): Promise<void>;
  /**
   * Units still allowed this period, counted now; null when nothing limits them. Pass `em` (inside a
   * transaction that records the usage it spends): callers doing so are serialized per tenant until commit.
   */
  remaining(scope: Scope, quota: PeriodQuota, em?: EntityManager): Promise<number | null>;
  /** Throws QUOTA_EXCEEDED (429) when one more agent would pass the plan's `agents` (`existing`: agents the organization has in this mode). */
  checkAgents(scope: Scope, existing: number): void;
};

declare module '../manifest.ts' {
  interface Ports {
    credits: CreditsPort;
    planQuotas: PlanQuotasPort;
    /** Offered by messaging: what to do with a message's stale reservation (by the message's status). */
    messageCharges: ReservationOwnerPort;
    /** Offered by agents: what to do with an agent turn's stale reservation. */
    agentCharges: ReservationOwnerPort;
    /** Offered by voice: what to do with a call's stale reservation (`call:<id>`). */
    callCharges: ReservationOwnerPort;
  }
}
