/**
 * The plan catalog and the live-mode price table, as data. Prices are integer minor units (cents)
 * except `price_monthly`, which the spec shows as a number in major units (null: custom pricing).
 */
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';

export type Quota = number | 'unlimited';
export type PlanFeatures = {
  messages_included: Quota;
  channels: string[];
  agents: Quota;
  voice_minutes: Quota;
  support: string;
};
export type PlanRecord = {
  id: Plan;
  name: string;
  price_id: string;
  /** Major units (49 = $49.00); null: custom pricing (enterprise, through sales). */
  price_monthly: number | null;
  currency: string;
  features: PlanFeatures;
};

export const CURRENCY = 'usd';
const ALL_CHANNELS = ['sms', 'whatsapp', 'email', 'rcs', 'viber'];

export const PLANS: readonly PlanRecord[] = [
  {
    id: 'starter', name: 'Starter', price_id: 'price_starter_monthly', price_monthly: 49, currency: CURRENCY,
    features: { messages_included: 5_000, channels: ['sms', 'email'], agents: 1, voice_minutes: 500, support: 'email' },
  },
  {
    id: 'growth', name: 'Growth', price_id: 'price_growth_monthly', price_monthly: 199, currency: CURRENCY,
    features: { messages_included: 25_000, channels: ['sms', 'whatsapp', 'email', 'rcs'], agents: 5, voice_minutes: 2_500, support: 'priority email' },
  },
  {
    id: 'business', name: 'Business', price_id: 'price_business_monthly', price_monthly: 499, currency: CURRENCY,
    features: { messages_included: 100_000, channels: ALL_CHANNELS, agents: 20, voice_minutes: 10_000, support: 'phone and email' },
  },
  {
    id: 'enterprise', name: 'Enterprise', price_id: 'price_enterprise_custom', price_monthly: null, currency: CURRENCY,
    features: { messages_included: 'unlimited', channels: ALL_CHANNELS, agents: 'unlimited', voice_minutes: 'unlimited', support: 'dedicated manager' },
  },
];

/**
 * What a plan does past an included quota (`messages_included`, `voice_minutes`) in live mode:
 * `block` → 429 QUOTA_EXCEEDED until the next period; `overage` → sends go on, each paid from the
 * credit balance at {@link PRICE_TABLE} like every live send. `agents` is always a hard cap on the
 * number of agents. Enterprise quotas are unlimited.
 */
export const OVERAGE_POLICY: Readonly<Record<Plan, 'block' | 'overage'>> = {
  starter: 'block', growth: 'overage', business: 'overage', enterprise: 'overage',
};

export function planById(id: string): PlanRecord | undefined {
  return PLANS.find((p) => p.id === id);
}

export function planByPriceId(priceId: string): PlanRecord | undefined {
  return PLANS.find((p) => p.price_id === priceId);
}

/** The plan fee in minor units (0 for custom pricing, invoiced by contract). */
export function planFeeMinor(plan: PlanRecord): number {
  return plan.price_monthly === null ? 0 : Math.round(plan.price_monthly * 100);
}

/** Billable units of live-mode sends (usage entry kinds). */
export const PRICED_UNITS = ['sms.segment', 'whatsapp.message', 'email.recipient', 'rcs.message', 'viber.message', 'voice.minute', 'agent.invocation'] as const;
export type PricedUnit = (typeof PRICED_UNITS)[number];

/** Price per unit in cents, by plan (live mode only; test mode never touches the ledger). */
export const PRICE_TABLE: Readonly<Record<Plan, Readonly<Record<PricedUnit, number>>>> = {
  starter: { 'sms.segment': 2, 'whatsapp.message': 2, 'email.recipient': 1, 'rcs.message': 2, 'viber.message': 2, 'voice.minute': 3, 'agent.invocation': 5 },
  growth: { 'sms.segment': 2, 'whatsapp.message': 1, 'email.recipient': 1, 'rcs.message': 2, 'viber.message': 2, 'voice.minute': 2, 'agent.invocation': 4 },
  business: { 'sms.segment': 1, 'whatsapp.message': 1, 'email.recipient': 1, 'rcs.message': 1, 'viber.message': 1, 'voice.minute': 2, 'agent.invocation': 3 },
  enterprise: { 'sms.segment': 1, 'whatsapp.message': 1, 'email.recipient': 1, 'rcs.message': 1, 'viber.message': 1, 'voice.minute': 1, 'agent.invocation': 2 },
};

/** The price of `quantity` units of `unit` on `plan`, in cents. */
/** The plan's included units of a quota per billing period; -1: unlimited. */
export function includedOf(plan: Plan, quota: 'messages' | 'voice_minutes'): number {
  const features = planById(plan)?.features;
  const value = quota === 'messages' ? features?.messages_included : features?.voice_minutes;
  return value === 'unlimited' ? -1 : (value ?? 0);
}

export function priceOf(plan: Plan, unit: string, quantity: number): number {
  if (!Number.isInteger(quantity) || quantity < 0) throw new Error(`quantity must be a non-negative integer, got ${quantity}`);
  const per = (PRICE_TABLE[plan] as Record<string, number | undefined>)[unit];
  if (per === undefined) throw new Error(`no price for unit ${unit}`);
  return per * quantity;
}
