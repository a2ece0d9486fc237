/**
 * Compliance (10DLC): brands are registered pending and vetted by the registry after its vetting
 * time; 10DLC campaigns are registered pending and reviewed after the review time (approved,
 * rejected with a reason, later possibly suspended). Each step is a durable job enqueued in the
 * transaction of the change, with a stable id; an approved campaign grants its numbers their
 * throughput (`sender_registrations`), which the campaigns context paces by (port `senderThroughput`).
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Transaction } from 'kysely';
import { sqlQuery } from '../../platform/db/sql.ts';
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page, PageRequest } from '../../platform/pagination.ts';
import { emitEvent, type EventType } from '../../platform/events/events.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import { campaignThroughput, type CampaignSubmission, type ComplianceRegistry } from '../../providers/compliance/types.ts';
import { ComplianceBrand, TenDlcCampaign } from './compliance.entities.ts';
import type { CreateBrandInput, CreateTenDlcInput, ListBrandsInput, ListTenDlcInput } from './compliance.schemas.ts';
import { stableJobId } from '../../platform/jobs/jobIds.ts';

export const VET_BRAND_JOB = 'compliance.vet-brand';
export const REVIEW_CAMPAIGN_JOB = 'compliance.review-campaign';
export const SUSPEND_CAMPAIGN_JOB = 'compliance.suspend-campaign';

type OwnedNumbers = { numbersByIds(tenant: TenantRef, ids: readonly string[]): Promise<{ id: string; number: string }[]> };

export class ComplianceService {
  readonly #orm: MikroORM;
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #jobs: Pick<Jobs, 'enqueue'>;
  readonly #registry: ComplianceRegistry;
  readonly #numbers: OwnedNumbers;

  constructor(deps: { orm: MikroORM; pool: Pool; clock: Clock; cursors: CursorCodec; jobs: Pick<Jobs, 'enqueue'>; registry: ComplianceRegistry; numbers: OwnedNumbers }) {
    this.#orm = deps.orm;
    this.#pool = deps.pool;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#jobs = deps.jobs;
    this.#registry = deps.registry;
    this.#numbers = deps.numbers;
  }

  // ---- brands ----

  async createBrand(scope: Scope, input: CreateBrandInput): Promise<ComplianceBrand> {
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const brand = tx.create(ComplianceBrand, {
        id: newId('brand', now.getTime()), organizationId: scope.organizationId, mode: scope.mode,
        companyName: input.company_name, ein: input.ein, country: input.country, entityType: input.entity_type, vertical: input.vertical,
        stockSymbol: input.stock_symbol ?? null, website: input.website ?? null, contactEmail: input.contact_email, contactPhone: input.contact_phone,
        status: 'pending', tcrBrandId: null, vettingScore: null, failureReason: null, sequence: 1, createdAt: now, updatedAt: now, vettedAt: null,
      });
      await tx.flush();
      await this.#jobs.enqueue(VET_BRAND_JOB, { brandId: brand.id }, {
        scope, em: tx, id: stableJobId(VET_BRAND_JOB, brand.id), startAfter: new Date(now.getTime() + this.#registry.vettingDelayMs),
      });
      return brand;
    });
  }

  async getBrand(scope: Scope, id: string): Promise<ComplianceBrand> {
    const brand = await tenantEm(this.#orm, scope).findOne(ComplianceBrand, { id });
    if (!brand) throw notFound('Brand', id);
    return brand;
  }

  async listBrands(scope: Scope, input: ListBrandsInput): Promise<Page<ComplianceBrand>> {
    return this.#page(scope, ComplianceBrand, 'compliance_brands', input, input.status ? { status: input.status } : {});
  }

  /** The vetting job: asks the registry for the outcome once; a brand no longer pending is left alone. */
  async vetBrand(tenant: TenantRef, brandId: string): Promise<void> {
    const now = this.#clock.now();
    await tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const brand = await tx.findOne(ComplianceBrand, { id: brandId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!brand || brand.status !== 'pending') return;
      const outcome = this.#registry.vetBrand(brand.id, {
        companyName: brand.companyName, ein: brand.ein, country: brand.country, entityType: brand.entityType, vertical: brand.vertical,
        stockSymbol: brand.stockSymbol ?? null, website: brand.website ?? null, contactEmail: brand.contactEmail,
      });
      brand.tcrBrandId = outcome.tcrBrandId;
      brand.status = outcome.status;
      brand.vettedAt = now;
      brand.updatedAt = now;
      brand.sequence += 1;
      if (outcome.status === 'vetted') brand.vettingScore = outcome.score;
      else brand.failureReason = outcome.reason;
      this.#emit(tx, tenant, outcome.status === 'vetted' ? 'compliance.brand.vetted' : 'compliance.brand.failed', 'compliance_brand', brand.id, brand.sequence, {
        brand_id: brand.id, status: brand.status, tcr_brand_id: brand.tcrBrandId, vetting_score: brand.vettingScore ?? null, failure_reason: brand.failureReason ?? null,
      }, now);
    });
  }

  // ---- 10DLC campaigns ----

  async createCampaign(scope: Scope, input: CreateTenDlcInput): Promise<TenDlcCampaign> {
    const now = this.#clock.now();
    const owned = await this.#numbers.numbersByIds(scope, input.number_ids);
    const missing = input.number_ids.filter((id) => !owned.some((n) => n.id === id));
    if (missing.length > 0) throw new ServiceError('NOT_FOUND', `Number ${missing[0]} is not an active number of this account`, { field: 'number_ids', id: missing[0] });
    const numbers = input.number_ids.map((id) => owned.find((n) => n.id === id)!.number);
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const brand = await tx.findOne(ComplianceBrand, { id: input.brand_id });
      if (!brand) throw new ServiceError('NOT_FOUND', 'Brand not found', { field: 'brand_id', id: input.brand_id });
      if (brand.status === 'failed') throw new ServiceError('CONFLICT', 'The brand failed vetting; register a corrected brand first', { field: 'brand_id', status: brand.status });
      const campaign = tx.create(TenDlcCampaign, {
        id: newId('dlc', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, brandId: brand.id,
        useCase: input.use_case, description: input.description, sampleMessages: input.sample_messages, messageFlow: input.message_flow,
        optInType: input.opt_in_type, optInKeywords: input.opt_in_keywords, optOutKeywords: input.opt_out_keywords, helpKeywords: input.help_keywords,
        numberIds: input.number_ids, numbers, status: 'pending', rejectionReason: null, suspensionReason: null, tcrCampaignId: null,
        throughputMps: null, sequence: 1, createdAt: now, updatedAt: now, reviewedAt: null, suspendedAt: null,
      });
      await tx.flush();
      await this.#jobs.enqueue(REVIEW_CAMPAIGN_JOB, { campaignId: campaign.id }, {
        scope, em: tx, id: stableJobId(REVIEW_CAMPAIGN_JOB, campaign.id), startAfter: new Date(now.getTime() + this.#registry.reviewDelayMs),
      });
      return campaign;
    });
  }

  async getCampaign(scope: Scope, id: string): Promise<TenDlcCampaign> {
    const campaign = await tenantEm(this.#orm, scope).findOne(TenDlcCampaign, { id });
    if (!campaign) throw notFound('10DLC campaign', id);
    return campaign;
  }

  async listCampaigns(scope: Scope, input: ListTenDlcInput): Promise<Page<TenDlcCampaign>> {
    const where: Record<string, unknown> = {};
    if (input.status) where.status = input.status;
    if (input.brand_id) where.brandId = input.brand_id;
    return this.#page(scope, TenDlcCampaign, 'compliance_campaigns', input, where);
  }

  /**
   * The review job. The registry reviews only vetted brands: while the brand is pending the job
   * throws (pg-boss retries it); a failed brand rejects the campaign.
   */
  async reviewCampaign(scope: Scope, campaignId: string): Promise<void> {
    const now = this.#clock.now();
    const tenant: TenantRef = scope;
    await tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const campaign = await tx.findOne(TenDlcCampaign, { id: campaignId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!campaign || campaign.status !== 'pending') return;
      const brand = await tx.findOneOrFail(ComplianceBrand, { id: campaign.brandId });
      if (brand.status === 'pending') throw Object.assign(new Error('brand not vetted yet'), { expected: true });
      const review = brand.status === 'failed'
        ? { status: 'rejected' as const, tcrCampaignId: null, reason: `Brand ${brand.id} failed vetting` }
        : this.#registry.reviewCampaign(campaign.id, submission(campaign));
      campaign.tcrCampaignId = review.tcrCampaignId;
      campaign.status = review.status;
      campaign.reviewedAt = now;
      campaign.updatedAt = now;
      campaign.sequence += 1;
      if (review.status === 'rejected') campaign.rejectionReason = review.reason;
      else {
        campaign.throughputMps = campaignThroughput(campaign.useCase, brand.vettingScore ?? 0);
        await this.#register(tx, tenant, campaign, now);
        const suspension = this.#registry.suspension(submission(campaign));
        if (suspension) {
          await this.#jobs.enqueue(SUSPEND_CAMPAIGN_JOB, { campaignId: campaign.id, reason: suspension.reason }, {
            scope, em: tx, id: stableJobId(SUSPEND_CAMPAIGN_JOB, campaign.id), startAfter: new Date(now.getTime() + suspension.afterMs),
          });
        }
      }
      this.#emit(tx, tenant, review.status === 'approved' ? 'compliance.campaign.approved' : 'compliance.campaign.rejected', 'compliance_campaign', campaign.id, campaign.sequence,
        presentEvent(campaign), now);
    });
  }

  /** A suspended campaign's numbers lose their throughput (campaign sends from them are refused in live mode). */
  async suspendCampaign(tenant: TenantRef, campaignId: string, reason: string): Promise<void> {
    const now = this.#clock.now();
    await tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const campaign = await tx.findOne(TenDlcCampaign, { id: campaignId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!campaign || campaign.status !== 'approved') return;
      campaign.status = 'suspended';
      campaign.suspensionReason = reason;
      campaign.suspendedAt = now;
      campaign.updatedAt = now;
      campaign.sequence += 1;
      await tx.getConnection().execute('delete from sender_registrations where organization_id = ? and mode = ? and compliance_campaign_id = ?',
        [tenant.organizationId, tenant.mode, campaign.id], 'run', tx.getTransactionContext());
      this.#emit(tx, tenant, 'compliance.campaign.suspended', 'compliance_campaign', campaign.id, campaign.sequence, presentEvent(campaign), now);
    });
  }

  /** Port `senderThroughput`: msg/s granted to this sender by an approved 10DLC campaign, or null. */
  async throughputOf(tenant: TenantRef, address: string): Promise<number | null> {
    const { rows } = await this.#pool.query<{ throughput_mps: number }>(
      'select throughput_mps from sender_registrations where organization_id = $1 and mode = $2 and address = $3',
      [tenant.organizationId, tenant.mode, address],
    );
    return rows[0]?.throughput_mps ?? null;
  }

  async #register(tx: EntityManager, tenant: TenantRef, campaign: TenDlcCampaign, now: Date): Promise<void> {
    await sqlQuery(tx.getTransactionContext<Transaction<unknown>>()!,
      `insert into sender_registrations (organization_id, mode, address, compliance_campaign_id, throughput_mps, updated_at)
       select $1, $2, unnest($3::text[]), $4, $5, $6
       on conflict (organization_id, mode, address) do update set compliance_campaign_id = excluded.compliance_campaign_id,
         throughput_mps = excluded.throughput_mps, updated_at = excluded.updated_at`,
      [tenant.organizationId, tenant.mode, campaign.numbers, campaign.id, campaign.throughputMps, now],
    );
  }

  #emit(tx: EntityManager, tenant: TenantRef, type: EventType, resourceType: string, resourceId: string, sequence: number, data: Record<string, unknown>, now: Date): void {
    emitEvent(tx, tenant, { type, resourceType, resourceId, sequence, data }, now);
  }

  #page<T extends { id: string }>(scope: Scope, entity: typeof ComplianceBrand | typeof TenDlcCampaign, list: string, input: PageRequest, where: Record<string, unknown>): Promise<Page<T>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), entity as never, scope, { list, filters: where }, input, where as never) as Promise<Page<T>>;
  }
}

function submission(c: TenDlcCampaign): CampaignSubmission {
  return { useCase: c.useCase, description: c.description, sampleMessages: c.sampleMessages, messageFlow: c.messageFlow, optOutKeywords: c.optOutKeywords, helpKeywords: c.helpKeywords };
}

function presentEvent(c: TenDlcCampaign): Record<string, unknown> {
  return {
    campaign_id: c.id, brand_id: c.brandId, status: c.status, use_case: c.useCase, tcr_campaign_id: c.tcrCampaignId ?? null,
    rejection_reason: c.rejectionReason ?? null, suspension_reason: c.suspensionReason ?? null, throughput_mps: c.throughputMps ?? null, numbers: c.numbers,
  };
}
