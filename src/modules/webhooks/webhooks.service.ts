/**
 * Webhooks context: endpoints (CRUD, signing secrets), fan-out of committed events into one
 * delivery per matching endpoint (and per-resource `webhook_url` callbacks), signed delivery
 * attempts on the retry schedule, the dead-letter queue and replay, and the test endpoint.
 */
import { createHmac } from 'node:crypto';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../../config.ts';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { ALL_TENANTS, tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { validateLimit, type CursorCodec, type Page, type PageRequest } from '../../platform/pagination.ts';
import { Sealer } from '../../platform/crypto/seal.ts';
import { emitEvent, EVENT_TYPES } from '../../platform/events/events.ts';
import type { Event } from '../../platform/events/events.entities.ts';
import { publishNotice } from '../../platform/events/bus.ts';
import { checkWebhookUrl, safePost, SafeHttpError, type UrlPolicy } from '../../platform/http/safeHttp.ts';
import { WebhookAttempt, WebhookDelivery, WebhookEndpoint, type DeliveryStatus } from './webhooks.entities.ts';
import { newSigningSecret, signedHeaders } from './webhooks.signing.ts';
import type { CreateWebhookInput, UpdateWebhookInput } from './webhooks.schemas.ts';

/** Delay before attempt n+1 after n failures (attempt 1 is immediate): 1 min, 5 min, 30 min, 2 h, 8 h, 24 h. */
export const RETRY_SCHEDULE_MS = [60_000, 5 * 60_000, 30 * 60_000, 2 * 3600_000, 8 * 3600_000, 24 * 3600_000];
export const MAX_ATTEMPTS = RETRY_SCHEDULE_MS.length + 1;
export const DELIVERY_TIMEOUT_MS = 15_000;
const LOCK_MS = 60_000;

/** Event data as consumers see it: the resource's callback URL routes the callback but is not shown to every endpoint. */
export function publicEventData(data: Record<string, unknown>): Record<string, unknown> {
  const { webhook_url: _callback, ...rest } = data;
  return rest;
}

export function eventMatches(patterns: readonly string[], type: string): boolean {
  return patterns.some((p) => p === '*' || p === type || (p.endsWith('.*') && type.startsWith(p.slice(0, -1))));
}

export function validateEventPatterns(patterns: readonly string[]): void {
  for (const [i, p] of patterns.entries()) {
    const known = p === '*' || (EVENT_TYPES as readonly string[]).includes(p) || (p.endsWith('.*') && EVENT_TYPES.some((t) => t.startsWith(p.slice(0, -1))));
    if (!known) throw new ServiceError('VALIDATION_ERROR', `Unknown event type ${p}`, { field: `events.${i}`, value: p, expected: [...EVENT_TYPES, 'prefix.*', '*'] });
  }
}

/** Small jitter (±5 %), so retries of many deliveries do not arrive in lockstep. */
function jitter(ms: number): number {
  return Math.round(ms * (0.95 + Math.random() * 0.1));
}

function retryAfterMs(header: string | undefined, now: Date): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds * 1000, 24 * 3600_000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.min(Math.max(0, date - now.getTime()), 24 * 3600_000);
}

export type TestResult = { success: boolean; response_status: number | null; response_time_ms: number | null; delivered_at: Date | null; error: string | null; delivery_id: string };

export class WebhooksService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #config: Config;
  readonly #cursors: CursorCodec;
  readonly #sealer: Sealer;
  readonly #policy: UrlPolicy;

  constructor(deps: { orm: MikroORM; clock: Clock; config: Config; cursors: CursorCodec }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#config = deps.config;
    this.#cursors = deps.cursors;
    this.#sealer = new Sealer(deps.config.appSecret, 'webhook-signing-secret-v1');
    this.#policy = { allowLoopback: deps.config.webhooks.allowLoopback };
  }

  // ---- endpoints ----

  #checkUrl(url: string): string {
    const checked = checkWebhookUrl(url, this.#policy);
    if (!checked.ok) throw new ServiceError('INVALID_WEBHOOK_URL', `Webhook URL not allowed: ${checked.reason}`, { field: 'url', value: url });
    return checked.url.toString();
  }

  async create(scope: Scope, input: CreateWebhookInput): Promise<{ endpoint: WebhookEndpoint; signingSecret: string }> {
    const url = this.#checkUrl(input.url);
    validateEventPatterns(input.events);
    const now = this.#clock.now();
    const signingSecret = newSigningSecret();
    const em = tenantEm(this.#orm, scope);
    const endpoint = await em.transactional(async (tx) => tx.create(WebhookEndpoint, {
      id: newId('wh', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, url,
      description: input.description ?? null, events: [...new Set(input.events)], active: true,
      signingSecretSealed: this.#sealer.seal(signingSecret), disabledReason: null, createdAt: now, updatedAt: now,
    }));
    return { endpoint, signingSecret };
  }

  async list(scope: Scope, page: PageRequest): Promise<Page<WebhookEndpoint>> {
    const limit = validateLimit(page.limit);
    const key = { list: 'webhooks' };
    const after = page.cursor ? this.#cursors.decode(scope, key, page.cursor) : undefined;
    const rows = await tenantEm(this.#orm, scope).find(WebhookEndpoint, after ? { id: { $lt: after } } : {}, { orderBy: { id: 'desc' }, limit: limit + 1 });
    return this.#cursors.page(scope, key, rows, limit);
  }

  async get(scope: Scope, id: string): Promise<WebhookEndpoint> {
    const e = await tenantEm(this.#orm, scope).findOne(WebhookEndpoint, { id });
    if (!e) throw notFound('Webhook endpoint', id);
    return e;
  }

  async update(scope: Scope, id: string, input: UpdateWebhookInput): Promise<WebhookEndpoint> {
    const url = input.url !== undefined ? this.#checkUrl(input.url) : undefined;
    if (input.events !== undefined) validateEventPatterns(input.events);
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const e = await tx.findOne(WebhookEndpoint, { id });
      if (!e) throw notFound('Webhook endpoint', id);
      if (url !== undefined) e.url = url;
      if (input.events !== undefined) e.events = [...new Set(input.events)];
      if (input.description !== undefined) e.description = input.description ?? null;
      if (input.active !== undefined) {
        e.active = input.active;
        if (input.active) e.disabledReason = null;
      }
      e.updatedAt = this.#clock.now();
      return e;
    });
  }

  /** Deletes the endpoint and cancels its pending deliveries. */
  async remove(scope: Scope, id: string): Promise<void> {
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const e = await tx.findOne(WebhookEndpoint, { id });
      if (!e) throw notFound('Webhook endpoint', id);
      await this.#cancelPending(tx, id, 'endpoint deleted');
      tx.remove(e);
    });
  }

  async #cancelPending(tx: EntityManager, endpointId: string, reason: string, except?: string): Promise<void> {
    await tx.nativeUpdate(WebhookDelivery, { endpointId, status: { $in: ['pending', 'failed'] }, ...(except ? { id: { $ne: except } } : {}) }, {
      status: 'cancelled', nextAttemptAt: null, lastError: reason, updatedAt: this.#clock.now(),
    });
  }

  // ---- deliveries ----

  async listDeliveries(scope: Scope, endpointId: string, page: PageRequest & { status?: DeliveryStatus | null }): Promise<Page<WebhookDelivery>> {
    await this.get(scope, endpointId);
    const limit = validateLimit(page.limit);
    const key = { list: 'webhook_deliveries', filters: { endpointId, status: page.status ?? null } };
    const after = page.cursor ? this.#cursors.decode(scope, key, page.cursor) : undefined;
    const rows = await tenantEm(this.#orm, scope).find(WebhookDelivery, {
      endpointId, ...(after ? { id: { $lt: after } } : {}), ...(page.status ? { status: page.status } : {}),
    }, { orderBy: { id: 'desc' }, limit: limit + 1 });
    return this.#cursors.page(scope, key, rows, limit);
  }

  /** The dead-letter queue: deliveries that failed every attempt, across the account's endpoints and callbacks. */
  async listDeadLetters(scope: Scope, page: PageRequest): Promise<Page<WebhookDelivery>> {
    const limit = validateLimit(page.limit);
    const key = { list: 'webhook_dead_letters' };
    const after = page.cursor ? this.#cursors.decode(scope, key, page.cursor) : undefined;
    const rows = await tenantEm(this.#orm, scope).find(WebhookDelivery, { status: 'dead', ...(after ? { id: { $lt: after } } : {}) }, { orderBy: { id: 'desc' }, limit: limit + 1 });
    return this.#cursors.page(scope, key, rows, limit);
  }

  async getDelivery(scope: Scope, id: string): Promise<WebhookDelivery> {
    const d = await tenantEm(this.#orm, scope).findOne(WebhookDelivery, { id });
    if (!d) throw notFound('Webhook delivery', id);
    return d;
  }

  async listAttempts(scope: Scope, deliveryId: string): Promise<WebhookAttempt[]> {
    await this.getDelivery(scope, deliveryId);
    // Chronological: a replay starts a new round whose attempts are numbered from 1 again.
    return tenantEm(this.#orm, scope).find(WebhookAttempt, { deliveryId }, { orderBy: { createdAt: 'asc', attempt: 'asc' } });
  }

  /** Sends a dead (or failed) delivery again: a new round of attempts starting now. */
  async replay(scope: Scope, id: string): Promise<WebhookDelivery> {
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const d = await tx.findOne(WebhookDelivery, { id });
      if (!d) throw notFound('Webhook delivery', id);
      if (d.status !== 'dead' && d.status !== 'failed' && d.status !== 'cancelled') {
        throw new ServiceError('CONFLICT', `Only dead, failed or cancelled deliveries can be replayed; this one is ${d.status}`, { status: d.status });
      }
      if (d.endpointId) {
        const e = await tx.findOne(WebhookEndpoint, { id: d.endpointId });
        if (!e || !e.active) throw new ServiceError('CONFLICT', 'The endpoint is inactive or deleted', { endpoint_id: d.endpointId });
      }
      const now = this.#clock.now();
      d.status = 'pending';
      d.attempt = 0;
      d.nextAttemptAt = now;
      d.lockedUntil = null;
      d.updatedAt = now;
      return d;
    });
  }

  /** The secret per-resource callbacks (a message's webhook_url) are signed with, per organization and mode. */
  callbackSecret(tenant: TenantRef): string {
    return `whsec_${createHmac('sha256', this.#config.appSecret).update(`webhook-callback:${tenant.organizationId}:${tenant.mode}`).digest('base64')}`;
  }

  // ---- fan-out (the relay calls this inside its transaction) ----

  async fanOut(tx: EntityManager, event: Event): Promise<void> {
    const tenant = { organizationId: event.organizationId, mode: event.mode };
    const endpoints = await this.#activeEndpoints(tx, event.organizationId, event.mode);
    const payload = JSON.stringify({ id: event.id, type: event.type, created_at: event.createdAt.toISOString(), sequence: event.sequence, data: publicEventData(event.data) });
    const now = this.#clock.now();
    const targets: { endpointId: string | null; url: string }[] = [];
    for (const e of endpoints) {
      // An endpoint is never told about its own delivery failures (no feedback loop).
      if (event.type.startsWith('webhook.') && event.data.endpoint_id === e.id) continue;
      if (eventMatches(e.events, event.type)) targets.push({ endpointId: e.id, url: e.url });
    }
    const callback = typeof event.data.webhook_url === 'string' ? event.data.webhook_url : undefined;
    if (callback && checkWebhookUrl(callback, this.#policy).ok) targets.push({ endpointId: null, url: callback });
    for (const target of targets) {
      tx.create(WebhookDelivery, {
        id: newId('dlv', now.getTime()), organizationId: tenant.organizationId, mode: tenant.mode, endpointId: target.endpointId,
        url: target.url, eventId: event.id, eventType: event.type, payload, status: 'pending', attempt: 0, nextAttemptAt: now,
        lockedUntil: null, httpStatus: null, responseTimeMs: null, lastError: null, deliveredAt: null, createdAt: now, updatedAt: now,
      });
    }
  }

  /** Active endpoints of a tenant, read once per relay transaction (a batch holds many events of one tenant). */
  readonly #endpointsByTx = new WeakMap<EntityManager, Map<string, Promise<WebhookEndpoint[]>>>();

  #activeEndpoints(tx: EntityManager, organizationId: string, mode: 'live' | 'test'): Promise<WebhookEndpoint[]> {
    let perTenant = this.#endpointsByTx.get(tx);
    if (!perTenant) this.#endpointsByTx.set(tx, (perTenant = new Map()));
    const key = `${organizationId}:${mode}`;
    let found = perTenant.get(key);
    if (!found) perTenant.set(key, (found = tx.find(WebhookEndpoint, { organizationId, mode, active: true }, ALL_TENANTS)));
    return found;
  }

  // ---- attempts (the delivery worker) ----

  /** Claims up to `limit` due deliveries for this worker (FOR UPDATE SKIP LOCKED; the claim expires). */
  async claimDue(limit: number): Promise<string[]> {
    const now = this.#clock.now();
    const rows = await this.#orm.em.fork().getConnection().execute(
      `update webhook_deliveries set locked_until = ?
        where id in (select id from webhook_deliveries
                      where status in ('pending', 'failed') and next_attempt_at <= ? and (locked_until is null or locked_until < ?)
                      order by next_attempt_at limit ? for update skip locked)
        returning id`,
      [new Date(now.getTime() + LOCK_MS), now, now, limit],
    );
    return (rows as { id: string }[]).map((r) => r.id);
  }

  /** One signed attempt of a claimed delivery, then the outcome: success, retry later, dead, or cancelled. */
  async attempt(deliveryId: string): Promise<void> {
    const found = await this.#orm.em.fork().findOne(WebhookDelivery, { id: deliveryId }, ALL_TENANTS);
    if (!found || (found.status !== 'pending' && found.status !== 'failed')) return;
    const tenant = { organizationId: found.organizationId, mode: found.mode };
    const em = tenantEm(this.#orm, tenant);
    const endpoint = found.endpointId ? await em.findOne(WebhookEndpoint, { id: found.endpointId }) : null;
    if (found.endpointId && (!endpoint || !endpoint.active)) {
      await this.#finish(tenant, deliveryId, { status: 'cancelled', lastError: endpoint ? 'endpoint inactive' : 'endpoint deleted' });
      return;
    }
    const secret = endpoint ? this.#sealer.open(endpoint.signingSecretSealed) : this.callbackSecret(tenant);
    const outcome = await this.#post(found.url, found.payload, secret, deliveryId);
    const attemptNo = found.attempt + 1;
    const now = this.#clock.now();
    if (outcome.ok) {
      await this.#finish(tenant, deliveryId, { status: 'success', attempt: attemptNo, outcome, deliveredAt: now });
      return;
    }
    if (outcome.status === 410 && endpoint) {
      await em.transactional(async (tx) => {
        const e = await tx.findOneOrFail(WebhookEndpoint, { id: endpoint.id });
        e.active = false;
        e.disabledReason = 'The endpoint answered 410 Gone';
        e.updatedAt = now;
        // Not this delivery: #finish records it (cancelled, with this attempt) right after.
        await this.#cancelPending(tx, endpoint.id, 'endpoint answered 410 Gone', deliveryId);
      });
      await this.#finish(tenant, deliveryId, { status: 'cancelled', attempt: attemptNo, outcome, lastError: '410 Gone: endpoint disabled' });
      return;
    }
    if (attemptNo >= MAX_ATTEMPTS) {
      await this.#finish(tenant, deliveryId, { status: 'dead', attempt: attemptNo, outcome });
      return;
    }
    const scheduled = jitter(RETRY_SCHEDULE_MS[attemptNo - 1]!);
    const delay = Math.max(scheduled, retryAfterMs(outcome.retryAfter, now) ?? 0);
    await this.#finish(tenant, deliveryId, { status: 'failed', attempt: attemptNo, outcome, nextAttemptAt: new Date(now.getTime() + delay) });
  }

  async #post(url: string, payload: string, secret: string, deliveryId: string): Promise<{ ok: boolean; status: number | null; timeMs: number | null; error: string | null; retryAfter?: string }> {
    const headers = signedHeaders(secret, deliveryId, this.#clock.now(), payload);
    try {
      const r = await safePost(url, payload, headers, { policy: this.#policy, timeoutMs: this.#config.webhooks.timeoutMs });
      const ok = r.status >= 200 && r.status < 300;
      return { ok, status: r.status, timeMs: Math.round(r.timeMs), error: ok ? null : `HTTP ${r.status}`, retryAfter: r.headers['retry-after'] };
    } catch (e) {
      const kind = e instanceof SafeHttpError ? e.kind : 'connection';
      return { ok: false, status: null, timeMs: null, error: `${kind}: ${(e as Error).message}`.slice(0, 500) };
    }
  }

  async #finish(tenant: TenantRef, deliveryId: string, r: {
    status: DeliveryStatus; attempt?: number; outcome?: { status: number | null; timeMs: number | null; error: string | null };
    nextAttemptAt?: Date; deliveredAt?: Date; lastError?: string;
  }): Promise<void> {
    const now = this.#clock.now();
    await tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const d = await tx.findOne(WebhookDelivery, { id: deliveryId });
      if (!d) return;
      d.status = r.status;
      if (r.attempt !== undefined) d.attempt = r.attempt;
      d.nextAttemptAt = r.nextAttemptAt ?? null;
      d.lockedUntil = null;
      if (r.outcome) {
        d.httpStatus = r.outcome.status;
        d.responseTimeMs = r.outcome.timeMs;
        d.lastError = r.outcome.error;
        tx.create(WebhookAttempt, {
          id: newId('wha', now.getTime()), deliveryId, organizationId: tenant.organizationId, mode: tenant.mode, attempt: d.attempt,
          status: r.status === 'success' ? 'success' : 'failed', httpStatus: r.outcome.status, responseTimeMs: r.outcome.timeMs,
          error: r.outcome.error, nextRetryAt: d.nextAttemptAt, createdAt: now,
        });
      }
      if (r.lastError) d.lastError = r.lastError;
      if (r.deliveredAt) d.deliveredAt = r.deliveredAt;
      d.updatedAt = now;
      if (r.status === 'dead') {
        emitEvent(tx, tenant, {
          type: 'webhook.delivery.dead', resourceType: 'webhook_delivery', resourceId: d.id, sequence: d.attempt,
          data: { delivery_id: d.id, endpoint_id: d.endpointId, event_id: d.eventId, event_type: d.eventType, url: d.url, attempts: d.attempt, last_error: d.lastError },
        }, now);
      }
      await publishNotice(tx, { kind: 'delivery', id: d.id, organizationId: tenant.organizationId, mode: tenant.mode, endpointId: d.endpointId ?? null, status: d.status });
    });
  }

  /** POST /v1/webhooks/{id}/test: one synchronous, signed `webhook.test` delivery, logged like any other. */
  async test(scope: Scope, id: string): Promise<TestResult> {
    const endpoint = await this.get(scope, id);
    const now = this.#clock.now();
    const eventId = newId('evt', now.getTime());
    const payload = JSON.stringify({
      id: eventId, type: 'webhook.test', created_at: now.toISOString(), sequence: 1,
      data: { webhook_id: endpoint.id, message: 'This is a test event from your webhook endpoint settings.', sample: { message_id: 'msg_sample', channel: 'sms', from: '+15005550006', to: '+14155550100', status: 'delivered' } },
    });
    const deliveryId = newId('dlv', now.getTime());
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      tx.create(WebhookDelivery, {
        id: deliveryId, organizationId: scope.organizationId, mode: scope.mode, endpointId: endpoint.id, url: endpoint.url, eventId,
        eventType: 'webhook.test', payload, status: 'pending', attempt: 0, nextAttemptAt: null, lockedUntil: new Date(now.getTime() + LOCK_MS),
        httpStatus: null, responseTimeMs: null, lastError: null, deliveredAt: null, createdAt: now, updatedAt: now,
      });
    });
    const outcome = await this.#post(endpoint.url, payload, this.#sealer.open(endpoint.signingSecretSealed), deliveryId);
    const deliveredAt = outcome.ok ? this.#clock.now() : null;
    // A test is sent once: a failure is final (no retries) but logged.
    await this.#finish(scope, deliveryId, { status: outcome.ok ? 'success' : 'failed', attempt: 1, outcome, ...(deliveredAt ? { deliveredAt } : {}) });
    return { success: outcome.ok, response_status: outcome.status, response_time_ms: outcome.timeMs, delivered_at: deliveredAt, error: outcome.error, delivery_id: deliveryId };
  }
}
