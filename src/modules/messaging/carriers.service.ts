/**
 * Connectors and routes of an organization (docs/messaging.md, "Carriers"): create, read, update, delete.
 * Credentials are sealed (AES-GCM under APP_SECRET, platform/crypto) before they are stored and
 * never read back by the API. `shared` connectors and routes are the platform operator's
 * (MESSAGING_OPERATOR_ORG): another organization asking for one is FORBIDDEN. A route names a
 * connector of its own organization (a shared route a shared connector); a connector that routes
 * still name cannot be deleted (CONFLICT, with the routes). After a change commits, this instance
 * reloads its route table before answering; the others hear of it by NOTIFY.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import type { Sealer } from '../../platform/crypto/seal.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { listConfigured } from '../../platform/configured.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page, PageRequest } from '../../platform/pagination.ts';
import { WHATSAPP_API_VERSION } from '../../providers/messaging/http/whatsappCloud.ts';
import { channelOfKind, CONNECTOR_KINDS, MessagingConnector, MessagingRoute, type ConnectorCredentials, type ConnectorKind, type ConnectorSettings, type SmppSettings } from './carriers.entities.ts';
import { callbackUrls, whatsAppWebhookUrl } from './carriers.urls.ts';
import { SMPP_DEFAULTS, type CreateConnectorInput, type CreateRouteInput, type UpdateConnectorInput, type UpdateRouteInput } from './carriers.schemas.ts';

/** What the service needs of the route table: a reload after its own writes. */
type Reloadable = { reload(): Promise<void> };

/**
 * The URLs a connector's vendor must be configured with, under PUBLIC_BASE_URL: the status and
 * inbound callbacks of the SMS carrier APIs; WhatsApp Cloud's one webhook URL, whose subscription
 * handshake expects the verify token set on the connector (write-only, so only that it is set).
 * SMPP has none (receipts and MO come over the binds).
 */
export type ConnectorCallbacks = { status_url: string | null; inbound_url: string | null; webhook_url: string | null; verify_token_set: boolean | null };
/** A connector as the API presents it: the row and its callback URLs. */
export type ConnectorView = MessagingConnector & { callbacks: ConnectorCallbacks };

function isUniqueViolation(e: unknown): boolean {
  return (e as { code?: string }).code === '23505' || /unique|duplicate/i.test(String((e as Error)?.message));
}

export class CarriersService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #sealer: Sealer;
  readonly #table: Reloadable;
  readonly #operatorOrg: string | undefined;
  readonly #publicBaseUrl: string;

  constructor(deps: { orm: MikroORM; clock: Clock; cursors: CursorCodec; sealer: Sealer; table: Reloadable; operatorOrg: string | undefined; publicBaseUrl: string }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#sealer = deps.sealer;
    this.#table = deps.table;
    this.#operatorOrg = deps.operatorOrg;
    this.#publicBaseUrl = deps.publicBaseUrl;
  }

  #view(c: MessagingConnector): ConnectorView {
    const none = { status_url: null, inbound_url: null, webhook_url: null, verify_token_set: null };
    let callbacks: ConnectorCallbacks = none;
    if (c.kind === 'whatsapp_cloud') {
      const { verify_token } = JSON.parse(this.#sealer.open(c.sealedCredentials)) as ConnectorCredentials;
      callbacks = { ...none, webhook_url: whatsAppWebhookUrl(this.#publicBaseUrl, c.id), verify_token_set: !!verify_token };
    } else if (c.kind !== 'smpp') {
      const urls = callbackUrls(this.#publicBaseUrl, c.kind, c.id);
      callbacks = { ...none, status_url: urls.status, inbound_url: urls.inbound };
    }
    return Object.assign(c, { callbacks });
  }

  #assertMayShare(scope: Scope, shared: boolean | null | undefined): void {
    if (shared && scope.organizationId !== this.#operatorOrg) {
      throw new ServiceError('FORBIDDEN', 'Only the platform operator\'s organization configures shared connectors and routes', { field: 'shared' });
    }
  }

  // ---- connectors ----

  async createConnector(scope: Scope, input: CreateConnectorInput): Promise<ConnectorView> {
    this.#assertMayShare(scope, input.shared);
    const now = this.#clock.now();
    const { settings, credentials } = settingsOf(input);
    const enabled = input.enabled ?? true;
    const em = tenantEm(this.#orm, scope);
    let connector: MessagingConnector;
    try {
      connector = await em.transactional(async (tx) => tx.create(MessagingConnector, {
        id: newId('conn', now.getTime()), organizationId: scope.organizationId, name: input.name, kind: input.kind, channel: input.channel ?? channelOfKind(input.kind),
        shared: input.shared ?? false, enabled, settings, sealedCredentials: this.#sealer.seal(JSON.stringify(credentials)),
        status: enabled ? 'down' : 'disabled', bindsUp: 0, lastError: null, lastErrorAt: null, statusAt: null, createdAt: now, updatedAt: now,
      }));
    } catch (e) {
      if (isUniqueViolation(e)) throw new ServiceError('ALREADY_EXISTS', `A connector named ${input.name} already exists`, { field: 'name' });
      throw e;
    }
    await this.#table.reload();
    return this.#view(connector);
  }

  async listConnectors(scope: Scope, input: PageRequest): Promise<Page<ConnectorView>> {
    const page = await this.#cursors.findPage(tenantEm(this.#orm, scope), MessagingConnector, scope, { list: 'connectors', filters: {} }, input, {});
    return { ...page, items: page.items.map((c) => this.#view(c)) };
  }

  async getConnector(scope: Scope, id: string): Promise<ConnectorView> {
    const c = await tenantEm(this.#orm, scope).findOne(MessagingConnector, { id });
    if (!c) throw notFound('Connector', id);
    return this.#view(c);
  }

  async updateConnector(scope: Scope, input: UpdateConnectorInput): Promise<ConnectorView> {
    const now = this.#clock.now();
    const em = tenantEm(this.#orm, scope);
    let updated: MessagingConnector;
    try {
      updated = await em.transactional(async (tx) => {
        const c = await tx.findOne(MessagingConnector, { id: input.id });
        if (!c) throw notFound('Connector', input.id);
        if (input.name != null) c.name = input.name;
        if (input.enabled != null && input.enabled !== c.enabled) {
          c.enabled = input.enabled;
          Object.assign(c, { status: input.enabled ? 'down' : 'disabled', bindsUp: 0, statusAt: now });
        }
        for (const kind of CONNECTOR_KINDS) {
          const given = input[kind];
          if (!given) continue;
          if (kind !== c.kind) throw new ServiceError('VALIDATION_ERROR', `${kind} settings do not apply to a ${c.kind} connector`, { field: kind });
          const changes = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== null && v !== undefined));
          const secrets = Object.fromEntries(Object.entries(changes).filter(([k]) => SECRET_FIELDS[kind].has(k)));
          const plain = Object.fromEntries(Object.entries(changes).filter(([k]) => !SECRET_FIELDS[kind].has(k)));
          c.settings = { ...c.settings, ...plain } as ConnectorSettings;
          if (Object.keys(secrets).length > 0) {
            const stored = JSON.parse(this.#sealer.open(c.sealedCredentials)) as ConnectorCredentials;
            c.sealedCredentials = this.#sealer.seal(JSON.stringify({ ...stored, ...secrets }));
          }
        }
        c.updatedAt = now;
        return c;
      });
    } catch (e) {
      if (isUniqueViolation(e)) throw new ServiceError('ALREADY_EXISTS', `A connector named ${input.name} already exists`, { field: 'name' });
      throw e;
    }
    await this.#table.reload();
    return this.#view(updated);
  }

  async removeConnector(scope: Scope, id: string): Promise<void> {
    const em = tenantEm(this.#orm, scope);
    await em.transactional(async (tx) => {
      const c = await tx.findOne(MessagingConnector, { id });
      if (!c) throw notFound('Connector', id);
      const routes = await tx.find(MessagingRoute, { connectorId: id }, { fields: ['id'], orderBy: { id: 'asc' } });
      if (routes.length > 0) {
        throw new ServiceError('CONFLICT', 'Routes still use this connector; delete or move them first', { routes: routes.map((r) => r.id) });
      }
      tx.remove(c);
    });
    await this.#table.reload();
  }

  // ---- routes ----

  async #routeConnector(scope: Scope, connectorId: string, shared: boolean): Promise<MessagingConnector> {
    const em = tenantEm(this.#orm, scope);
    const c = await em.findOne(MessagingConnector, { id: connectorId });
    if (!c) {
      const connectors = (await em.find(MessagingConnector, {}, { fields: ['id', 'name'], orderBy: { id: 'asc' } })).map((k) => `${k.id} (${k.name})`);
      throw new ServiceError('NOT_FOUND', `Connector ${connectorId} not found; this account's connectors: ${listConfigured(connectors)}`, { field: 'connector_id', id: connectorId, connectors });
    }
    if (shared && !c.shared) throw new ServiceError('VALIDATION_ERROR', 'A shared route needs a shared connector', { field: 'connector_id' });
    return c;
  }

  async createRoute(scope: Scope, input: CreateRouteInput): Promise<MessagingRoute> {
    const shared = input.shared ?? false;
    this.#assertMayShare(scope, shared);
    const connector = await this.#routeConnector(scope, input.connector_id, shared);
    const channel = input.channel ?? connector.channel;
    if (connector.channel !== channel) throw new ServiceError('VALIDATION_ERROR', `Connector ${connector.id} carries ${connector.channel}, not ${channel}`, { field: 'channel' });
    const now = this.#clock.now();
    const route = await tenantEm(this.#orm, scope).transactional(async (tx) => tx.create(MessagingRoute, {
      id: newId('route', now.getTime()), organizationId: scope.organizationId, connectorId: connector.id, shared, channel,
      prefix: input.prefix ?? '', sender: input.sender ?? null, priority: input.priority ?? 1, weight: input.weight ?? 100,
      createdAt: now, updatedAt: now,
    }));
    await this.#table.reload();
    return route;
  }

  async listRoutes(scope: Scope, input: PageRequest): Promise<Page<MessagingRoute>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), MessagingRoute, scope, { list: 'routes', filters: {} }, input, {});
  }

  async getRoute(scope: Scope, id: string): Promise<MessagingRoute> {
    const r = await tenantEm(this.#orm, scope).findOne(MessagingRoute, { id });
    if (!r) throw notFound('Route', id);
    return r;
  }

  async updateRoute(scope: Scope, input: UpdateRouteInput): Promise<MessagingRoute> {
    const existing = await this.getRoute(scope, input.id);
    if (input.connector_id != null) {
      const connector = await this.#routeConnector(scope, input.connector_id, existing.shared);
      if (connector.channel !== existing.channel) throw new ServiceError('VALIDATION_ERROR', `Connector ${connector.id} carries ${connector.channel}, not ${existing.channel}`, { field: 'connector_id' });
    }
    const now = this.#clock.now();
    const updated = await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const r = await tx.findOne(MessagingRoute, { id: input.id });
      if (!r) throw notFound('Route', input.id);
      if (input.connector_id != null) r.connectorId = input.connector_id;
      if (input.prefix != null) r.prefix = input.prefix;
      if (input.sender !== undefined) r.sender = input.sender;
      if (input.priority != null) r.priority = input.priority;
      if (input.weight != null) r.weight = input.weight;
      r.updatedAt = now;
      return r;
    });
    await this.#table.reload();
    return updated;
  }

  async removeRoute(scope: Scope, id: string): Promise<void> {
    const removed = await tenantEm(this.#orm, scope).nativeDelete(MessagingRoute, { id });
    if (removed === 0) throw notFound('Route', id);
    await this.#table.reload();
  }
}

/** Fields sealed with the credentials (write-only), by kind (Vonage's api_key is an account name, Telnyx's a secret). */
const SECRET_FIELDS: Record<ConnectorKind, ReadonlySet<string>> = {
  smpp: new Set(['password']), twilio: new Set(['auth_token']), telnyx: new Set(['api_key']), vonage: new Set(['api_secret', 'signature_secret']),
  whatsapp_cloud: new Set(['access_token', 'app_secret', 'verify_token', 'phone_number_id', 'waba_id']),
};

/** A new connector's stored settings and sealed credentials, from the settings object of its kind. */
function settingsOf(input: CreateConnectorInput): { settings: ConnectorSettings; credentials: ConnectorCredentials } {
  const kind: ConnectorKind = input.kind;
  switch (kind) {
    case 'smpp': {
      const { password, ...given } = input.smpp!;
      return { settings: withDefaults(given), credentials: { password } };
    }
    case 'twilio': {
      const t = input.twilio!;
      return { settings: { account_sid: t.account_sid, messaging_service_sid: t.messaging_service_sid ?? null }, credentials: { auth_token: t.auth_token } };
    }
    case 'telnyx': {
      const t = input.telnyx!;
      return { settings: { public_key: t.public_key, messaging_profile_id: t.messaging_profile_id ?? null }, credentials: { api_key: t.api_key } };
    }
    case 'vonage': {
      const v = input.vonage!;
      return { settings: { api_key: v.api_key }, credentials: { api_secret: v.api_secret, signature_secret: v.signature_secret } };
    }
    case 'whatsapp_cloud': {
      const { api_version, ...credentials } = input.whatsapp_cloud!;
      return { settings: { api_version: api_version ?? WHATSAPP_API_VERSION }, credentials };
    }
  }
}

function withDefaults(given: Omit<NonNullable<CreateConnectorInput['smpp']>, 'password'>): SmppSettings {
  const pick = <K extends keyof typeof SMPP_DEFAULTS>(k: K) => (given[k] ?? SMPP_DEFAULTS[k]) as SmppSettings[K];
  return {
    host: given.host, port: given.port, system_id: given.system_id, tls: pick('tls'), system_type: pick('system_type'), bind_mode: pick('bind_mode'),
    binds: pick('binds'), window: pick('window'), throughput: pick('throughput'), concatenation: pick('concatenation'),
    enquire_link_seconds: pick('enquire_link_seconds'), request_receipts: pick('request_receipts'),
  };
}
