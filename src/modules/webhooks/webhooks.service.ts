/**
 * Webhooks context: endpoints (CRUD, signing secrets), the deliveries' log (lists, attempts, the
 * dead-letter queue and replay) and the test endpoint. The delivery engine (webhooks.delivery.ts:
 * signed attempts on the retry schedule) and the fan-out of committed events (webhooks.fanout.ts)
 * are services of their own, built together by `createWebhooksServices`.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../../config.ts';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page, PageRequest } from '../../platform/pagination.ts';
import { Sealer } from '../../platform/crypto/seal.ts';
import type { OutboxEvent, RelayTx } from '../../platform/events/relay.ts';
import { checkWebhookUrl, type UrlPolicy } from '../../platform/http/safeHttp.ts';
import type { Instruments } from '../../platform/instruments.ts';
import { WebhookAttempt, WebhookDelivery, WebhookEndpoint, type DeliveryStatus } from './webhooks.entities.ts';
import { newSigningSecret } from './webhooks.signing.ts';
import type { CreateWebhookInput, UpdateWebhookInput } from './webhooks.schemas.ts';
import { cancelPendingDeliveries, WebhookDeliveryEngine, type TestResult } from './webhooks.delivery.ts';
import { WebhookFanOut, type LocalDeliveryWorker } from './webhooks.fanout.ts';
import { CallbackFormats } from './webhooks.formats.ts';

export { MAX_ATTEMPTS, RETRY_SCHEDULE_MS, DELIVERY_TIMEOUT_MS, type ClaimedDelivery, type TestResult } from './webhooks.delivery.ts';
export type { LocalDeliveryWorker } from './webhooks.fanout.ts';

/** Event data as consumers see it: the resource's callback URL routes the callback but is not shown to every endpoint. */
export function validateEventPatterns(patterns: readonly string[], catalog: readonly string[]): void {
  for (const [i, p] of patterns.entries()) {
    const known = p === '*' || catalog.includes(p) || (p.endsWith('.*') && catalog.some((t) => t.startsWith(p.slice(0, -1))));
    if (!known) throw new ServiceError('VALIDATION_ERROR', `Unknown event type ${p}`, { field: `events.${i}`, value: p, expected: [...catalog, 'prefix.*', '*'] });
  }
}

/** The module's services (its operations run on them), built together below. */
export type WebhooksServices = { webhooks: WebhooksService; webhookDeliveries: WebhookDeliveryEngine; webhookFanOut: WebhookFanOut; callbackFormats: CallbackFormats };

/** The module's services, sharing one secret sealer and one URL policy. */
export function createWebhooksServices(deps: { orm: MikroORM; clock: Clock; config: Config; cursors: CursorCodec; eventTypes: readonly string[]; instruments?: Instruments }): WebhooksServices {
  const sealer = new Sealer(deps.config.appSecret, 'webhook-signing-secret-v1');
  const policy: UrlPolicy = { allowLoopback: deps.config.allowLoopback };
  const callbackFormats = new CallbackFormats();
  const webhookDeliveries = new WebhookDeliveryEngine({ orm: deps.orm, clock: deps.clock, config: deps.config, sealer, policy, formats: callbackFormats, ...(deps.instruments ? { instruments: deps.instruments } : {}) });
  const webhookFanOut = new WebhookFanOut({ clock: deps.clock, policy, formats: callbackFormats });
  const webhooks = new WebhooksService({ ...deps, sealer, policy, deliveries: webhookDeliveries, fanOut: webhookFanOut });
  return { webhooks, webhookDeliveries, webhookFanOut, callbackFormats };
}

export class WebhooksService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #sealer: Sealer;
  readonly #policy: UrlPolicy;
  /** Every documented event type (the catalog built from the module list). */
  readonly #eventTypes: readonly string[];
  readonly #deliveries: WebhookDeliveryEngine;
  readonly #fanOut: WebhookFanOut;

  constructor(deps: { orm: MikroORM; clock: Clock; cursors: CursorCodec; eventTypes: readonly string[]; sealer: Sealer; policy: UrlPolicy; deliveries: WebhookDeliveryEngine; fanOut: WebhookFanOut }) {
    this.#eventTypes = deps.eventTypes;
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#sealer = deps.sealer;
    this.#policy = deps.policy;
    this.#deliveries = deps.deliveries;
    this.#fanOut = deps.fanOut;
  }

  // ---- endpoints ----

  #checkUrl(url: string): string {
    const checked = checkWebhookUrl(url, this.#policy);
    if (!checked.ok) throw new ServiceError('INVALID_WEBHOOK_URL', `Webhook URL not allowed: ${checked.reason}`, { field: 'url', value: url, ...checked.details });
    return checked.url.toString();
  }

  async create(scope: Scope, input: CreateWebhookInput): Promise<{ endpoint: WebhookEndpoint; signingSecret: string }> {
    const url = this.#checkUrl(input.url);
    validateEventPatterns(input.events, this.#eventTypes);
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
    return this.#cursors.findPage(tenantEm(this.#orm, scope), WebhookEndpoint, scope, { list: 'webhooks' }, page);
  }

  async get(scope: Scope, id: string): Promise<WebhookEndpoint> {
    const e = await tenantEm(this.#orm, scope).findOne(WebhookEndpoint, { id });
    if (!e) throw notFound('Webhook endpoint', id);
    return e;
  }

  async update(scope: Scope, id: string, input: UpdateWebhookInput): Promise<WebhookEndpoint> {
    const url = input.url !== undefined ? this.#checkUrl(input.url) : undefined;
    if (input.events !== undefined) validateEventPatterns(input.events, this.#eventTypes);
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
      await cancelPendingDeliveries(tx, id, 'endpoint deleted', this.#clock.now());
      tx.remove(e);
    });
  }


  // ---- deliveries ----

  async listDeliveries(scope: Scope, endpointId: string, page: PageRequest & { status?: DeliveryStatus | null }): Promise<Page<WebhookDelivery>> {
    await this.get(scope, endpointId);
    const key = { list: 'webhook_deliveries', filters: { endpointId, status: page.status ?? null } };
    return this.#cursors.findPage(tenantEm(this.#orm, scope), WebhookDelivery, scope, key, page, { endpointId, ...(page.status ? { status: page.status } : {}) });
  }

  /** The dead-letter queue: deliveries that failed every attempt, across the account's endpoints and callbacks. */
  async listDeadLetters(scope: Scope, page: PageRequest): Promise<Page<WebhookDelivery>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), WebhookDelivery, scope, { list: 'webhook_dead_letters' }, page, { status: 'dead' });
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
        if (!e) throw new ServiceError('CONFLICT', `The delivery's endpoint ${d.endpointId} was deleted; create an endpoint (POST /v1/webhooks) for new events`, { endpoint_id: d.endpointId, endpoint_state: 'deleted' });
        if (!e.active) {
          throw new ServiceError('CONFLICT', `The delivery's endpoint ${e.id} (${e.url}) is inactive${e.disabledReason ? ` (${e.disabledReason})` : ''}; reactivate it with PUT /v1/webhooks/${e.id} {"active": true}, then replay`, { endpoint_id: e.id, endpoint_state: 'inactive', url: e.url, disabled_reason: e.disabledReason ?? null });
        }
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

  /** POST /v1/webhooks/{id}/test: one synchronous, signed `webhook.test` delivery, logged like any other. */
  async test(scope: Scope, id: string): Promise<TestResult> {
    return this.#deliveries.sendTest(scope, await this.get(scope, id));
  }

  /** The secret per-resource callbacks are signed with (see the delivery engine). */
  callbackSecret(tenant: TenantRef): string {
    return this.#deliveries.callbackSecret(tenant);
  }

  // ---- the fan-out's hooks, also reachable here (`services.webhooks`); see webhooks.fanout.ts ----

  fanOut(tx: RelayTx, event: OutboxEvent): Promise<void> {
    return this.#fanOut.fanOut(tx, event);
  }

  attachLocalWorker(worker: LocalDeliveryWorker): void {
    this.#fanOut.attachLocalWorker(worker);
  }

  detachLocalWorker(worker: LocalDeliveryWorker): void {
    this.#fanOut.detachLocalWorker(worker);
  }
}
