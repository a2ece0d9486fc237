/**
 * Usage reads: aggregates of the `usage_entries` other contexts record (messaging, verify,
 * numbers; voice and agents as they land). Entries are unique per idempotency key, so a retried
 * job that recorded its usage again is counted once.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import { ServiceError } from '../../platform/errors.ts';
import { sqlClient, sqlQuery } from '../../platform/db/sql.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { CreditsService } from './credits.service.ts';
import { planById, type Quota } from './billing.plans.ts';

export const MESSAGE_CHANNELS = ['sms', 'whatsapp', 'email', 'rcs', 'viber'] as const;
type Channel = (typeof MESSAGE_CHANNELS)[number];
/** The usage kind that counts messages of each channel (sms counts segments as quantity). */
const MESSAGE_KINDS: Record<Channel, string> = { sms: 'sms.segment', whatsapp: 'whatsapp.message', email: 'email.recipient', rcs: 'rcs.message', viber: 'viber.message' };

type KindTotals = Map<string, { quantity: number; resources: number }>;

/** Voice minutes: voice records its calls' minutes as `voice.minutes`; `voice.minute` is the priced unit's name. Both count. */
export function voiceMinutesOf(t: KindTotals): number {
  return (t.get('voice.minute')?.quantity ?? 0) + (t.get('voice.minutes')?.quantity ?? 0);
}

export type CurrentUsage = {
  billing_period: { start: string; end: string };
  messages: Record<Channel, { sent: number; included: Quota }> & { total: number; included: Quota };
  voice: { minutes_used: number; minutes_included: Quota };
  agents: { invocations: number; invocations_included: Quota };
};

export type UsageBucket = {
  start: string;
  end: string;
  messages: Record<Channel, number> & { total: number };
  sms_segments: number;
  voice_minutes: number;
  agent_invocations: number;
  verifications: number;
};

/** Agent invocations a plan includes per period: none on any plan (each live one is priced, billing.plans.ts PRICE_TABLE). */
export const AGENT_INVOCATIONS_INCLUDED = 0;

/** Longest history range per call. */
export const MAX_HISTORY_DAYS = 366;

export class UsageService {
  readonly #orm: MikroORM;
  readonly #credits: CreditsService;

  constructor(deps: { orm: MikroORM; credits: CreditsService }) {
    this.#orm = deps.orm;
    this.#credits = deps.credits;
  }

  /** Totals per usage kind in [from, to): quantity summed, and distinct resources (a message counted once). `em`: inside its transaction. */
  async totals(tenant: TenantRef, from: Date, to: Date, em?: EntityManager): Promise<KindTotals> {
    const db = (em?.getTransactionContext() as Transaction<unknown> | undefined) ?? sqlClient(this.#orm);
    const rows = await sqlQuery<{ kind: string; quantity: string; resources: string }>(db, `
      select kind, sum(quantity)::text as quantity, count(distinct coalesce(resource_id, id))::text as resources
      from usage_entries where organization_id = $1 and mode = $2 and created_at >= $3 and created_at < $4 group by kind`,
    [tenant.organizationId, tenant.mode, from, to]);
    return new Map(rows.map((r) => [r.kind, { quantity: Number(r.quantity), resources: Number(r.resources) }]));
  }

  /** Messages of every channel in `totals`, as `messages.total` counts them (the `messages_included` pool). */
  messagesOf(totals: KindTotals): number {
    return MESSAGE_CHANNELS.reduce((n, c) => n + sentOf(totals, c), 0);
  }

  async current(scope: Scope): Promise<CurrentUsage> {
    const a = await this.#credits.account(scope);
    const plan = planById(a.planId)!;
    const totals = await this.totals(scope, a.currentPeriodStart, a.currentPeriodEnd);
    const included = plan.features.messages_included;
    const messages = Object.fromEntries(MESSAGE_CHANNELS.map((c) => [c, { sent: sentOf(totals, c), included }])) as unknown as CurrentUsage['messages'];
    messages.total = this.messagesOf(totals);
    messages.included = included;
    return {
      billing_period: { start: a.currentPeriodStart.toISOString(), end: a.currentPeriodEnd.toISOString() },
      messages,
      voice: { minutes_used: voiceMinutesOf(totals), minutes_included: plan.features.voice_minutes },
      // No plan includes agent invocations (`features.agents` is how many agents it may have): every live one is paid from credits.
      agents: { invocations: totals.get('agent.invocation')?.quantity ?? 0, invocations_included: AGENT_INVOCATIONS_INCLUDED },
    };
  }

  /** Usage by UTC day or month from `start_date` through `end_date` (inclusive); buckets without usage are listed with zeros. */
  async history(scope: Scope, input: { start_date: string; end_date: string; granularity?: 'day' | 'month' | null }): Promise<UsageBucket[]> {
    const granularity = input.granularity ?? 'day';
    const from = new Date(`${input.start_date}T00:00:00Z`);
    const last = new Date(`${input.end_date}T00:00:00Z`);
    if (last < from) throw new ServiceError('VALIDATION_ERROR', 'end_date: must not be before start_date', { field: 'end_date', value: input.end_date });
    const days = (last.getTime() - from.getTime()) / 86_400_000 + 1;
    if (days > MAX_HISTORY_DAYS) throw new ServiceError('VALIDATION_ERROR', `end_date: the range may span at most ${MAX_HISTORY_DAYS} days`, { field: 'end_date', expected: `<= ${MAX_HISTORY_DAYS} days` });
    const buckets: Date[] = [];
    for (let d = granularity === 'day' ? from : new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), 1)); d <= last; d = next(d, granularity)) buckets.push(d);
    const rows = await sqlQuery<{ bucket: string; kind: string; quantity: string; resources: string }>(sqlClient(this.#orm), `
      select (extract(epoch from date_trunc($5, created_at, 'UTC')) * 1000)::bigint::text as bucket, kind,
        sum(quantity)::text as quantity, count(distinct coalesce(resource_id, id))::text as resources
      from usage_entries where organization_id = $1 and mode = $2 and created_at >= $3 and created_at < $4 group by 1, 2`,
    [scope.organizationId, scope.mode, from, new Date(last.getTime() + 86_400_000), granularity]);
    const byBucket = new Map<number, KindTotals>();
    for (const r of rows) {
      const key = Number(r.bucket);
      const m = byBucket.get(key) ?? new Map();
      m.set(r.kind, { quantity: Number(r.quantity), resources: Number(r.resources) });
      byBucket.set(key, m);
    }
    return buckets.map((b) => {
      const t: KindTotals = byBucket.get(b.getTime()) ?? new Map();
      const messages = Object.fromEntries(MESSAGE_CHANNELS.map((c) => [c, sentOf(t, c)])) as unknown as UsageBucket['messages'];
      messages.total = MESSAGE_CHANNELS.reduce((n, c) => n + sentOf(t, c), 0);
      return {
        start: b.toISOString(), end: next(b, granularity).toISOString(), messages,
        sms_segments: t.get('sms.segment')?.quantity ?? 0, voice_minutes: voiceMinutesOf(t),
        agent_invocations: t.get('agent.invocation')?.quantity ?? 0, verifications: t.get('verify.verification')?.quantity ?? 0,
      };
    });
  }
}

/** Messages sent on a channel: distinct messages (an SMS of 3 segments is one message; email counts recipients). */
function sentOf(t: KindTotals, c: Channel): number {
  const v = t.get(MESSAGE_KINDS[c]);
  if (!v) return 0;
  return c === 'sms' ? v.resources : v.quantity;
}

function next(d: Date, granularity: 'day' | 'month'): Date {
  return granularity === 'day' ? new Date(d.getTime() + 86_400_000) : new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));
}
