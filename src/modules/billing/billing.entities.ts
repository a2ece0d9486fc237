/**
 * Billing records. `billing_accounts` holds one row per organization and mode: the subscription,
 * the default payment method, the credit balance (the sum of the ledger, never negative) and
 * auto-reload. Ledger entries are append-only (a trigger refuses updates and deletes); invoices
 * are immutable once written (their PDF bytes are read and written with SQL, not through here).
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns, type Mode } from '../../platform/db/tenant.ts';
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';

export const SUBSCRIPTION_STATUSES = ['trialing', 'active', 'past_due', 'paused', 'cancelled'] as const;
export type SubscriptionState = (typeof SUBSCRIPTION_STATUSES)[number];

export const BillingAccount = defineEntity({
  name: 'BillingAccount',
  tableName: 'billing_accounts',
  filters: tenantFilter('organization+mode'),
  properties: {
    organizationId: p.string().primary(),
    mode: p.string().$type<Mode>().primary(),
    planId: p.string().$type<Plan>(),
    status: p.string().$type<SubscriptionState>(),
    currentPeriodStart: p.datetime(),
    currentPeriodEnd: p.datetime(),
    cancelAtPeriodEnd: p.boolean(),
    provider: p.string().nullable(),
    customerId: p.string().nullable(),
    subscriptionId: p.string().nullable(),
    paymentMethodId: p.string().nullable(),
    paymentMethodBrand: p.string().nullable(),
    paymentMethodLast4: p.string().nullable(),
    subscriptionEventAt: p.datetime().nullable(),
    currency: p.string(),
    /** Minor units; bigint in PostgreSQL, read as a number (balances stay far below 2^53). */
    balance: p.bigint('number'),
    autoReloadEnabled: p.boolean(),
    autoReloadThreshold: p.bigint('number'),
    autoReloadAmount: p.bigint('number'),
    /** Set by the debit that crossed the threshold; the one reload job clears it. */
    autoReloadToken: p.string().nullable(),
    /** When the mark was set, or last picked up by its job (the sweeper re-enqueues marks left older than that). */
    autoReloadTokenAt: p.datetime().nullable(),
    lastToppedUpAt: p.datetime().nullable(),
    invoiceSeq: p.integer(),
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type BillingAccount = InferEntity<typeof BillingAccount>;

export const LEDGER_KINDS = ['topup', 'reservation', 'capture', 'release', 'refund', 'adjustment'] as const;
export type LedgerKind = (typeof LEDGER_KINDS)[number];

export const CreditLedgerEntry = defineEntity({
  name: 'CreditLedgerEntry',
  tableName: 'credit_ledger_entries',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    kind: p.string().$type<LedgerKind>(),
    /** The entry's effect on the balance, in minor units (reservations negative, releases positive, captures 0). */
    amount: p.bigint('number'),
    referenceId: p.string().nullable(),
    idempotencyKey: p.string().nullable(),
    paymentId: p.string().nullable(),
    description: p.string().nullable(),
    createdAt: p.datetime(),
  },
});
export type CreditLedgerEntry = InferEntity<typeof CreditLedgerEntry>;

export const CheckoutSessionRecord = defineEntity({
  name: 'CheckoutSessionRecord',
  tableName: 'checkout_sessions',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    provider: p.string(),
    planId: p.string().$type<Plan>(),
    priceId: p.string(),
    url: p.string(),
    successUrl: p.string(),
    cancelUrl: p.string(),
    status: p.string().$type<'open' | 'complete' | 'expired' | 'cancelled'>(),
    expiresAt: p.datetime(),
    completedAt: p.datetime().nullable(),
    createdAt: p.datetime(),
  },
});
export type CheckoutSessionRecord = InferEntity<typeof CheckoutSessionRecord>;

export type InvoiceLine = { description: string; kind: 'plan' | 'overage' | 'topup'; quantity: number; unit_amount: number; amount: number };

export const Invoice = defineEntity({
  name: 'Invoice',
  tableName: 'invoices',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    number: p.string(),
    amount: p.bigint('number'),
    currency: p.string(),
    status: p.string().$type<'paid' | 'open' | 'void'>(),
    periodStart: p.datetime(),
    periodEnd: p.datetime(),
    lines: p.json<InvoiceLine[]>(),
    pdfSha256: p.string(),
    createdAt: p.datetime(),
  },
});
export type Invoice = InferEntity<typeof Invoice>;
