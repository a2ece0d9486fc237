/**
 * Message templates: CRUD, name unique per channel, and the approval lifecycle
 * draft → pending_approval → approved | rejected, decided by the provider's reviewer (the sandbox
 * approves after a configurable delay). Changing the content of a submitted template resubmits it.
 * A submission is a durable job enqueued in the transaction that makes the template pending, so a
 * crash after the commit cannot leave it pending forever without ever reaching the reviewer.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { ALL_TENANTS, tenantEm } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page, PageRequest } from '../../platform/pagination.ts';
import { emitEvent } from '../../platform/events/events.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Channel, TemplateDecision, TemplateReviewer } from '../../providers/messaging/types.ts';
import { MessageTemplate, type TemplateVariable } from './messaging.entities.ts';
import type { CreateTemplateInput, UpdateTemplateInput } from './schemas/templates.ts';

export const TEMPLATE_SUBMIT_JOB = 'messaging.template-submit';

function isUniqueViolation(e: unknown): boolean {
  return (e as { code?: string }).code === '23505' || /unique|duplicate/i.test(String((e as Error)?.message));
}

export class TemplatesService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #reviewer: TemplateReviewer;
  readonly #jobs: Pick<Jobs, 'enqueue'>;

  constructor(deps: { orm: MikroORM; clock: Clock; cursors: CursorCodec; reviewer: TemplateReviewer; jobs: Pick<Jobs, 'enqueue'> }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#reviewer = deps.reviewer;
    this.#jobs = deps.jobs;
  }

  async create(scope: Scope, input: CreateTemplateInput): Promise<MessageTemplate> {
    const now = this.#clock.now();
    const em = tenantEm(this.#orm, scope);
    let template: MessageTemplate;
    try {
      template = await em.transactional(async (tx) => {
        const t = tx.create(MessageTemplate, {
          id: newId('tpl', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, channel: input.channel,
          name: input.name, content: input.content, category: input.category ?? null, language: input.language ?? 'en',
          variables: (input.variables ?? []) as TemplateVariable[], status: input.status ?? 'pending_approval',
          rejectionReason: null, createdAt: now, updatedAt: now,
        });
        await tx.flush();
        if (t.status === 'pending_approval') await this.#enqueueSubmission(tx, scope, t.id);
        return t;
      });
    } catch (e) {
      if (isUniqueViolation(e)) throw new ServiceError('ALREADY_EXISTS', `A ${input.channel} template named ${input.name} already exists`, { field: 'name' });
      throw e;
    }
    return template;
  }

  async list(scope: Scope, input: PageRequest & { channel?: Channel | null; status?: string | null }): Promise<Page<MessageTemplate>> {
    const key = { list: 'templates', filters: { channel: input.channel ?? null, status: input.status ?? null } };
    return this.#cursors.findPage(tenantEm(this.#orm, scope), MessageTemplate, scope, key, input, {
      ...(input.channel ? { channel: input.channel } : {}),
      ...(input.status ? { status: input.status as MessageTemplate['status'] } : {}),
    });
  }

  async get(scope: Scope, id: string): Promise<MessageTemplate> {
    const t = await tenantEm(this.#orm, scope).findOne(MessageTemplate, { id });
    if (!t) throw notFound('Template', id);
    return t;
  }

  async update(scope: Scope, id: string, input: UpdateTemplateInput): Promise<MessageTemplate> {
    const em = tenantEm(this.#orm, scope);
    let updated: MessageTemplate;
    try {
      updated = await em.transactional(async (tx) => {
        // Locked: a review decision applied between this read and the write would otherwise be lost.
        const t = await tx.findOne(MessageTemplate, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        if (!t) throw notFound('Template', id);
        const contentChanged = (input.content !== undefined && input.content !== t.content) || (input.language !== undefined && input.language !== t.language);
        if (input.name !== undefined) t.name = input.name;
        if (input.content !== undefined) t.content = input.content;
        if (input.category !== undefined) t.category = input.category ?? null;
        if (input.language !== undefined) t.language = input.language;
        if (input.variables !== undefined) t.variables = input.variables as TemplateVariable[];
        if (input.status !== undefined) t.status = input.status;
        else if (contentChanged && t.status !== 'draft') t.status = 'pending_approval';
        if (t.status === 'pending_approval') {
          t.rejectionReason = null;
          if (contentChanged || input.status === 'pending_approval') {
            await tx.flush();
            await this.#enqueueSubmission(tx, scope, t.id);
          }
        }
        t.updatedAt = this.#clock.now();
        return t;
      });
    } catch (e) {
      if (isUniqueViolation(e)) throw new ServiceError('ALREADY_EXISTS', `A template with this name already exists on this channel`, { field: 'name' });
      throw e;
    }
    return updated;
  }

  async remove(scope: Scope, id: string): Promise<void> {
    const removed = await tenantEm(this.#orm, scope).nativeDelete(MessageTemplate, { id });
    if (removed === 0) throw notFound('Template', id);
  }

  /**
   * The reviewer's decision (a job). Applies only to a template still pending whose content and
   * language are still those the decision is about (`submitted`); the row is locked, so two
   * decisions running at once cannot both apply.
   */
  async applyDecision(decision: TemplateDecision): Promise<boolean> {
    const found = await this.#orm.em.fork().findOne(MessageTemplate, { id: decision.templateId }, ALL_TENANTS);
    if (!found) return false;
    const em = tenantEm(this.#orm, { organizationId: found.organizationId, mode: found.mode });
    return em.transactional(async (tx) => {
      const t = await tx.findOne(MessageTemplate, { id: decision.templateId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!t || t.status !== 'pending_approval') return false;
      const s = decision.submitted;
      if (s && (s.content !== t.content || (s.language ?? t.language) !== t.language)) return false;
      const now = this.#clock.now();
      t.status = decision.status;
      t.rejectionReason = decision.status === 'rejected' ? (decision.reason ?? 'Rejected by the provider') : null;
      t.updatedAt = now;
      emitEvent(tx, { organizationId: t.organizationId, mode: t.mode }, {
        type: decision.status === 'approved' ? 'template.approved' : 'template.rejected',
        resourceType: 'template', resourceId: t.id, sequence: Math.floor(now.getTime() / 1000),
        data: { template_id: t.id, channel: t.channel, name: t.name, status: t.status, ...(t.rejectionReason ? { rejection_reason: t.rejectionReason } : {}) },
      }, now);
      return true;
    });
  }

  async #enqueueSubmission(tx: EntityManager, scope: Scope, templateId: string): Promise<void> {
    await this.#jobs.enqueue(TEMPLATE_SUBMIT_JOB, { templateId }, { scope, em: tx });
  }

  /**
   * The submission job: hands the template, as it is now, to the provider's reviewer. A template no
   * longer pending (edited to draft, decided, deleted) is not submitted; a job that runs twice
   * submits twice, and a decision about content that has changed since is ignored (applyDecision).
   */
  async submitForReview(scope: Scope, templateId: string): Promise<boolean> {
    const t = await tenantEm(this.#orm, scope).findOne(MessageTemplate, { id: templateId });
    if (!t || t.status !== 'pending_approval') return false;
    await this.#reviewer.submit({ id: t.id, channel: t.channel, name: t.name, content: t.content, category: t.category ?? null, language: t.language });
    return true;
  }
}
