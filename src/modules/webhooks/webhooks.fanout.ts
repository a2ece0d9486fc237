/**
 * Fan-out: the outbox relay hands every committed event here inside its transaction; it becomes one
 * delivery per matching active endpoint (and per-resource `webhook_url` callback), inserted in one
 * statement per relay batch. Fresh deliveries this process's worker has room for are inserted
 * already claimed and handed to it when the relay commits.
 */
import type { Clock } from '../../platform/clock.ts';
import { newId } from '../../platform/ids.ts';
import { eventMatches, publicEventData } from '../../platform/events/events.ts';
import type { OutboxEvent, RelayTx } from '../../platform/events/relay.ts';
import { RelayLookupCache } from '../../platform/events/relayLookups.ts';
import { checkWebhookUrl, type UrlPolicy } from '../../platform/http/safeHttp.ts';
import { LOCK_MS, type ClaimedDelivery } from './webhooks.delivery.ts';
import type { CallbackFormats } from './webhooks.formats.ts';

type ActiveEndpoint = { id: string; url: string; events: string[]; signingSecretSealed: string };
/** An organization's active endpoints, either mode. */
type OrgEndpoint = ActiveEndpoint & { mode: string };

/** The lookup's row in relay_lookup_versions (bumped by every write to webhook_endpoints). */
export const ENDPOINTS_LOOKUP = 'webhook_endpoints';
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

export class WebhookFanOut {
  readonly #clock: Clock;
  readonly #policy: UrlPolicy;
  readonly #formats: CallbackFormats;

  constructor(deps: { clock: Clock; policy: UrlPolicy; formats: CallbackFormats }) {
    this.#clock = deps.clock;
    this.#policy = deps.policy;
    this.#formats = deps.formats;
  }

  /**
   * Adds one delivery per matching active endpoint (and the resource's callback URL) for `event`.
   * Per relay batch: the active endpoints of every tenant in the batch (on the first call: from
   * this instance's cache while no endpoint changed, else one read), and one multi-row INSERT of
   * all the batch's deliveries just before the relay commits.
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
    // A callback marked with another surface's format gets that format's body (or none for this event).
    const formatted = callback ? this.#formats.of(callback) : undefined;
    if (callback && !formatted && checkWebhookUrl(callback, this.#policy).ok) targets.push({ endpoint: null, url: callback });
    if (targets.length > 0) {
      const payload = JSON.stringify({ id: event.id, type: event.type, created_at: event.createdAt.toISOString(), sequence: event.sequence, data: publicEventData(event.data) });
      for (const target of targets) batch.rows.push({ event, endpoint: target.endpoint, url: target.url, payload });
    }
    if (callback && formatted && checkWebhookUrl(formatted.target, this.#policy).ok) {
      const payload = await formatted.format.render(tx, event, formatted.options);
      if (payload !== null) batch.rows.push({ event, endpoint: null, url: callback, payload });
    }
  }

  readonly #fanOuts = new WeakMap<RelayTx, { endpoints: Promise<Map<string, ActiveEndpoint[]>>; rows: FanOutRow[] }>();

  /** Active endpoints by organization, valid while no endpoint changed (platform/events/relayLookups.ts). */
  readonly #endpoints = new RelayLookupCache<OrgEndpoint[]>(ENDPOINTS_LOOKUP);

  /** The active endpoints of every tenant in the relay's batch, by `organization:mode`. */
  async #activeEndpoints(tx: RelayTx): Promise<Map<string, ActiveEndpoint[]>> {
    const organizations = [...new Set(tx.events.map((e) => e.organizationId))];
    const byOrg = await this.#endpoints.get(tx, organizations, async (missing) => {
      const rows = await tx.query<{ id: string; organization_id: string; mode: string; url: string; events: string[]; signing_secret_sealed: string }>(
        'select id, organization_id, mode, url, events, signing_secret_sealed from webhook_endpoints where active and organization_id = any($1::text[])', [missing]);
      const found = new Map<string, OrgEndpoint[]>();
      for (const r of rows) {
        let list = found.get(r.organization_id);
        if (!list) found.set(r.organization_id, (list = []));
        list.push({ id: r.id, mode: r.mode, url: r.url, events: r.events, signingSecretSealed: r.signing_secret_sealed });
      }
      return found;
    }, []);
    const byTenant = new Map<string, ActiveEndpoint[]>();
    for (const [organization, endpoints] of byOrg) {
      for (const e of endpoints) {
        const key = `${organization}:${e.mode}`;
        let list = byTenant.get(key);
        if (!list) byTenant.set(key, (list = []));
        list.push(e);
      }
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
        traceParent: r.event.traceParent,
      }))));
    }
    await tx.query(
      `insert into webhook_deliveries (id, organization_id, mode, endpoint_id, url, event_id, event_type, payload, status, attempt, next_attempt_at, locked_until, created_at, updated_at, trace_parent)
       select t.id, t.organization_id, t.mode, t.endpoint_id, t.url, t.event_id, t.event_type, t.payload, 'pending', 0, $9,
              case when t.n <= $10 then $11::timestamptz end, $9, $9, t.trace_parent
         from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $12::text[]) with ordinality
           as t(id, organization_id, mode, endpoint_id, url, event_id, event_type, payload, trace_parent, n)`,
      [
        ids, rows.map((r) => r.event.organizationId), rows.map((r) => r.event.mode), rows.map((r) => r.endpoint?.id ?? null),
        rows.map((r) => r.url), rows.map((r) => r.event.id), rows.map((r) => r.event.type), rows.map((r) => r.payload), now,
        handed, new Date(ms + LOCK_MS), rows.map((r) => r.event.traceParent),
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
}
