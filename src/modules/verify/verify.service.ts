/**
 * Verify context: one-time codes sent through the messaging service (so senders, sandbox magic
 * recipients, usage and any rule messaging applies to a send hold for codes too) and checked
 * against their HMAC; the organization's verify settings; abuse limits on sends. A send commits the
 * verification, the voiding of the recipient's previous code and the message in one transaction; a
 * check's state change commits with its `verification.*` event. Codes never reach a log, a list,
 * an event or an API response: the only clear copies are the provider's (in test mode, the
 * sandbox's record, which the separate sandbox route reads back).
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Config } from '../../config.ts';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { ALL_TENANTS, tenantEm } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page } from '../../platform/pagination.ts';
import { recordUsage } from '../../platform/usage/usage.ts';
import { recordAudit } from '../../platform/audit/audit.ts';
import { emitEvent, type EventType } from '../../platform/events/events.ts';
import type { MessageSenderPort, SendOptions } from '../messaging/messaging.ports.ts';
import { isEmail, normalizePhone } from '../../platform/recipients.ts';
import { CODE_LENGTH, CodeHasher, codeMessage, DEFAULT_LOCALE, findCode, generateCode, type Locale } from './verify.codes.ts';
import { Verification, VerifySettings } from './verify.entities.ts';
import { MAX_ATTEMPTS, type CheckVerificationInput, type ListVerificationsInput, type SendVerificationInput, type UpdateVerifySettingsInput } from './verify.schemas.ts';
import { decideCheck, effectiveStatus, retryAfterSeconds, type ExpiryReason, type VerifyChannel } from './verify.states.ts';

/** A WhatsApp template the organization creates (and gets approved) to send codes outside a 24-hour session. */
export const VERIFY_WHATSAPP_TEMPLATE = 'verify_code';
export const EXPIRE_SWEEP_JOB = 'verify.expire-sweep';

export type VerifyMessagingPort = MessageSenderPort;
/** The sandbox provider's record of what it sent, by our message id (test mode only). */
export type SandboxSendsPort = { recorded(messageId: string): Promise<{ payload: unknown } | undefined> };

export type EffectiveVerifySettings = {
  mode: 'live' | 'test';
  codeTtlSeconds: number;
  codeLength: number;
  maxAttempts: number;
  appName: string | null;
  /** Null while the organization has never changed them (all defaults). */
  updatedAt: Date | null;
};

export type SandboxCode = { verification: Verification; code: string };

export class VerifyService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #config: Config;
  readonly #cursors: CursorCodec;
  readonly #messaging: VerifyMessagingPort;
  readonly #sandboxSends: SandboxSendsPort;
  readonly #hasher: CodeHasher;

  constructor(deps: { orm: MikroORM; clock: Clock; config: Config; cursors: CursorCodec; messaging: VerifyMessagingPort; sandboxSends: SandboxSendsPort }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#config = deps.config;
    this.#cursors = deps.cursors;
    this.#messaging = deps.messaging;
    this.#sandboxSends = deps.sandboxSends;
    this.#hasher = new CodeHasher(deps.config.appSecret);
  }

  // ---- send ----

  async send(scope: Scope, input: SendVerificationInput): Promise<Verification> {
    const to = recipientFor(input.channel, input.to);
    const settings = await this.getSettings(scope);
    const codeLength = input.code_length ?? settings.codeLength;
    const maxAttempts = input.max_attempts ?? settings.maxAttempts;
    const locale = input.locale ?? DEFAULT_LOCALE;
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      // One send at a time per organization and mode, across instances: the abuse counts and the
      // voiding of the recipient's previous code see every committed send.
      await tx.getConnection().execute('select pg_advisory_xact_lock(hashtextextended(?, 0))', [`verify:send:${scope.organizationId}:${scope.mode}`], 'all', tx.getTransactionContext());
      const now = this.#clock.now();
      await this.#enforceLimits(tx, scope, to, now);
      const id = newId('ver', now.getTime());
      const code = generateCode(codeLength);
      const verification = tx.create(Verification, {
        id, organizationId: scope.organizationId, mode: scope.mode, channel: input.channel, to, status: 'pending',
        codeHash: this.#hasher.hash(id, code), codeLength, locale, maxAttempts, attempts: 0,
        expiresAt: new Date(now.getTime() + settings.codeTtlSeconds * 1000), messageId: null, expiryReason: null, supersededBy: null,
        sequence: 1, createdAt: now, updatedAt: now, approvedAt: null, expiredAt: null, maxedAt: null,
      });
      await this.#supersede(tx, to, id, now);
      await tx.flush();
      const message = await this.#deliver(scope, verification, code, settings.appName, { conceal: [code], within: tx });
      verification.messageId = message.id;
      await recordUsage(tx, scope, { context: 'verify', kind: 'verify.verification', quantity: 1, resourceId: id, idempotencyKey: `${id}:sent` }, now);
      return verification;
    });
  }

  /** Sliding windows over committed sends (this table), on the injected clock. */
  async #enforceLimits(tx: EntityManager, scope: Scope, to: string, now: Date): Promise<void> {
    const limits = this.#config.verify;
    const perRecipient = await this.#createdSince(tx, scope, now, limits.recipientWindowSeconds, { to });
    if (perRecipient.length >= limits.recipientSends) {
      throw rateLimited('recipient', limits.recipientSends, limits.recipientWindowSeconds,
        retryAfterSeconds(perRecipient, limits.recipientSends, limits.recipientWindowSeconds, now), `Limit of ${limits.recipientSends} verification sends to this recipient`);
    }
    const since = new Date(now.getTime() - limits.organizationWindowSeconds * 1000);
    const rows = await tx.getConnection().execute<{ n: number }[]>(
      'select count(*)::int as n from verifications where organization_id = ? and mode = ? and created_at > ?',
      [scope.organizationId, scope.mode, since], 'all', tx.getTransactionContext());
    const count = rows[0]?.n ?? 0;
    if (count >= limits.organizationSends) {
      // The send whose leaving the window makes room again.
      const leaving = await this.#createdSince(tx, scope, now, limits.organizationWindowSeconds, {}, count - limits.organizationSends);
      throw rateLimited('organization', limits.organizationSends, limits.organizationWindowSeconds,
        retryAfterSeconds(leaving, 1, limits.organizationWindowSeconds, now), `Limit of ${limits.organizationSends} verification sends by this organization`);
    }
  }

  async #createdSince(tx: EntityManager, scope: Scope, now: Date, windowSeconds: number, where: { to?: string }, offset?: number): Promise<Date[]> {
    const since = new Date(now.getTime() - windowSeconds * 1000);
    const rows = await tx.getConnection().execute<{ created_at: Date }[]>(
      `select created_at from verifications where organization_id = ? and mode = ? and created_at > ?${where.to ? ' and "to" = ?' : ''}
       order by created_at asc${offset !== undefined ? ' offset ? limit 1' : ''}`,
      [scope.organizationId, scope.mode, since, ...(where.to ? [where.to] : []), ...(offset !== undefined ? [offset] : [])], 'all', tx.getTransactionContext());
    return rows.map((r) => new Date(r.created_at));
  }

  /** A new send voids the recipient's code that can still be checked: it expires (reason `superseded`). */
  async #supersede(tx: EntityManager, to: string, replacement: string, now: Date): Promise<void> {
    const open = await tx.find(Verification, { to, status: { $in: ['pending', 'rejected'] }, id: { $ne: replacement } }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    for (const old of open) {
      const timedOut = now.getTime() >= old.expiresAt.getTime();
      if (!timedOut) old.supersededBy = replacement;
      this.#expire(tx, old, timedOut ? 'timeout' : 'superseded', now);
    }
  }

  async #deliver(scope: Scope, v: Verification, code: string, appName: string | null, options: SendOptions): Promise<{ id: string }> {
    const text = codeMessage(v.locale as Locale, code, appName);
    const metadata = { verification_id: v.id };
    switch (v.channel) {
      case 'sms':
        return this.#messaging.sendSms(scope, { to: v.to, body: text.text, metadata }, options);
      case 'email':
        return this.#messaging.sendEmail(scope, { to: [v.to], subject: text.subject, text: text.text, html: text.html, metadata }, options);
      case 'whatsapp':
        return this.#sendWhatsApp(scope, v, code, text.text, options);
    }
  }

  /**
   * WhatsApp allows business-initiated messages only from approved templates: the organization's
   * approved `verify_code` template (its one body parameter is the code) is used when it exists,
   * in the verification's locale when there is one; otherwise the built-in text goes out free-form,
   * which WhatsApp allows within 24 hours of the recipient's last message. Neither → 422
   * TEMPLATE_NOT_APPROVED.
   */
  async #sendWhatsApp(scope: Scope, v: Verification, code: string, text: string, options: SendOptions): Promise<{ id: string }> {
    const metadata = { verification_id: v.id };
    try {
      return await this.#messaging.sendWhatsApp(scope, {
        to: v.to, kind: 'template', metadata,
        template: { name: VERIFY_WHATSAPP_TEMPLATE, language: v.locale, components: [{ type: 'body', parameters: [{ type: 'text', text: code }] }] },
      }, options);
    } catch (e) {
      const noTemplate = e instanceof ServiceError && ((e.code === 'NOT_FOUND' && e.details.field === 'template.name') || e.code === 'TEMPLATE_NOT_APPROVED');
      if (!noTemplate) throw e;
    }
    try {
      return await this.#messaging.sendWhatsApp(scope, { to: v.to, kind: 'text', text: { body: text }, metadata }, options);
    } catch (e) {
      if (e instanceof ServiceError && e.code === 'TEMPLATE_NOT_APPROVED') {
        throw new ServiceError('TEMPLATE_NOT_APPROVED',
          `WhatsApp codes need an approved WhatsApp template named ${VERIFY_WHATSAPP_TEMPLATE} (one body parameter {{1}} for the code), or a recipient who wrote within the last 24 hours`,
          { field: 'channel', template: VERIFY_WHATSAPP_TEMPLATE, session_open: false });
      }
      throw e;
    }
  }

  // ---- check ----

  /**
   * Checks a code under a row lock, so concurrent checks apply one after the other: of two
   * simultaneous correct checks one approves and the other finds it approved (409 CONFLICT).
   */
  async check(scope: Scope, input: CheckVerificationInput): Promise<Verification> {
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const v = await tx.findOne(Verification, { id: input.verification_id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!v) throw notFound('Verification', input.verification_id);
      const now = this.#clock.now();
      const hash = v.codeHash;
      const decision = decideCheck(v, now, () => !!hash && this.#hasher.matches(v.id, input.code, hash));
      switch (decision.kind) {
        case 'already_approved':
          throw new ServiceError('CONFLICT', 'This verification is already approved; a code approves once', { verification_id: v.id, status: v.status });
        case 'final':
          return v;
        case 'expire':
          this.#expire(tx, v, 'timeout', now);
          return v;
        case 'approve':
          this.#change(v, 'approved', now, decision.attempts);
          v.approvedAt = now;
          this.#emit(tx, v, 'verification.approved', now);
          return v;
        case 'reject':
          this.#change(v, 'rejected', now, decision.attempts);
          return v;
        case 'max':
          this.#change(v, 'maxed', now, decision.attempts);
          v.maxedAt = now;
          this.#emit(tx, v, 'verification.maxed', now);
          return v;
      }
    });
  }

  #change(v: Verification, status: Verification['status'], now: Date, attempts = v.attempts): void {
    v.status = status;
    v.attempts = attempts;
    // A final verification keeps no trace of its code, not even the hash.
    if (status !== 'pending' && status !== 'rejected') v.codeHash = null;
    v.sequence += 1;
    v.updatedAt = now;
  }

  #expire(tx: EntityManager, v: Verification, reason: ExpiryReason, now: Date): void {
    this.#change(v, 'expired', now);
    v.expiredAt = now;
    v.expiryReason = reason;
    this.#emit(tx, v, 'verification.expired', now);
  }

  #emit(tx: EntityManager, v: Verification, type: EventType, now: Date): void {
    emitEvent(tx, { organizationId: v.organizationId, mode: v.mode }, {
      type, resourceType: 'verification', resourceId: v.id, sequence: v.sequence,
      data: {
        verification_id: v.id, channel: v.channel, to: v.to, status: v.status, attempts: v.attempts, max_attempts: v.maxAttempts,
        ...(v.expiryReason ? { expiry_reason: v.expiryReason } : {}),
        ...(v.supersededBy ? { superseded_by: v.supersededBy } : {}),
      },
    }, now);
  }

  /**
   * The sweeper (a scheduled job): records as expired every checkable verification past its expiry,
   * across tenants, with its `verification.expired` event. Rows another transaction holds are left
   * for the next sweep. Returns how many it expired.
   */
  async expireDue(batch = 500): Promise<number> {
    return this.#orm.em.fork({ clear: true }).transactional(async (tx) => {
      const now = this.#clock.now();
      const due = await tx.find(Verification, { status: { $in: ['pending', 'rejected'] }, expiresAt: { $lte: now } },
        { ...ALL_TENANTS, orderBy: { expiresAt: 'asc' }, limit: batch, lockMode: LockMode.PESSIMISTIC_PARTIAL_WRITE });
      for (const v of due) this.#expire(tx, v, 'timeout', now);
      return due.length;
    });
  }

  // ---- reading ----

  async getVerification(scope: Scope, id: string): Promise<Verification> {
    const v = await tenantEm(this.#orm, scope).findOne(Verification, { id });
    if (!v) throw notFound('Verification', id);
    return this.#asOf(v, this.#clock.now());
  }

  async listVerifications(scope: Scope, input: ListVerificationsInput): Promise<Page<Verification>> {
    const to = input.to ? (input.to.includes('@') ? input.to.toLowerCase() : (normalizePhone(input.to) ?? input.to)) : null;
    const filters = { status: input.status ?? null, channel: input.channel ?? null, to };
    const now = this.#clock.now();
    const where: Record<string, unknown> = {};
    if (input.channel) where.channel = input.channel;
    if (to) where.to = to;
    // Statuses as of now: a pending or rejected verification past its expiry lists as expired.
    if (input.status === 'pending' || input.status === 'rejected') Object.assign(where, { status: input.status, expiresAt: { $gt: now } });
    else if (input.status === 'expired') where.$or = [{ status: 'expired' }, { status: { $in: ['pending', 'rejected'] }, expiresAt: { $lte: now } }];
    else if (input.status) where.status = input.status;
    const page = await this.#cursors.findPage(tenantEm(this.#orm, scope), Verification, scope, { list: 'verifications', filters }, input, where);
    return { ...page, items: page.items.map((v) => this.#asOf(v, now)) };
  }

  /**
   * How a read shows a verification at `now`. The row itself moves to expired at its next check
   * or sweep (with the event); this copy of it is never flushed (reads use a fresh EntityManager).
   */
  #asOf(v: Verification, now: Date): Verification {
    if (effectiveStatus(v, now) === 'expired' && v.status !== 'expired') {
      v.status = 'expired';
      v.expiredAt = v.expiresAt;
      v.expiryReason = 'timeout';
    }
    return v;
  }

  /**
   * Test mode only: the code as the sandbox provider delivered it, read back from its record of the
   * message (the service itself keeps only the HMAC). Another tenant's or mode's id → 404; a
   * live-mode verification → 403 FORBIDDEN; a message the sandbox has not sent yet → 409 CONFLICT.
   */
  async sandboxCode(scope: Scope, id: string): Promise<SandboxCode> {
    const v = await this.getVerification(scope, id);
    if (scope.mode !== 'test') throw new ServiceError('FORBIDDEN', 'Codes can be read back only for test-mode verifications, with a test-mode credential', { mode: scope.mode });
    const sent = v.messageId ? await this.#sandboxSends.recorded(v.messageId) : undefined;
    if (!sent) {
      throw new ServiceError('CONFLICT', 'The sandbox has not sent this code yet (its message is still queued, or was undeliverable); retry shortly',
        { verification_id: v.id, message_id: v.messageId }, { headers: { 'Retry-After': '1' } });
    }
    const body = (sent.payload as { body?: unknown } | null)?.body;
    const hash = v.codeHash;
    const code = typeof body === 'string' ? findCode(body, v.codeLength, hash ? (c) => this.#hasher.matches(v.id, c, hash) : undefined) : undefined;
    if (code === undefined) throw new ServiceError('CONFLICT', 'The sandbox record of this message holds no code', { verification_id: v.id, message_id: v.messageId });
    return { verification: v, code };
  }

  // ---- settings ----

  async getSettings(scope: Scope): Promise<EffectiveVerifySettings> {
    const row = await tenantEm(this.#orm, scope).findOne(VerifySettings, { organizationId: scope.organizationId, mode: scope.mode });
    return this.#effective(scope, row);
  }

  async updateSettings(scope: Scope, input: UpdateVerifySettingsInput): Promise<EffectiveVerifySettings> {
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const now = this.#clock.now();
      await tx.getConnection().execute('insert into verify_settings (organization_id, mode, updated_at) values (?, ?, ?) on conflict do nothing',
        [scope.organizationId, scope.mode, now], 'run', tx.getTransactionContext());
      const row = await tx.findOneOrFail(VerifySettings, { organizationId: scope.organizationId, mode: scope.mode }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      const changes: Record<string, unknown> = {};
      if (input.code_ttl_seconds !== undefined) row.codeTtlSeconds = changes.code_ttl_seconds = input.code_ttl_seconds;
      if (input.code_length !== undefined) row.codeLength = changes.code_length = input.code_length;
      if (input.max_attempts !== undefined) row.maxAttempts = changes.max_attempts = input.max_attempts;
      if (input.app_name !== undefined) row.appName = changes.app_name = input.app_name;
      row.updatedAt = now;
      recordAudit(tx, scope, { action: 'verify.settings_updated', resourceType: 'verify_settings', details: { changes } }, now);
      return this.#effective(scope, row);
    });
  }

  #effective(scope: Scope, row: VerifySettings | null): EffectiveVerifySettings {
    return {
      mode: scope.mode,
      codeTtlSeconds: row?.codeTtlSeconds ?? this.#config.verify.codeTtlSeconds,
      codeLength: row?.codeLength ?? CODE_LENGTH.default,
      maxAttempts: row?.maxAttempts ?? MAX_ATTEMPTS.default,
      appName: row?.appName ?? null,
      updatedAt: row?.updatedAt ?? null,
    };
  }
}

/** The recipient in its stored form: E.164 for sms and whatsapp, a lower-cased address for email. */
function recipientFor(channel: VerifyChannel, to: string): string {
  if (channel === 'email') {
    const email = to.trim().toLowerCase();
    if (!isEmail(email)) throw new ServiceError('INVALID_EMAIL', `${to} is not a valid email address`, { field: 'to' });
    return email;
  }
  const phone = normalizePhone(to);
  if (!phone) throw new ServiceError('INVALID_PHONE_NUMBER', `${to} is not a valid phone number in E.164 format, such as +14155552671`, { field: 'to' });
  return phone;
}

function rateLimited(scope: 'recipient' | 'organization', limit: number, windowSeconds: number, retryAfter: number, message: string): ServiceError {
  return new ServiceError('RATE_LIMIT_EXCEEDED', `${message} per ${windowSeconds} s reached; retry in ${retryAfter} s`,
    { retry_after: retryAfter, limit, window: `${windowSeconds}s`, scope },
    { headers: { 'Retry-After': String(retryAfter) } });
}
