/**
 * The delivery engine: claims due deliveries for the worker, makes signed attempts on the retry
 * schedule (1 min … 24 h, honouring Retry-After), records outcomes in batches, moves exhausted
 * deliveries to the dead-letter queue (with `webhook.delivery.dead`), disables endpoints that
 * answer 410 Gone, and sends the synchronous test delivery.
 */
import { createHmac } from 'node:crypto';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../../config.ts';
import type { Clock } from '../../platform/clock.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type Mode, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { Sealer } from '../../platform/crypto/seal.ts';
import { emitEvent } from '../../platform/events/events.ts';
import { LIVE_CHANNEL, NOTICES_PER_PAYLOAD, publishNotice } from '../../platform/events/bus.ts';
import { sqlClient, sqlQuery } from '../../platform/db/sql.ts';
import { PinnedAgents, safePost, SafeHttpError, type UrlPolicy } from '../../platform/http/safeHttp.ts';
import { contextOf, SpanKind, tracingEnabled, withSpan } from '../../platform/tracing.ts';
import { NO_INSTRUMENTS, type DeliveryOutcome, type Instruments } from '../../platform/instruments.ts';
import { WebhookAttempt, WebhookDelivery, WebhookEndpoint, type DeliveryStatus } from './webhooks.entities.ts';
import { signedHeaders, signingKeys, type SigningKeys } from './webhooks.signing.ts';
import { OutcomeRecorder, type RecordedOutcome } from './webhooks.recorder.ts';
import type { CallbackFormats } from './webhooks.formats.ts';

/** Delay before attempt n+1 after n failures (attempt 1 is immediate): 1 min, 5 min, 30 min, 2 h, 8 h, 24 h. */
export const RETRY_SCHEDULE_MS = [60_000, 5 * 60_000, 30 * 60_000, 2 * 3600_000, 8 * 3600_000, 24 * 3600_000];
export const MAX_ATTEMPTS = RETRY_SCHEDULE_MS.length + 1;
export const DELIVERY_TIMEOUT_MS = 15_000;
/** How long a claim holds a delivery (a crashed worker's deliveries are attempted again after it). */
export const LOCK_MS = 60_000;
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
  /** The event's W3C `traceparent` (tracing on): the attempt continues that trace. */
  traceParent: string | null;
};

type ClaimRow = {
  id: string; organization_id: string; mode: Mode; endpoint_id: string | null; url: string; payload: string; attempt: number;
  endpoint_found: boolean; endpoint_active: boolean | null; signing_secret_sealed: string | null; trace_parent: string | null;
};
type PostOutcome = { ok: boolean; status: number | null; timeMs: number | null; error: string | null; retryAfter?: string; contentType?: string; body?: string };

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

/** Cancels the endpoint's pending and failed deliveries (but `except`), in the caller's transaction. */
export async function cancelPendingDeliveries(tx: EntityManager, endpointId: string, reason: string, now: Date, except?: string): Promise<void> {
  await tx.nativeUpdate(WebhookDelivery, { endpointId, status: { $in: ['pending', 'failed'] }, ...(except ? { id: { $ne: except } } : {}) }, {
    status: 'cancelled', nextAttemptAt: null, lastError: reason, updatedAt: now,
  });
}

/**
 * claimDue's statement: up to $3 deliveries due at $2, locked until $1, with their endpoints. The
 * locking subquery runs once (an InitPlan, `= any(array(…))`): as `id in (…)` a plan could make it
 * a semi-join's inner side, rescanned per row, claiming every due delivery (test/claims-plans.test.ts).
 */
export const CLAIM_DUE_SQL = `with claimed as (
         update webhook_deliveries set locked_until = $1
          where id = any(array(select id from webhook_deliveries
                        where status in ('pending', 'failed') and next_attempt_at <= $2 and (locked_until is null or locked_until < $2)
                        order by next_attempt_at limit $3 for update skip locked))
          returning id, organization_id, mode, endpoint_id, url, payload, attempt, trace_parent)
       select c.*, e.id is not null as endpoint_found, e.active as endpoint_active, e.signing_secret_sealed
         from claimed c left join webhook_endpoints e on e.id = c.endpoint_id`;

export class WebhookDeliveryEngine {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #config: Config;
  readonly #sealer: Sealer;
  readonly #policy: UrlPolicy;
  readonly #instruments: Instruments;
  readonly #formats: CallbackFormats;
  /** Kept-alive delivery connections, each pinned to the address its requests vetted. */
  readonly #agents = new PinnedAgents();

  constructor(deps: { orm: MikroORM; clock: Clock; config: Config; sealer: Sealer; policy: UrlPolicy; formats: CallbackFormats; instruments?: Instruments }) {
    this.#orm = deps.orm;
    this.#formats = deps.formats;
    this.#instruments = deps.instruments ?? NO_INSTRUMENTS;
    this.#clock = deps.clock;
    this.#config = deps.config;
    this.#sealer = deps.sealer;
    this.#policy = deps.policy;
  }

  /** The secret per-resource callbacks (a message's webhook_url) are signed with, per organization and mode. */
  callbackSecret(tenant: TenantRef): string {
    return `whsec_${createHmac('sha256', this.#config.appSecret).update(`webhook-callback:${tenant.organizationId}:${tenant.mode}`).digest('base64')}`;
  }

  // ---- attempts (the delivery worker) ----

  /**
   * Claims up to `limit` due deliveries for this worker (FOR UPDATE SKIP LOCKED; the claim expires
   * after LOCK_MS, so a crashed worker's deliveries are attempted again) and returns them with
   * their endpoint's current state, in one statement.
   */
  async claimDue(limit: number): Promise<ClaimedDelivery[]> {
    const now = this.#clock.now();
    const rows = await sqlQuery<ClaimRow>(sqlClient(this.#orm), CLAIM_DUE_SQL, [new Date(now.getTime() + LOCK_MS), now, limit]);
    return rows.map((r) => ({
      id: r.id, tenant: { organizationId: r.organization_id, mode: r.mode }, endpointId: r.endpoint_id, url: r.url, payload: r.payload, attempt: r.attempt,
      endpoint: r.endpoint_id === null ? null : r.endpoint_found ? { active: r.endpoint_active === true, signingSecretSealed: r.signing_secret_sealed! } : 'deleted',
      traceParent: r.trace_parent,
    }));
  }

  /**
   * One signed attempt of a claimed delivery, then its outcome. Successes and retries are recorded
   * by the outcome recorder (many deliveries per statement, never waiting for a slower one);
   * the rare outcomes — cancelled, dead (with its event), 410 Gone — take their own transaction.
   */
  deliver(claimed: ClaimedDelivery): Promise<void> {
    if (!tracingEnabled()) return this.#deliver(claimed);
    return withSpan('webhook.deliver', {
      kind: SpanKind.CONSUMER, parent: contextOf(claimed.traceParent ?? undefined),
      attributes: { 'app.organization_id': claimed.tenant.organizationId, 'app.mode': claimed.tenant.mode, 'app.webhook.delivery_id': claimed.id, 'app.webhook.attempt': claimed.attempt + 1 },
    }, () => this.#deliver(claimed));
  }

  async #deliver(claimed: ClaimedDelivery): Promise<void> {
    const { id, tenant, endpoint } = claimed;
    if (endpoint === 'deleted' || (endpoint && !endpoint.active)) {
      await this.#finish(tenant, id, { status: 'cancelled', lastError: endpoint === 'deleted' ? 'endpoint deleted' : 'endpoint inactive' });
      this.#instruments.webhookDelivery('cancelled', null);
      return;
    }
    const formatted = endpoint ? undefined : this.#formats.of(claimed.url);
    const outcome = formatted
      ? await this.#postFormatted(tenant, id, formatted, claimed.payload)
      : await this.#post(claimed.url, claimed.payload, endpoint ? this.#keysOf(endpoint.signingSecretSealed) : this.#callbackKeysOf(tenant), id);
    const attemptNo = claimed.attempt + 1;
    const now = this.#clock.now();
    const counted: DeliveryOutcome = outcome.ok ? 'success' : outcome.status === 410 && claimed.endpointId ? 'gone' : attemptNo >= MAX_ATTEMPTS ? 'dead' : 'retry';
    this.#instruments.webhookDelivery(counted, outcome.timeMs === null ? null : outcome.timeMs / 1000);
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
        await cancelPendingDeliveries(tx, endpointId, 'endpoint answered 410 Gone', this.#clock.now(), id);
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
    return this.#attempt(url, payload, signedHeaders(secret, deliveryId, this.#clock.now(), payload));
  }

  /** An attempt of a callback in another surface's format: its body, content type and signature. */
  async #postFormatted(tenant: TenantRef, deliveryId: string, formatted: NonNullable<ReturnType<CallbackFormats['of']>>, payload: string): Promise<PostOutcome> {
    let headers: Record<string, string>;
    try {
      headers = await formatted.format.headers(tenant, formatted.target, payload);
    } catch (e) {
      return { ok: false, status: null, timeMs: null, error: `signing: ${(e as Error).message}`.slice(0, 500) };
    }
    const outcome = await this.#attempt(formatted.target, payload, headers, formatted.format.contentType);
    if (outcome.ok && formatted.format.answered) {
      // The format reports what it could not carry out (its own log); the delivery succeeded.
      await formatted.format.answered(tenant, deliveryId, formatted.target, payload, { status: outcome.status!, contentType: outcome.contentType, body: outcome.body ?? '' }).catch(() => undefined);
    }
    return outcome;
  }

  async #attempt(url: string, payload: string, headers: Record<string, string>, contentType?: string): Promise<PostOutcome> {
    try {
      const r = await safePost(url, payload, headers, { policy: this.#policy, timeoutMs: this.#config.webhooks.timeoutMs, agents: this.#agents, ...(contentType ? { contentType } : {}) });
      const ok = r.status >= 200 && r.status < 300;
      return { ok, status: r.status, timeMs: Math.round(r.timeMs), error: ok ? null : `HTTP ${r.status}`, retryAfter: r.headers['retry-after'], contentType: r.headers['content-type'], body: r.body };
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

  /** One synchronous, signed `webhook.test` delivery to `endpoint`, logged like any other. */
  async sendTest(scope: Scope, endpoint: WebhookEndpoint): Promise<TestResult> {
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
