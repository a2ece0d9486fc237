/**
 * Marketplace: the catalog (templates shipped with the service plus approved listings of any
 * organization), installing one as a draft agent, and submitting an own agent as a listing (pending
 * review; in test mode a review job approves or rejects it after SANDBOX_MARKETPLACE_REVIEW_MS).
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { ALL_TENANTS, tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import { emitEvent } from '../../platform/events/events.ts';
import { Agent, MarketplaceListing } from './agents.entities.ts';
import { createAgentInput, type InstallTemplateInput, type PublishableField, type SubmitListingInput } from './agents.schemas.ts';
import type { AgentsService, CreatedAgent } from './agents.service.ts';
import { checkOutput } from './guardrails.ts';
import { fillPlaceholders, TEMPLATES, type AgentTemplate } from './marketplace.templates.ts';
import { parseInput } from '../../platform/operations.ts';

export const LISTING_REVIEW_JOB = 'agents.listing-review';

/** A catalog entry: a shipped template or an approved listing. */
export type CatalogEntry = AgentTemplate & { source: 'builtin' | 'community'; pricing: Record<string, unknown> };

export class MarketplaceService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #jobs: Jobs;
  readonly #agents: AgentsService;
  readonly #reviewMs: number;

  constructor(deps: { orm: MikroORM; clock: Clock; jobs: Jobs; agents: AgentsService; reviewMs: number }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#jobs = deps.jobs;
    this.#agents = deps.agents;
    this.#reviewMs = deps.reviewMs;
  }

  async catalog(scope: TenantRef): Promise<CatalogEntry[]> {
    const approved = await this.#orm.em.fork().find(MarketplaceListing, { mode: scope.mode, status: 'approved' }, { ...ALL_TENANTS, orderBy: { id: 'desc' }, limit: 200 });
    return [
      ...TEMPLATES.map((t) => ({ ...t, source: 'builtin' as const, pricing: { model: 'free' } })),
      ...approved.map((l) => listingEntry(l)),
    ];
  }

  async install(scope: Scope, input: InstallTemplateInput): Promise<CreatedAgent> {
    const template = await this.#find(scope, input.template_id);
    const custom = { ...input.customizations };
    const values: Record<string, string> = { ...template.variables };
    const variables = (custom.variables && typeof custom.variables === 'object' ? custom.variables : {}) as Record<string, unknown>;
    for (const [k, v] of Object.entries({ ...custom, ...variables })) if (typeof v === 'string') values[k] = v;
    const raw = {
      name: input.name ?? template.name,
      type: custom.type ?? template.type,
      model: custom.model ?? template.model,
      system_prompt: fillPlaceholders(typeof custom.system_prompt === 'string' ? custom.system_prompt : template.system_prompt, values),
      description: template.description,
      instructions: custom.instructions,
      tools: custom.tools ?? template.tools,
      channels: input.channels ?? template.channels,
      guardrails: custom.guardrails ?? template.guardrails,
      temperature: custom.temperature,
      max_tokens: custom.max_tokens,
    };
    return this.#agents.create(scope, parseInput(createAgentInput, raw), { templateId: template.id });
  }

  /**
   * A listing of one of the caller's agents, pending review. What becomes public is a copy taken
   * now, of the parts the publisher confirmed (`published_fields`): the review approves that copy,
   * and later edits of the agent never reach the catalog or installs.
   */
  async submit(scope: Scope, input: SubmitListingInput): Promise<MarketplaceListing> {
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const agent = await tx.findOne(Agent, { id: input.agent_id });
      if (!agent) throw notFound('Agent', input.agent_id);
      const now = this.#clock.now();
      const listing = tx.create(MarketplaceListing, {
        id: newId('mkt', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, agentId: agent.id,
        title: input.listing.title, description: input.listing.description, category: input.listing.category, pricing: input.listing.pricing ?? {},
        status: 'pending_review', reviewNote: null, createdAt: now, reviewedAt: null,
        snapshot: publishedCopy(agent, input.published_fields),
      });
      emitEvent(tx, scope, { type: 'marketplace.listing_submitted', resourceType: 'marketplace_listing', resourceId: listing.id, sequence: 1, data: { listing_id: listing.id, agent_id: agent.id, status: listing.status } }, now);
      if (scope.mode === 'test') {
        await this.#jobs.enqueue(LISTING_REVIEW_JOB, { listingId: listing.id }, { scope, em: tx, startAfter: new Date(now.getTime() + this.#reviewMs) });
      }
      return listing;
    });
  }

  /** The sandbox review: a listing whose prompt passes the content filter and has a description is approved. */
  async review(scope: TenantRef, listingId: string): Promise<void> {
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const l = await tx.findOne(MarketplaceListing, { id: listingId });
      if (!l || l.status !== 'pending_review') return;
      const prompt = String(l.snapshot.system_prompt ?? '');
      const blocked = checkOutput({ content_filter: true }, `${l.title} ${l.description} ${prompt}`).blockedBy;
      const now = this.#clock.now();
      Object.assign(l, blocked ? { status: 'rejected', reviewNote: 'content filter: the listing contains blocked language' } : { status: 'approved', reviewNote: null }, { reviewedAt: now });
      emitEvent(tx, scope, { type: 'marketplace.listing_reviewed', resourceType: 'marketplace_listing', resourceId: l.id, sequence: 2, data: { listing_id: l.id, status: l.status } }, now);
    });
  }

  async getListing(scope: TenantRef, id: string): Promise<MarketplaceListing> {
    const l = await tenantEm(this.#orm, scope).findOne(MarketplaceListing, { id });
    if (!l) throw notFound('Marketplace listing', id);
    return l;
  }

  async #find(scope: TenantRef, id: string): Promise<AgentTemplate> {
    const builtin = TEMPLATES.find((t) => t.id === id);
    if (builtin) return builtin;
    const listing = id.startsWith('mkt_') ? await this.#orm.em.fork().findOne(MarketplaceListing, { id, mode: scope.mode }, ALL_TENANTS) : null;
    if (!listing) throw notFound('Agent template', id);
    if (listing.status !== 'approved' && listing.organizationId !== scope.organizationId) throw notFound('Agent template', id);
    if (listing.status !== 'approved') throw new ServiceError('CONFLICT', `The listing is ${listing.status}; it can be installed once approved`, { status: listing.status });
    return listingEntry(listing);
  }
}

/** The public copy of an agent: type, model and channel types, plus the confirmed parts (tools and guardrails empty unless confirmed). */
function publishedCopy(agent: Agent, fields: readonly PublishableField[]): Record<string, unknown> {
  const has = (f: PublishableField) => fields.includes(f);
  return {
    type: agent.type, model: agent.model, channels: agent.channels.map((c) => ({ type: c.type })),
    system_prompt: agent.systemPrompt, tools: has('tools') ? agent.tools : [], guardrails: has('guardrails') ? agent.guardrails : {},
    published_fields: [...new Set(fields)],
  };
}

function listingEntry(l: MarketplaceListing): CatalogEntry {
  const s = l.snapshot as unknown as AgentTemplate;
  return {
    id: l.id, name: l.title, description: l.description, category: l.category, type: s.type, model: s.model, system_prompt: s.system_prompt,
    tools: s.tools ?? [], channels: s.channels ?? [], guardrails: s.guardrails ?? {}, variables: {}, source: 'community', pricing: l.pricing,
  };
}
