/**
 * Which provider carries a tenant's message. Test mode (and MESSAGING_LIVE_SANDBOX) keeps the
 * sandbox; a live message on a carrier channel (SMS, WhatsApp) of an organization with routes there goes
 * through the carrier router; anything else is the registry's live provider (SMTP for email) or
 * none (CHANNEL_UNAVAILABLE).
 *
 * The router tries the message's connectors in route order (carriers.table.ts). A connector that
 * is down, or answers a retryable error (throttled past its deadline, a lost link, a temporary
 * SMSC fault), passes the message to the next; the send-once record (carrierSends.ts) makes sure a
 * message that went out through one connector is never sent by another: a later attempt anywhere
 * answers the recorded send, and a message partly accepted by one connector is finished by that
 * one only. The message records the connector that carried it as its provider.
 */
import type { TenantRef } from '../../platform/db/tenant.ts';
import { PinnedToConnector, PROVIDER_ERROR_CODES, ProviderError, type Channel, type MessagingProvider, type OutboundMessage, type SendResult } from '../../providers/messaging/types.ts';
import type { MessagingProviders } from '../../providers/messaging/registry.ts';
import { CARRIER_CHANNELS, carriesMms } from './carriers.entities.ts';
import type { CarrierRuntime } from './carriers.runtime.ts';
import type { CarrierTable } from './carriers.table.ts';
import type { ProvidersPort } from './messaging.model.ts';

export const CARRIER_ROUTER_NAME = 'carriers';

export class ProviderRouting implements ProvidersPort {
  readonly #registry: Pick<MessagingProviders, 'forMode'>;
  readonly #table: CarrierTable;
  readonly #runtime: Pick<CarrierRuntime, 'get'>;
  readonly #liveSandbox: boolean;

  constructor(deps: { registry: Pick<MessagingProviders, 'forMode'>; table: CarrierTable; runtime: Pick<CarrierRuntime, 'get'>; liveSandbox: boolean }) {
    this.#registry = deps.registry;
    this.#table = deps.table;
    this.#runtime = deps.runtime;
    this.#liveSandbox = deps.liveSandbox;
  }

  async ready(tenant: TenantRef): Promise<void> {
    if (this.#carried(tenant)) await this.#table.ready();
  }

  forTenant(tenant: TenantRef, channel: Channel): MessagingProvider | undefined {
    if (this.#routed(tenant, channel)) return this.#router(tenant, channel);
    return this.#registry.forMode(tenant.mode, channel);
  }

  routable(tenant: TenantRef, channel: Channel, to: string, from: string, opts: { media?: boolean } = {}): boolean {
    if (!this.#routed(tenant, channel)) return true;
    return this.#candidates(tenant, channel, to, from, opts.media ?? false).length > 0;
  }

  /** The route table's connectors for the message; for an MMS only those that carry media (the HTTP carrier APIs, not SMPP). */
  #candidates(tenant: TenantRef, channel: Channel, to: string, from: string, media: boolean): string[] {
    const ids = this.#table.candidates(tenant.organizationId, channel, to, from);
    return media ? ids.filter((id) => carriesMms(this.#table.connector(id)?.kind ?? '')) : ids;
  }

  routes(tenant: TenantRef, channel: Channel): string[] {
    return this.#routed(tenant, channel) ? this.#table.describeRoutes(tenant.organizationId, channel) : [];
  }

  #carried(tenant: TenantRef): boolean {
    return tenant.mode === 'live' && !this.#liveSandbox;
  }

  #routed(tenant: TenantRef, channel: Channel): boolean {
    return this.#carried(tenant) && (CARRIER_CHANNELS as readonly string[]).includes(channel) && this.#table.routesChannel(tenant.organizationId, channel);
  }

  #router(tenant: TenantRef, channel: Channel): MessagingProvider {
    return {
      name: CARRIER_ROUTER_NAME,
      channel,
      supports: async () => true,
      send: (message) => this.#send(tenant, message),
    };
  }

  async #send(tenant: TenantRef, message: OutboundMessage): Promise<SendResult> {
    const media = Array.isArray(message.content.media_urls) && message.content.media_urls.length > 0;
    const candidates = this.#candidates(tenant, message.channel, message.to[0] ?? '', message.from, media);
    if (candidates.length === 0) throw new ProviderError('CHANNEL_UNAVAILABLE', `No route carries this ${message.channel} message any more`, false);
    let last: ProviderError | undefined;
    for (const id of candidates) {
      const connector = this.#runtime.get(id);
      if (!connector) {
        last = new ProviderError(PROVIDER_ERROR_CODES.CONNECTOR_UNAVAILABLE, `Connector ${id} is not running in this process`, true);
        continue;
      }
      try {
        return withProvider(await connector.send(message), connector.name);
      } catch (e) {
        if (e instanceof PinnedToConnector) return this.#sendPinned(e, message);
        if (!(e instanceof ProviderError) || !e.retryable) throw e;
        last = e;
      }
    }
    throw last!;
  }

  /** Part of the message went out through one connector: only it may send the rest (no failover). */
  async #sendPinned(pin: PinnedToConnector, message: OutboundMessage): Promise<SendResult> {
    const connector = this.#runtime.get(pin.connectorId);
    if (!connector) throw pin;
    return withProvider(await connector.send(message), connector.name);
  }
}

function withProvider(result: SendResult, name: string): SendResult {
  return { providerMessageId: result.providerMessageId, provider: result.provider ?? name };
}
