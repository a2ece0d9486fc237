/**
 * Every organization's carrier connectors and routes, held in memory by each instance: the accept-
 * time route check and the delivery's route choice read no table. Loaded on first use; a LISTEN on
 * `messaging_carriers` (a statement trigger NOTIFYs at the commit of any change but a status
 * report) reloads it, and so does a lost and re-established LISTEN connection. The instance that
 * writes a change reloads before it answers, so its own next request already sees it.
 *
 * Route choice (docs/messaging.md, "Carriers"): the routes of the message's channel whose prefix starts the
 * destination and whose sender (if any) is the message's, on enabled connectors; the organization's
 * own first, then the platform's shared ones; within each, by priority (lowest first), and routes of
 * one priority in a random order weighted by `weight` (each message draws its own), so traffic
 * splits by weight and a failing connector's messages move to the next.
 */
import type { Pool } from 'pg';
import { Listener } from '../../platform/db/listen.ts';
import type { Logger } from '../../platform/logger.ts';
import type { Channel } from '../../providers/messaging/types.ts';
import type { CarrierChannel, ConnectorKind, ConnectorSettings } from './carriers.entities.ts';

export const CARRIERS_CHANNEL = 'messaging_carriers';

export type ConnectorEntry = {
  id: string; organizationId: string; name: string; kind: ConnectorKind; channel: CarrierChannel; shared: boolean; enabled: boolean;
  settings: ConnectorSettings; sealedCredentials: string;
  /** Changes whenever the configuration does: a running connector restarts on a new version. */
  version: string;
};
export type RouteEntry = {
  id: string; organizationId: string; connectorId: string; shared: boolean; channel: CarrierChannel; prefix: string; sender: string | null; priority: number; weight: number;
};

export type CarrierTableOptions = {
  pool: Pool;
  url: string;
  log: Logger;
  connectTimeoutMs: number;
  /** The platform operator's organization: only its `shared` routes serve everybody. */
  operatorOrg: string | undefined;
  random?: () => number;
};

export class CarrierTable {
  readonly #o: CarrierTableOptions;
  readonly #random: () => number;
  #connectors = new Map<string, ConnectorEntry>();
  #routes: RouteEntry[] = [];
  #ready: Promise<void> | undefined;
  #listener: Listener | undefined;
  #loading: Promise<void> | undefined;
  #again = false;
  readonly #listeners = new Set<() => void>();

  constructor(options: CarrierTableOptions) {
    this.#o = options;
    this.#random = options.random ?? Math.random;
  }

  /** Loads the table and starts listening, once; later calls resolve at once. */
  ready(): Promise<void> {
    this.#ready ??= this.#start().catch((e: unknown) => {
      this.#ready = undefined;
      throw e;
    });
    return this.#ready;
  }

  async #start(): Promise<void> {
    const listener = new Listener({
      url: this.#o.url, channel: CARRIERS_CHANNEL, connectTimeoutMs: this.#o.connectTimeoutMs, log: this.#o.log,
      onNotification: () => { void this.reload(); },
      onReconnect: () => { void this.reload(); },
    });
    await listener.start();
    this.#listener = listener;
    await this.reload();
  }

  /** Reads both tables again (one read at a time; a request during a read runs once more after it). */
  reload(): Promise<void> {
    if (this.#loading) {
      this.#again = true;
      return this.#loading;
    }
    this.#loading = (async () => {
      try {
        do {
          this.#again = false;
          await this.#load();
        } while (this.#again);
      } catch (e) {
        this.#o.log.warn({ err: e }, 'reading the carrier connectors and routes failed');
        throw e;
      } finally {
        this.#loading = undefined;
      }
      for (const l of this.#listeners) l();
    })();
    return this.#loading;
  }

  async #load(): Promise<void> {
    const [connectors, routes] = await Promise.all([
      this.#o.pool.query<{ id: string; organization_id: string; name: string; kind: ConnectorKind; channel: CarrierChannel; shared: boolean; enabled: boolean; settings: ConnectorSettings; sealed_credentials: string; version: string }>(
        `select id, organization_id, name, kind, channel, shared, enabled, settings, sealed_credentials, (extract(epoch from updated_at) * 1000000)::bigint::text as version
           from messaging_connectors`),
      this.#o.pool.query<{ id: string; organization_id: string; connector_id: string; shared: boolean; channel: CarrierChannel; prefix: string; sender: string | null; priority: number; weight: number }>(
        'select id, organization_id, connector_id, shared, channel, prefix, sender, priority, weight from messaging_routes'),
    ]);
    this.#connectors = new Map(connectors.rows.map((c) => [c.id, {
      id: c.id, organizationId: c.organization_id, name: c.name, kind: c.kind, channel: c.channel, shared: c.shared, enabled: c.enabled,
      settings: c.settings, sealedCredentials: c.sealed_credentials, version: `${c.version}:${c.enabled}`,
    }]));
    this.#routes = routes.rows.map((r) => ({
      id: r.id, organizationId: r.organization_id, connectorId: r.connector_id, shared: r.shared, channel: r.channel,
      prefix: r.prefix, sender: r.sender, priority: r.priority, weight: r.weight,
    }));
  }

  /** Called after every reload. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  connectors(): ConnectorEntry[] {
    return [...this.#connectors.values()];
  }

  connector(id: string): ConnectorEntry | undefined {
    return this.#connectors.get(id);
  }

  /** Whether live messages of this organization on `channel` go through carriers at all (it, or the platform, has a route there). */
  routesChannel(organizationId: string, channel: Channel): boolean {
    return this.#routes.some((r) => r.channel === channel && this.#serves(r, organizationId));
  }

  /**
   * The routes that serve this organization on `channel`, as an error names them when none matches
   * a message: `+44 from +447700900123 via uk-smsc` (prefix, sender when the route has one, connector).
   */
  describeRoutes(organizationId: string, channel: Channel): string[] {
    return this.#routes.filter((r) => r.channel === channel && this.#serves(r, organizationId))
      .map((r) => `${r.prefix === '' ? 'any destination' : r.prefix}${r.sender === null ? '' : ` from ${r.sender}`} via ${this.#connectors.get(r.connectorId)?.name ?? r.connectorId}${r.shared ? ' (shared)' : ''}`);
  }

  /** The connectors to try for one message, in order (see the file's comment); empty when no route matches. */
  candidates(organizationId: string, channel: Channel, to: string, from: string): string[] {
    const matching = this.#routes.filter((r) => r.channel === channel && this.#serves(r, organizationId) && to.startsWith(r.prefix) && (r.sender === null || r.sender === from));
    const own = matching.filter((r) => r.organizationId === organizationId && !r.shared);
    const shared = matching.filter((r) => !(r.organizationId === organizationId && !r.shared));
    const ids = [...this.#order(own), ...this.#order(shared)].map((r) => r.connectorId);
    return [...new Set(ids)];
  }

  #serves(r: RouteEntry, organizationId: string): boolean {
    if (!this.#connectors.get(r.connectorId)?.enabled) return false;
    if (r.shared) return r.organizationId === this.#o.operatorOrg;
    return r.organizationId === organizationId;
  }

  /** By priority; within one priority a weighted random order (each route's key is u^(1/weight), largest first). */
  #order(routes: RouteEntry[]): RouteEntry[] {
    const keyed = routes.map((r) => ({ r, key: this.#random() ** (1 / r.weight) }));
    keyed.sort((a, b) => a.r.priority - b.r.priority || b.key - a.key);
    return keyed.map((k) => k.r);
  }

  async stop(): Promise<void> {
    await this.#listener?.stop();
    this.#listener = undefined;
    this.#ready = undefined;
  }
}
