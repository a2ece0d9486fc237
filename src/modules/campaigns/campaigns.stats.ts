/**
 * Campaign statistics: recipient counters from the frozen audience (sent, skipped by reason,
 * failed, cancelled, waiting by reason) and delivery outcomes of the sent messages from messaging
 * (port `messageOutcomes`: delivered, read, failed on delivery, replied, segments), per campaign and
 * per A/B variant, and the organization's aggregate. `cost` comes from billing's credit ledger
 * (optional port `campaignCredits`): what the campaign's messages were charged, less what was
 * released, in minor units of `currency` (0 in test mode, which is never charged, or without billing).
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Ports } from '../manifest.ts';
import { CAMPAIGN_STATUSES, type Campaign, type CampaignStatus } from './campaigns.entities.ts';
import { sql } from './campaigns.recipients.ts';

export const SKIP_REASONS = ['opted_out', 'no_address', 'invalid', 'frequency_cap'] as const;

export type Counters = {
  recipients: number; pending: number; sent: number; delivered: number; read: number; failed: number; replied: number;
  skipped: number; opted_out: number; cancelled: number; segments: number; cost: number;
  skipped_by_reason: Record<(typeof SKIP_REASONS)[number], number>;
  waiting_by_reason: { paced: number; quiet_hours_deferred: number; ab_test_winner: number; paused: number };
  failed_by_reason: Record<string, number>;
};
export type CampaignStats = Counters & { currency: string; variants: ({ name: string } & Counters)[] };
export type OrganizationStats = { campaigns: number; campaigns_by_status: Record<CampaignStatus, number> } & Counters & { currency: string };

/** Without billing installed nothing is charged; the catalog's currency. */
const DEFAULT_CURRENCY = 'usd';

type Row = { variant: string | null; status: string; reason: string | null; wait_reason: string | null; n: number };

function empty(): Counters {
  return {
    recipients: 0, pending: 0, sent: 0, delivered: 0, read: 0, failed: 0, replied: 0, skipped: 0, opted_out: 0, cancelled: 0, segments: 0, cost: 0,
    skipped_by_reason: { opted_out: 0, no_address: 0, invalid: 0, frequency_cap: 0 },
    waiting_by_reason: { paced: 0, quiet_hours_deferred: 0, ab_test_winner: 0, paused: 0 },
    failed_by_reason: {},
  };
}

function add(c: Counters, r: Row, paused: boolean): void {
  c.recipients += r.n;
  if (r.status === 'pending') {
    c.pending += r.n;
    if (r.wait_reason === 'quiet_hours') c.waiting_by_reason.quiet_hours_deferred += r.n;
    else if (r.wait_reason === 'ab_test_winner') c.waiting_by_reason.ab_test_winner += r.n;
    else if (paused) c.waiting_by_reason.paused += r.n;
    else c.waiting_by_reason.paced += r.n;
  } else if (r.status === 'sent') c.sent += r.n;
  else if (r.status === 'cancelled') c.cancelled += r.n;
  else if (r.status === 'skipped') {
    c.skipped += r.n;
    const reason = r.reason as (typeof SKIP_REASONS)[number];
    if (reason in c.skipped_by_reason) c.skipped_by_reason[reason] += r.n;
    if (reason === 'opted_out') c.opted_out += r.n;
  } else if (r.status === 'failed') {
    c.failed += r.n;
    c.failed_by_reason[r.reason ?? 'unknown'] = (c.failed_by_reason[r.reason ?? 'unknown'] ?? 0) + r.n;
  }
}

export class CampaignStatsReader {
  readonly #orm: MikroORM;
  readonly #outcomes: Ports['messageOutcomes'];
  readonly #credits: () => Ports['campaignCredits'] | undefined;

  constructor(deps: { orm: MikroORM; outcomes: Ports['messageOutcomes']; credits: () => Ports['campaignCredits'] | undefined }) {
    this.#orm = deps.orm;
    this.#outcomes = deps.outcomes;
    this.#credits = deps.credits;
  }

  /** Charged per group (see the file comment). */
  async #cost(tenant: TenantRef, ids: readonly string[], groups: readonly string[]): Promise<{ currency: string; byGroup: Map<string, number> }> {
    const credits = this.#credits();
    if (!credits || tenant.mode === 'test') return { currency: DEFAULT_CURRENCY, byGroup: new Map() };
    return credits.costByGroup(tenant, ids, groups);
  }

  async forCampaign(tenant: TenantRef, c: Campaign): Promise<CampaignStats> {
    const em = tenantEm(this.#orm, tenant);
    const rows = await sql<Row>(em, `select variant, status, reason, wait_reason, count(*)::int as n from campaign_recipients where campaign_id = ? group by 1, 2, 3, 4`, [c.id]);
    const total = empty();
    const byVariant = new Map<string, Counters>((c.abTest?.variants ?? []).map((v) => [v.name, empty()]));
    for (const r of rows) {
      add(total, r, c.status === 'paused');
      if (r.variant && byVariant.has(r.variant)) add(byVariant.get(r.variant)!, r, c.status === 'paused');
    }
    const sent = await sql<{ message_id: string; variant: string | null }>(em, `select message_id, variant from campaign_recipients where campaign_id = ? and message_id is not null`, [c.id]);
    const outcomes = await this.#outcomes.countByGroup(tenant, sent.map((s) => s.message_id), sent.map((s) => s.variant ?? ''));
    for (const o of outcomes) {
      for (const target of [total, byVariant.get(o.group)].filter((x): x is Counters => Boolean(x))) {
        target.delivered += o.delivered;
        target.read += o.read;
        target.failed += o.failed;
        target.replied += o.replied;
        target.segments += o.segments;
        if (o.failed) target.failed_by_reason.delivery_failed = (target.failed_by_reason.delivery_failed ?? 0) + o.failed;
      }
    }
    const cost = await this.#cost(tenant, sent.map((s) => s.message_id), sent.map((s) => s.variant ?? ''));
    for (const [group, amount] of cost.byGroup) {
      total.cost += amount;
      const v = byVariant.get(group);
      if (v) v.cost += amount;
    }
    return { ...total, currency: cost.currency, variants: [...byVariant].map(([name, counters]) => ({ name, ...counters })) };
  }

  async forOrganization(tenant: TenantRef): Promise<OrganizationStats> {
    const em = tenantEm(this.#orm, tenant);
    const byStatus = await sql<{ status: CampaignStatus; n: number }>(em,
      `select status, count(*)::int as n from campaigns where organization_id = ? and mode = ? group by status`, [tenant.organizationId, tenant.mode]);
    const campaigns_by_status = Object.fromEntries(CAMPAIGN_STATUSES.map((s) => [s, 0])) as Record<CampaignStatus, number>;
    for (const r of byStatus) campaigns_by_status[r.status] = r.n;
    const rows = await sql<Row & { paused: boolean }>(em,
      `select null as variant, r.status, r.reason, r.wait_reason, (c.status = 'paused') as paused, count(*)::int as n
         from campaign_recipients r join campaigns c on c.id = r.campaign_id
        where r.organization_id = ? and r.mode = ? group by 2, 3, 4, 5`, [tenant.organizationId, tenant.mode]);
    const total = empty();
    for (const r of rows) add(total, r, r.paused);
    const sent = await sql<{ message_id: string }>(em,
      `select message_id from campaign_recipients where organization_id = ? and mode = ? and message_id is not null`, [tenant.organizationId, tenant.mode]);
    for (const o of await this.#outcomes.countByGroup(tenant, sent.map((s) => s.message_id), sent.map(() => ''))) {
      total.delivered += o.delivered;
      total.read += o.read;
      total.failed += o.failed;
      total.replied += o.replied;
      total.segments += o.segments;
      if (o.failed) total.failed_by_reason.delivery_failed = (total.failed_by_reason.delivery_failed ?? 0) + o.failed;
    }
    const cost = await this.#cost(tenant, sent.map((s) => s.message_id), sent.map(() => ''));
    total.cost = cost.byGroup.get('') ?? 0;
    return { campaigns: byStatus.reduce((n, r) => n + r.n, 0), campaigns_by_status, ...total, currency: cost.currency };
  }
}
