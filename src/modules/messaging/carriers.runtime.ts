/**
 * The connectors running in this process: an instance with the workers (the ones that deliver)
 * binds every enabled connector of the table and follows its changes — a new or re-configured
 * connector (re)starts, a disabled or deleted one unbinds. Each connector's status changes are
 * written to its row (status, binds up, last error), which the API and /metrics read; with several
 * instances the row shows the last one that reported. Processes without workers bind nothing.
 */
import type { Pool } from 'pg';
import type { Sealer } from '../../platform/crypto/seal.ts';
import type { Logger } from '../../platform/logger.ts';
import type { CarrierSendStore } from '../../providers/messaging/carrierSends.ts';
import { SmppConnector } from '../../providers/messaging/smpp/connector.ts';
import { TelnyxConnector } from '../../providers/messaging/http/telnyx.ts';
import { TwilioConnector } from '../../providers/messaging/http/twilio.ts';
import { VonageConnector } from '../../providers/messaging/http/vonage.ts';
import { WhatsAppCloudConnector } from '../../providers/messaging/http/whatsappCloud.ts';
import { callbackUrls, whatsAppWebhookUrl } from './carriers.urls.ts';
import type { CarrierEvents, ConnectorStatus, MessagingProvider } from '../../providers/messaging/types.ts';
import type { ConnectorCredentials, HttpConnectorKind, SmppSettings, TelnyxSettings, TwilioSettings, VonageSettings, WhatsAppCloudSettings } from './carriers.entities.ts';
import type { CarrierTable, ConnectorEntry } from './carriers.table.ts';

/** Timings a deployment (or a test) may shorten; the connector's defaults otherwise. */
export type ConnectorTimings = { responseTimeoutMs?: number; connectTimeoutMs?: number; reconnectMaxMs?: number; sendTimeoutMs?: number };

/** Where the HTTP carrier APIs are (unset: the vendor's own hosts) and where they call back. */
export type CarrierApis = {
  publicBaseUrl: string;
  apiUrls: Partial<Record<HttpConnectorKind, string | undefined>>;
};

type RunningConnector = MessagingProvider & { start(): Promise<void>; close(): Promise<void>; status(): ConnectorStatus };
type Running = { version: string; connector: RunningConnector };

export class CarrierRuntime {
  readonly #table: CarrierTable;
  readonly #pool: Pool;
  readonly #sealer: Sealer;
  readonly #store: CarrierSendStore;
  readonly #events: Omit<CarrierEvents, 'status'>;
  readonly #log: Logger;
  readonly #timings: ConnectorTimings;
  readonly #apis: CarrierApis;
  readonly #running = new Map<string, Running>();
  #unsubscribe: (() => void) | undefined;
  #syncing: Promise<void> = Promise.resolve();
  #started = false;

  constructor(deps: { table: CarrierTable; pool: Pool; sealer: Sealer; store: CarrierSendStore; events: Omit<CarrierEvents, 'status'>; log: Logger; timings?: ConnectorTimings; apis: CarrierApis }) {
    this.#table = deps.table;
    this.#pool = deps.pool;
    this.#sealer = deps.sealer;
    this.#store = deps.store;
    this.#events = deps.events;
    this.#log = deps.log;
    this.#timings = deps.timings ?? {};
    this.#apis = deps.apis;
  }

  /** Binds the enabled connectors and follows the table from now on. */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    await this.#table.ready();
    this.#unsubscribe = this.#table.onChange(() => { void this.#sync(); });
    await this.#sync();
  }

  /** The running connector, when this process runs it. */
  get(id: string): MessagingProvider | undefined {
    return this.#running.get(id)?.connector;
  }

  status(id: string): ConnectorStatus | undefined {
    return this.#running.get(id)?.connector.status();
  }

  #sync(): Promise<void> {
    // One pass at a time, in order: a pass that starts or stops connectors finishes before the next reads the table.
    this.#syncing = this.#syncing.then(() => this.#apply()).catch((e: unknown) => this.#log.error({ err: e }, 'starting or stopping carrier connectors failed'));
    return this.#syncing;
  }

  async #apply(): Promise<void> {
    if (!this.#started) return;
    const wanted = new Map(this.#table.connectors().filter((c) => c.enabled).map((c) => [c.id, c]));
    const stopping: Promise<void>[] = [];
    for (const [id, running] of this.#running) {
      const entry = wanted.get(id);
      if (entry && entry.version === running.version) continue;
      this.#running.delete(id);
      stopping.push(running.connector.close());
    }
    await Promise.all(stopping);
    const starting: Promise<void>[] = [];
    for (const entry of wanted.values()) {
      if (this.#running.has(entry.id)) continue;
      const connector = this.#connector(entry);
      this.#running.set(entry.id, { version: entry.version, connector });
      starting.push(connector.start());
    }
    await Promise.all(starting);
  }

  #connector(entry: ConnectorEntry): RunningConnector {
    const secrets = JSON.parse(this.#sealer.open(entry.sealedCredentials)) as ConnectorCredentials;
    const events = { ...this.#events, status: (id: string, status: ConnectorStatus) => { void this.#report(id, status); } };
    if (entry.kind !== 'smpp') {
      const deps = { store: this.#store, events, callbacks: callbackUrls(this.#apis.publicBaseUrl, entry.kind, entry.id) };
      const common = { id: entry.id, apiBaseUrl: this.#apis.apiUrls[entry.kind], timeoutMs: this.#timings.sendTimeoutMs };
      if (entry.kind === 'twilio') {
        const s = entry.settings as TwilioSettings;
        return new TwilioConnector({ ...common, accountSid: s.account_sid, authToken: secrets.auth_token ?? '', messagingServiceSid: s.messaging_service_sid }, deps);
      }
      if (entry.kind === 'telnyx') {
        const s = entry.settings as TelnyxSettings;
        return new TelnyxConnector({ ...common, apiKey: secrets.api_key ?? '', publicKey: s.public_key, messagingProfileId: s.messaging_profile_id }, deps);
      }
      if (entry.kind === 'whatsapp_cloud') {
        const webhook = whatsAppWebhookUrl(this.#apis.publicBaseUrl, entry.id);
        return new WhatsAppCloudConnector({
          ...common, accessToken: secrets.access_token ?? '', phoneNumberId: secrets.phone_number_id ?? '', apiVersion: (entry.settings as WhatsAppCloudSettings).api_version,
        }, { ...deps, callbacks: { status: webhook, inbound: webhook } });
      }
      const s = entry.settings as VonageSettings;
      return new VonageConnector({ ...common, apiKey: s.api_key, apiSecret: secrets.api_secret ?? '', signatureSecret: secrets.signature_secret ?? '' }, deps);
    }
    const password = secrets.password ?? '';
    const s = entry.settings as SmppSettings;
    return new SmppConnector({
      id: entry.id, host: s.host, port: s.port, tls: s.tls, systemId: s.system_id, password, systemType: s.system_type,
      bindMode: s.bind_mode, binds: s.binds, window: s.window, throughput: s.throughput, concatenation: s.concatenation,
      enquireLinkSeconds: s.enquire_link_seconds, requestReceipts: s.request_receipts, ...this.#timings,
    }, { store: this.#store, log: this.#log, events });
  }

  async #report(id: string, status: ConnectorStatus): Promise<void> {
    // Only while the connector still runs here: a stopped one's late reports would overwrite `disabled`.
    if (!this.#running.has(id)) return;
    await this.#pool.query(
      `update messaging_connectors set status = $2, binds_up = $3, last_error = $4, last_error_at = $5, status_at = now()
        where id = $1 and enabled`,
      [id, status.state, status.bound, status.lastError, status.lastErrorAt],
    ).catch((e: unknown) => this.#log.warn({ err: e, connector: id }, 'recording a connector status failed'));
  }

  async stop(): Promise<void> {
    this.#started = false;
    this.#unsubscribe?.();
    await this.#syncing;
    const running = [...this.#running.values()];
    this.#running.clear();
    await Promise.all(running.map((r) => r.connector.close()));
  }
}
