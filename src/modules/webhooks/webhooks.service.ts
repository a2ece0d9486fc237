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
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page, PageRequest } from '../../platform/pagination.ts';
import { Sealer } from '../../platform/crypto/seal.ts';
import { emitEvent, eventMatches, publicEventData } from '../../platform/events/events.ts';
import { LIVE_CHANNEL, NOTICES_PER_PAYLOAD, publishNotice } from '../../platform/events/bus.ts';
import { sqlClient, sqlQuery } from '../../platform/db/sql.ts';
import type { OutboxEvent, RelayTx } from '../../platform/events/relay.ts';
import { checkWebhookUrl, PinnedAgents, safePost, SafeHttpError, type UrlPolicy } from '../../platform/http/safeHttp.ts';
import { WebhookAttempt, WebhookDelivery, WebhookEndpoint, type DeliveryStatus } from './webhooks.entities.ts';
import { newSigningSecret, signedHeaders, signingKeys, type SigningKeys } from './webhooks.signing.ts';
import type { CreateWebhookInput, UpdateWebhookInput } from './webhooks.schemas.ts';
import { OutcomeRecorder, type RecordedOutcome } from './webhooks.recorder.ts';

/** Delay before attempt n+1 after n failures (attempt 1 is immediate): 1 min, 5 min, 30 min, 2 h, 8 h, 24 h. */
export const RETRY_SCHEDULE_MS = [60_000, 5 * 60_000, 30 * 60_000, 2 * 3600_000, 8 * 3600_000, 24 * 3600_000];
export const MAX_ATTEMPTS = RETRY_SCHEDULE_MS.length + 1;
export const DELIVERY_TIMEOUT_MS = 15_000;
const LOCK_MS = 60_000;
/** Prepared signing keys kept per process (cleared when full). */
const SECRET_CACHE_SIZE = 10_000;

/** A delivery the worker claimed, with its endpoint as it is now (`null`: a per-resource callback). */
export type ClaimedDelivery = {
  id: string;
  tenant: TenantRef;
  endpointId: string | null;
  url: string;
  payload: string;
  /** Attempts made before this one. */
  attempt: number;
  endpoint: { active: boolean; signingSecretSealed: string } | 'deleted' | null;
};

type ClaimRow = {
  id: string; organization_id: string; mode: 'live' | 'test'; endpoint_id: string | null; url: string; payload: string; attempt: number;
  endpoint_found: boolean; endpoint_active: boolean | null; signing_secret_sealed: string | null;
};
type ActiveEndpoint = { id: string; url: string; events: string[]; signingSecretSealed: string };
type FanOutRow = { event: OutboxEvent; endpoint: ActiveEndpoint | null; url: string; payload: string };

/**
 * The delivery worker of this process, as fan-out sees it: fresh deliveries it has room for are
 * inserted already claimed and handed to it when the relay commits (no claim statement, no wait for
 * its next poll); the rest are claimed from the table as usual.
 */
export type LocalDeliveryWorker = {
  /** Reserves up to `n` free slots; returns how many were granted. */
  reserve(n: number): number;
  /** Gives back reserved slots (the relay's transaction did not commit). */
  release(n: number): void;
  /** Starts the claimed deliveries in the slots reserved for them. */
  run(deliveries: ClaimedDelivery[]): void;
};
type PostOutcome = { ok: boolean; status: number | null; timeMs: number | null; error: string | null; retryAfter?: string };

/** Event data as consumers see it: the resource's callback URL routes the callback but is not shown to every endpoint. */
export function validateEventPatterns(patterns: readonly string[], catalog: readonly string[]): void {
  for (const [i, p] of patterns.entries()) {
    const known = p === '*' || catalog.includes(p) || (p.endsWith('.*') && catalog.some((t) => t.startsWith(p.slice(0, -1))));
    if (!known) throw new ServiceError('VALIDATION_ERROR', `Unknown event type ${p}`, { field: `events.${i}`, value: p, expected: [...catalog, 'prefix.*', '*'] });
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
  /** Every documented event type (the catalog built from the module list). */
  readonly #eventTypes: readonly string[];
  /** Kept-alive delivery connections, each pinned to the address its requests vetted. */
  readonly #agents = new PinnedAgents();

  constructor(deps: { orm: MikroORM; clock: Clock; config: Config; cursors: CursorCodec; eventTypes: readonly string[] }) {
    this.#eventTypes = deps.eventTypes;
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

  /**
   * Adds one delivery per matching active endpoint (and the resource's callback URL) for `event`.
   * Per relay batch: one read of the active endpoints of every tenant in the batch (on the first
   * call), and one multi-row INSERT of all the batch's deliveries just before the relay commits.
   */
  async fanOut(tx: RelayTx, event: OutboxEvent): Promise<void> {
    let batch = this.#fanOuts.get(tx);
    if (!batch) {
      batch = { endpoints: this.#activeEndpoints(tx), rows: [] };
      this.#fanOuts.set(tx, batch);
      const rows = batch.rows;
      tx.beforeCommit(this, () => this.#insertDeliveries(tx, rows));
    }
    const endpoints = (await batch.endpoints).get(`${event.organizationId}:${event.mode}`) ?? [];
    const targets: { endpoint: ActiveEndpoint | null; url: string }[] = [];
    for (const e of endpoints) {
      // An endpoint is never told about its own delivery failures (no feedback loop).
      if (event.type.startsWith('webhook.') && event.data.endpoint_id === e.id) continue;
      if (eventMatches(e.events, event.type)) targets.push({ endpoint: e, url: e.url });
    }
    const callback = typeof event.data.webhook_url === 'string' ? event.data.webhook_url : undefined;
    if (callback && checkWebhookUrl(callback, this.#policy).ok) targets.push({ endpoint: null, url: callback });
    if (targets.length === 0) return;
    const payload = JSON.stringify({ id: event.id, type: event.type, created_at: event.createdAt.toISOString(), sequence: event.sequence, data: publicEventData(event.data) });
    for (const target of targets) batch.rows.push({ event, endpoint: target.endpoint, url: target.url, payload });
  }

  readonly #fanOuts = new WeakMap<RelayTx, { endpoints: Promise<Map<string, ActiveEndpoint[]>>; rows: FanOutRow[] }>();

  /** The active endpoints of every tenant in the relay's batch, by `organization:mode`. */
  async #activeEndpoints(tx: RelayTx): Promise<Map<string, ActiveEndpoint[]>> {
    const organizations = [...new Set(tx.events.map((e) => e.organizationId))];
    const rows = await tx.query<{ id: string; organization_id: string; mode: string; url: string; events: string[]; signing_secret_sealed: string }>(
      'select id, organization_id, mode, url, events, signing_secret_sealed from webhook_endpoints where active and organization_id = any($1::text[])', [organizations]);
    const byTenant = new Map<string, ActiveEndpoint[]>();
    for (const r of rows) {
      const key = `${r.organization_id}:${r.mode}`;
      let list = byTenant.get(key);
      if (!list) byTenant.set(key, (list = []));
      list.push({ id: r.id, url: r.url, events: r.events, signingSecretSealed: r.signing_secret_sealed });
    }
    return byTenant;
  }

  /**
   * One INSERT for the batch's deliveries. The first ones, as many as this process's worker has
   * free slots for, are inserted claimed (locked_until, as a claim sets it) and handed to it once the
   * relay commits; if the worker dies first, the claim expires and any worker attempts them.
   */
  async #insertDeliveries(tx: RelayTx, rows: FanOutRow[]): Promise<void> {
    if (rows.length === 0) return;
    const now = this.#clock.now();
    const ms = now.getTime();
    const ids = rows.map(() => newId('dlv', ms));
    const local = this.#local;
    const handed = local ? local.reserve(rows.length) : 0;
    if (local && handed > 0) {
      tx.afterRollback(this, () => local.release(handed));
      tx.afterCommit(this, () => local.run(rows.slice(0, handed).map((r, i) => ({
        id: ids[i]!, tenant: { organizationId: r.event.organizationId, mode: r.event.mode }, endpointId: r.endpoint?.id ?? null, url: r.url,
        payload: r.payload, attempt: 0, endpoint: r.endpoint ? { active: true, signingSecretSealed: r.endpoint.signingSecretSealed } : null,
      }))));
    }
    await tx.query(
      `insert into webhook_deliveries (id, organization_id, mode, endpoint_id, url, event_id, event_type, payload, status, attempt, next_attempt_at, locked_until, created_at, updated_at)
       select t.id, t.organization_id, t.mode, t.endpoint_id, t.url, t.event_id, t.event_type, t.payload, 'pending', 0, $9,
              case when t.n <= $10 then $11::timestamptz end, $9, $9
         from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[]) with ordinality
           as t(id, organization_id, mode, endpoint_id, url, event_id, event_type, payload, n)`,
      [
        ids, rows.map((r) => r.event.organizationId), rows.map((r) => r.event.mode), rows.map((r) => r.endpoint?.id ?? null),
        rows.map((r) => r.url), rows.map((r) => r.event.id), rows.map((r) => r.event.type), rows.map((r) => r.payload), now,
        handed, new Date(ms + LOCK_MS),
      ],
    );
  }

  #local: LocalDeliveryWorker | undefined;

  /** The worker of this process starts (fan-out hands it fresh deliveries) or stops. */
  attachLocalWorker(worker: LocalDeliveryWorker): void {
    this.#local = worker;
  }

  detachLocalWorker(worker: LocalDeliveryWorker): void {
    if (this.#local === worker) this.#local = undefined;
  }

  // ---- attempts (the delivery worker) ----

  /**
   * Claims up to `limit` due deliveries for this worker (FOR UPDATE SKIP LOCKED; the claim expires
   * after LOCK_MS, so a crashed worker's deliveries are attempted again) and returns them with
   * their endpoint's current state, in one statement.
   */
  async claimDue(limit: number): Promise<ClaimedDelivery[]> {
    const now = this.#clock.now();
    const rows = await sqlQuery<ClaimRow>(sqlClient(this.#orm),
      `with claimed as (
         update webhook_deliveries set locked_until = $1
          where id in (select id from webhook_deliveries
                        where status in ('pending', 'failed') and next_attempt_at <= $2 and (locked_until is null or locked_until < $2)
                        order by next_attempt_at limit $3 for update skip locked)
          returning id, organization_id, mode, endpoint_id, url, payload, attempt)
       select c.*, e.id is not null as endpoint_found, e.active as endpoint_active, e.signing_secret_sealed
         from claimed c left join webhook_endpoints e on e.id = c.endpoint_id`,
      [new Date(now.getTime() + LOCK_MS), now, limit],
    );
    return rows.map((r) => ({
      id: r.id, tenant: { organizationId: r.organization_id, mode: r.mode }, endpointId: r.endpoint_id, url: r.url, payload: r.payload, attempt: r.attempt,
      endpoint: r.endpoint_id === null ? null : r.endpoint_found ? { active: r.endpoint_active === true, signingSecretSealed: r.signing_secret_sealed! } : 'deleted',
    }));
  }

  /**
   * One signed attempt of a claimed delivery, then its outcome. Successes and retries are recorded
   * by the outcome recorder (many deliveries per statement, never waiting for a slower one);
   * the rare outcomes — cancelled, dead (with its event), 410 Gone — take their own transaction.
   */
  async deliver(claimed: ClaimedDelivery): Promise<void> {
    const { id, tenant, endpoint } = claimed;
    if (endpoint === 'deleted' || (endpoint && !endpoint.active)) {
      await this.#finish(tenant, id, { status: 'cancelled', lastError: endpoint === 'deleted' ? 'endpoint deleted' : 'endpoint inactive' });
      return;
    }
    const secret = endpoint ? this.#keysOf(endpoint.signingSecretSealed) : this.#callbackKeysOf(tenant);
    const outcome = await this.#post(claimed.url, claimed.payload, secret, id);
    const attemptNo = claimed.attempt + 1;
    const now = this.#clock.now();
    if (outcome.ok) {
      await this.#recorder.record({ id, attempt: attemptNo, status: 'success', nextAttemptAt: null, outcome, at: now });
      return;
    }
    if (outcome.status === 410 && claimed.endpointId) {
      const endpointId = claimed.endpointId;
      await tenantEm(this.#orm, tenant).transactional(async (tx) => {
        const e = await tx.findOne(WebhookEndpoint, { id: endpointId });
        if (e) {
          e.active = false;
          e.disabledReason = 'The endpoint answered 410 Gone';
          e.updatedAt = now;
        }
        // Not this delivery: #finish records it (cancelled, with this attempt) right after.
        await this.#cancelPending(tx, endpointId, 'endpoint answered 410 Gone', id);
      });
      await this.#finish(tenant, id, { status: 'cancelled', attempt: attemptNo, outcome, lastError: '410 Gone: endpoint disabled' });
      return;
    }
    if (attemptNo >= MAX_ATTEMPTS) {
      await this.#finish(tenant, id, { status: 'dead', attempt: attemptNo, outcome });
      return;
    }
    const scheduled = jitter(RETRY_SCHEDULE_MS[attemptNo - 1]!);
    const delay = Math.max(scheduled, retryAfterMs(outcome.retryAfter, now) ?? 0);
    await this.#recorder.record({ id, attempt: attemptNo, status: 'failed', nextAttemptAt: new Date(now.getTime() + delay), outcome, at: now });
  }

  /** Closes the kept-alive delivery connections (the worker calls this when it stops). */
  closeConnections(): void {
    this.#agents.destroy();
  }

  /**
   * Signing keys by sealed secret: decrypting and preparing keys once per secret, not per delivery.
   * A changed secret is a different sealed value, so the cache never serves a stale one.
   */
  readonly #keysBySealed = new Map<string, SigningKeys>();
  /** Callback signing keys by `organization:mode` (derived from APP_SECRET, never change). */
  readonly #callbackKeys = new Map<string, SigningKeys>();

  #keysOf(sealed: string): SigningKeys {
    let keys = this.#keysBySealed.get(sealed);
    if (keys === undefined) {
      if (this.#keysBySealed.size >= SECRET_CACHE_SIZE) this.#keysBySealed.clear();
      keys = signingKeys(this.#sealer.open(sealed));
      this.#keysBySealed.set(sealed, keys);
    }
    return keys;
  }

  #callbackKeysOf(tenant: TenantRef): SigningKeys {
    const key = `${tenant.organizationId}:${tenant.mode}`;
    let keys = this.#callbackKeys.get(key);
    if (keys === undefined) {
      if (this.#callbackKeys.size >= SECRET_CACHE_SIZE) this.#callbackKeys.clear();
      keys = signingKeys(this.callbackSecret(tenant));
      this.#callbackKeys.set(key, keys);
    }
    return keys;
  }

  async #post(url: string, payload: string, secret: SigningKeys, deliveryId: string): Promise<PostOutcome> {
    const headers = signedHeaders(secret, deliveryId, this.#clock.now(), payload);
    try {
      const r = await safePost(url, payload, headers, { policy: this.#policy, timeoutMs: this.#config.webhooks.timeoutMs, agents: this.#agents });
      const ok = r.status >= 200 && r.status < 300;
      return { ok, status: r.status, timeMs: Math.round(r.timeMs), error: ok ? null : `HTTP ${r.status}`, retryAfter: r.headers['retry-after'] };
    } catch (e) {
      const kind = e instanceof SafeHttpError ? e.kind : 'connection';
      return { ok: false, status: null, timeMs: null, error: `${kind}: ${(e as Error).message}`.slice(0, 500) };
    }
  }

  /**
   * Records successes and retries of many deliveries in one statement (update the deliveries,
   * insert their attempts, NOTIFY live subscribers; one transaction). A delivery cancelled while
   * its attempt was in flight (endpoint deleted or disabled) stays cancelled unless it succeeded.
   */
  async #recordOutcomes(batch: RecordedOutcome[]): Promise<void> {
    const ms = this.#clock.now().getTime();
    await sqlQuery(sqlClient(this.#orm),
      `with o as (
         select * from unnest($1::text[], $2::int[], $3::text[], $4::timestamptz[], $5::int[], $6::int[], $7::text[], $8::timestamptz[], $9::text[])
           as o(id, attempt, status, next_attempt_at, http_status, response_time_ms, error, at, attempt_id)
       ), u as (
         update webhook_deliveries d
            set status = case when d.status in ('pending', 'failed') or o.status = 'success' then o.status else d.status end,
                attempt = o.attempt,
                next_attempt_at = case when d.status in ('pending', 'failed') then o.next_attempt_at end,
                locked_until = null, http_status = o.http_status, response_time_ms = o.response_time_ms, last_error = o.error,
                delivered_at = case when o.status = 'success' then o.at else d.delivered_at end, updated_at = o.at
           from o where d.id = o.id
         returning d.id, d.organization_id, d.mode, d.endpoint_id, d.status, d.attempt, d.next_attempt_at, o.status as attempt_status,
                   o.http_status, o.response_time_ms, o.error, o.at, o.attempt_id
       ), a as (
         insert into webhook_attempts (id, delivery_id, organization_id, mode, attempt, status, http_status, response_time_ms, error, next_retry_at, created_at)
         select attempt_id, id, organization_id, mode, attempt, attempt_status, http_status, response_time_ms, error, next_attempt_at, at from u
       )
       select pg_notify($10, json_agg(n)::text) from (
         select json_build_object('kind', 'delivery', 'id', id, 'organizationId', organization_id, 'mode', mode, 'endpointId', endpoint_id, 'status', status) as n,
                (row_number() over () - 1) / $11 as chunk
           from u) as notices
        group by chunk`,
      [
        // Timestamps as ISO strings: cheaper for the driver to serialize than Date objects in arrays.
        batch.map((r) => r.id), batch.map((r) => r.attempt), batch.map((r) => r.status), batch.map((r) => r.nextAttemptAt?.toISOString() ?? null),
        batch.map((r) => r.outcome.status), batch.map((r) => r.outcome.timeMs), batch.map((r) => r.outcome.error), batch.map((r) => r.at.toISOString()),
        batch.map(() => newId('wha', ms)), LIVE_CHANNEL, NOTICES_PER_PAYLOAD,
      ],
    );
  }

  readonly #recorder = new OutcomeRecorder((batch) => this.#recordOutcomes(batch));

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
    const outcome = await this.#post(endpoint.url, payload, this.#keysOf(endpoint.signingSecretSealed), deliveryId);
    const deliveredAt = outcome.ok ? this.#clock.now() : null;
    // A test is sent once: a failure is final (no retries) but logged.
    await this.#finish(scope, deliveryId, { status: outcome.ok ? 'success' : 'failed', attempt: 1, outcome, ...(deliveredAt ? { deliveredAt } : {}) });
    return { success: outcome.ok, response_status: outcome.status, response_time_ms: outcome.timeMs, delivered_at: deliveredAt, error: outcome.error, delivery_id: deliveryId };
  }
}
