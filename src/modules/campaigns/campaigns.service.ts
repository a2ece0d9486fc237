/**
 * Campaigns: CRUD and the state machine (draft → scheduled → sending ⇄ paused → completed, and
 * cancelled from any state but completed). A schedule is a pg-boss job with a stable id per
 * (campaign, scheduled_at) whose handler moves the campaign only if it is still scheduled for that
 * instant: it fires once, whatever the number of instances. Sending itself is campaigns.engine.ts.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page } from '../../platform/pagination.ts';
import { parseInput } from '../../platform/operations.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Ports } from '../manifest.ts';
import { stableJobId } from '../../platform/jobs/jobIds.ts';
import { Campaign, type CampaignStatus } from './campaigns.entities.ts';
import { createCampaignInput, type CreateCampaignInput, type ListCampaignsInput } from './campaigns.schemas.ts';
import { emitCampaignEvent } from './campaigns.events.ts';
import { sql } from './campaigns.recipients.ts';
import type { CampaignEngine } from './campaigns.engine.ts';

export const SCHEDULE_JOB = 'campaigns.fire-schedule';

const EDITABLE: readonly CampaignStatus[] = ['draft', 'scheduled'];

export class CampaignsService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #jobs: Pick<Jobs, 'enqueue'>;
  readonly #engine: CampaignEngine;
  readonly #audience: Ports['campaignAudience'];

  constructor(deps: { orm: MikroORM; clock: Clock; cursors: CursorCodec; jobs: Pick<Jobs, 'enqueue'>; engine: CampaignEngine; audience: Ports['campaignAudience'] }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#jobs = deps.jobs;
    this.#engine = deps.engine;
    this.#audience = deps.audience;
  }

  async create(scope: Scope, input: CreateCampaignInput): Promise<Campaign> {
    const now = this.#clock.now();
    const scheduledAt = this.#futureSchedule(input.scheduled_at, now);
    await this.#audience.assertSource(scope, { segmentId: input.segment_id, listId: input.list_id });
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = tx.create(Campaign, {
        id: newId('cmp', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, ...fieldsOf(input), scheduledAt,
        status: scheduledAt ? 'scheduled' : 'draft', pauseReason: null, winnerVariant: null, generation: 0, audienceCount: null, snapshotAt: null,
        sequence: 1, createdAt: now, updatedAt: now, startedAt: null, pausedAt: null, completedAt: null, cancelledAt: null,
      });
      await tx.flush();
      if (scheduledAt) await this.#schedule(tx, scope, c);
      return c;
    });
  }

  async get(scope: Scope, id: string): Promise<Campaign> {
    const c = await tenantEm(this.#orm, scope).findOne(Campaign, { id });
    if (!c) throw notFound('Campaign', id);
    return c;
  }

  async list(scope: Scope, input: ListCampaignsInput): Promise<Page<Campaign>> {
    const filters = { search: input.search ?? null, status: input.status ?? null, channel: input.channel ?? null };
    const key = { list: 'campaigns', filters };
    const where: Record<string, unknown> = {};
    if (filters.status) where.status = filters.status;
    if (filters.channel) where.channel = filters.channel;
    if (filters.search) where.name = { $ilike: `%${filters.search.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%` };
    return this.#cursors.findPage(tenantEm(this.#orm, scope), Campaign, scope, key, input, where);
  }

  /** PUT: only in draft or scheduled; the merged campaign is validated whole. */
  async update(scope: Scope, id: string, patch: Record<string, unknown>): Promise<Campaign> {
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await this.#locked(tx, id);
      if (!EDITABLE.includes(c.status)) throw conflict(c, 'updated', EDITABLE);
      const merged = parseInput(createCampaignInput, { ...wireOf(c), ...patch });
      const scheduledAt = this.#futureSchedule(merged.scheduled_at, now);
      if (merged.segment_id !== c.segmentId || merged.list_id !== c.listId) await this.#audience.assertSource(scope, { segmentId: merged.segment_id, listId: merged.list_id });
      const rescheduled = (scheduledAt?.getTime() ?? null) !== (c.scheduledAt?.getTime() ?? null);
      Object.assign(c, fieldsOf(merged), { scheduledAt, status: scheduledAt ? 'scheduled' : 'draft', updatedAt: now, sequence: c.sequence + 1 });
      await tx.flush();
      if (rescheduled && scheduledAt) await this.#schedule(tx, scope, c);
      return c;
    });
  }

  async remove(scope: Scope, id: string): Promise<void> {
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await this.#locked(tx, id);
      if (c.status !== 'draft') throw conflict(c, 'deleted', ['draft']);
      tx.remove(c);
    });
  }

  /**
   * Draft or scheduled → sending now. The audience is checked again: a segment saved before HIPAA
   * mode that filters on a PHI metadata key is refused (VALIDATION_ERROR) rather than frozen.
   */
  async send(scope: Scope, id: string): Promise<Campaign> {
    return this.#move(scope, id, ['draft', 'scheduled'], 'sent', async (tx, c, now) => {
      if (c.segmentId) await this.#audience.assertSource(scope, { segmentId: c.segmentId });
      await this.#startSending(tx, scope, c, now);
    });
  }

  async pause(scope: Scope, id: string): Promise<Campaign> {
    return this.#move(scope, id, ['sending'], 'paused', async (tx, c, now) => {
      Object.assign(c, { status: 'paused', pausedAt: now, pauseReason: null });
      emitCampaignEvent(tx, scope, c, 'campaign.paused', now);
    });
  }

  /** Paused → sending: whatever is still pending is dispatched again (nothing sent twice, nothing skipped). */
  async resume(scope: Scope, id: string): Promise<Campaign> {
    return this.#move(scope, id, ['paused'], 'resumed', async (tx, c, now) => {
      await this.#engine.throughputFor(scope, c);
      Object.assign(c, { status: 'sending', pauseReason: null, generation: c.generation + 1 });
      await tx.flush();
      emitCampaignEvent(tx, scope, c, 'campaign.resumed', now);
      await this.#engine.start(tx, scope, c);
      await this.#engine.scheduleRelease(tx, scope, c);
    });
  }

  /** Any state but completed or cancelled → cancelled; recipients not yet sent are marked cancelled. */
  async cancel(scope: Scope, id: string): Promise<Campaign> {
    return this.#move(scope, id, ['draft', 'scheduled', 'sending', 'paused'], 'cancelled', async (tx, c, now) => {
      Object.assign(c, { status: 'cancelled', cancelledAt: now });
      await sql(tx, `update campaign_recipients set status = 'cancelled', processed_at = ? where campaign_id = ? and status = 'pending'`, [now, c.id]);
      emitCampaignEvent(tx, scope, c, 'campaign.cancelled', now);
    });
  }

  /** The schedule job: moves the campaign only if it is still scheduled for this instant. */
  async fireSchedule(scope: Scope, id: string, at: string): Promise<void> {
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Campaign, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c || c.status !== 'scheduled' || c.scheduledAt?.toISOString() !== at) return;
      const now = this.#clock.now();
      c.sequence += 1;
      c.updatedAt = now;
      await this.#startSending(tx, scope, c, now);
    });
  }

  async #startSending(tx: EntityManager, scope: Scope, c: Campaign, now: Date): Promise<void> {
    await this.#engine.throughputFor(scope, c);
    Object.assign(c, { status: 'sending', startedAt: now, generation: c.generation + 1 });
    await tx.flush();
    emitCampaignEvent(tx, scope, c, 'campaign.started', now);
    await this.#engine.start(tx, scope, c);
  }

  async #move(scope: Scope, id: string, from: readonly CampaignStatus[], verb: string, change: (tx: EntityManager, c: Campaign, now: Date) => Promise<void>): Promise<Campaign> {
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await this.#locked(tx, id);
      if (!from.includes(c.status)) throw conflict(c, verb, from);
      c.sequence += 1;
      c.updatedAt = now;
      await change(tx, c, now);
      return c;
    });
  }

  async #locked(tx: EntityManager, id: string): Promise<Campaign> {
    const c = await tx.findOne(Campaign, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!c) throw notFound('Campaign', id);
    return c;
  }

  async #schedule(tx: EntityManager, scope: Scope, c: Campaign): Promise<void> {
    const at = c.scheduledAt!.toISOString();
    await this.#jobs.enqueue(SCHEDULE_JOB, { campaignId: c.id, at }, { scope, em: tx, id: stableJobId(SCHEDULE_JOB, c.id, at), startAfter: c.scheduledAt! });
  }

  #futureSchedule(value: string | null | undefined, now: Date): Date | null {
    if (!value) return null;
    const at = new Date(value);
    if (at.getTime() <= now.getTime()) throw new ServiceError('VALIDATION_ERROR', 'scheduled_at must be in the future', { field: 'scheduled_at' });
    return at;
  }
}

function conflict(c: Campaign, verb: string, allowed: readonly CampaignStatus[]): ServiceError {
  return new ServiceError('CONFLICT', `A ${c.status} campaign cannot be ${verb}; allowed in: ${allowed.join(', ')}`, { status: c.status, allowed_statuses: allowed });
}

function fieldsOf(input: CreateCampaignInput) {
  return {
    name: input.name, channel: input.channel, segmentId: input.segment_id ?? null, listId: input.list_id ?? null,
    templateId: input.template_id ?? null, templateVariables: input.template_variables ?? {}, body: input.body ?? null,
    subject: input.subject ?? null, from: input.from ?? null, abTest: input.ab_test ?? null, quietHours: input.quiet_hours ?? null,
    frequencyCap: input.frequency_cap ?? null,
  };
}

/** The stored campaign as create input (PUT merges onto it). */
function wireOf(c: Campaign): Record<string, unknown> {
  return {
    name: c.name, channel: c.channel, segment_id: c.segmentId, list_id: c.listId, template_id: c.templateId,
    template_variables: c.templateVariables, body: c.body, subject: c.subject, from: c.from,
    scheduled_at: c.scheduledAt?.toISOString() ?? null, ab_test: c.abTest, quiet_hours: c.quietHours, frequency_cap: c.frequencyCap,
  };
}
