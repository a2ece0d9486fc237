/**
 * Callbacks of the HTTP carrier API connectors (docs/messaging.md, "Carriers"): `POST
 * /v1/providers/{twilio|telnyx|vonage}/callbacks?connector={id}&event=status|inbound`, the URLs a
 * connector gives its vendor, and WhatsApp Cloud's webhook `…/whatsapp_cloud/callbacks?connector={id}`
 * (its GET subscription handshake too). Each is verified by the vendor SDK's own helper with the
 * connector's credentials (Twilio `validateRequest` over the public URL and the form; Telnyx
 * Ed25519 with a 300 s timestamp tolerance; Vonage's signed JWT with the body's hash and a 300 s
 * `iat` window), or for Meta, which has no Node SDK, `X-Hub-Signature-256` (HMAC-SHA256 of the raw
 * body with the app secret, compared in constant time). A
 * request that does not verify, or one already applied (its signature key is in
 * `carrier_callbacks`), answers 403 `FORBIDDEN` and changes nothing. A verified status report goes
 * through the status path (forward-only, events, webhooks); an inbound message becomes an inbound
 * message of the connector's organization (STOP/HELP as today), its media URLs in `content.media_urls`.
 * Every instance answers callbacks (the route table holds the connectors), workers or not.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool } from 'pg';
import type { Sealer } from '../../platform/crypto/seal.ts';
import { badRequest, ServiceError } from '../../platform/errors.ts';
import type { CarrierSendStore } from '../../providers/messaging/carrierSends.ts';
import type { CarrierCallbackEvent, CarrierCallbackRequest, VerifiedCallback } from '../../providers/messaging/http/callbacks.ts';
import { VendorFailure } from '../../providers/messaging/http/connector.ts';
import { verifyTelnyxCallback } from '../../providers/messaging/http/telnyx.ts';
import { verifyTwilioCallback } from '../../providers/messaging/http/twilio.ts';
import { verifyVonageCallback } from '../../providers/messaging/http/vonage.ts';
import { verifyWhatsAppCallback, whatsAppHandshake } from '../../providers/messaging/http/whatsappCloud.ts';
import type { ConnectorCredentials, TelnyxSettings } from './carriers.entities.ts';
import type { ConnectorEntry } from './carriers.table.ts';
import type { CarrierInbox } from './carriers.inbox.ts';
import type { CarrierTable } from './carriers.table.ts';

const SEEN_DAYS = 7;

export class CarrierCallbacks {
  readonly #table: Pick<CarrierTable, 'ready' | 'connector'>;
  readonly #sealer: Sealer;
  readonly #pool: Pool;
  readonly #store: Pick<CarrierSendStore, 'messageOf'>;
  readonly #inbox: Pick<CarrierInbox, 'report' | 'inbound'>;
  readonly #publicBaseUrl: string;

  constructor(deps: { table: Pick<CarrierTable, 'ready' | 'connector'>; sealer: Sealer; pool: Pool; store: Pick<CarrierSendStore, 'messageOf'>; inbox: Pick<CarrierInbox, 'report' | 'inbound'>; publicBaseUrl: string }) {
    this.#table = deps.table;
    this.#sealer = deps.sealer;
    this.#pool = deps.pool;
    this.#store = deps.store;
    this.#inbox = deps.inbox;
    this.#publicBaseUrl = deps.publicBaseUrl;
  }

  async #connector(kind: string, query: URLSearchParams): Promise<{ connector: ConnectorEntry; secrets: ConnectorCredentials }> {
    const connectorId = query.get('connector') ?? '';
    await this.#table.ready();
    const connector = this.#table.connector(connectorId);
    if (!connector || connector.kind !== kind) throw new ServiceError('NOT_FOUND', `No ${kind} connector ${connectorId} calls back here`, { connector: connectorId });
    return { connector, secrets: JSON.parse(this.#sealer.open(connector.sealedCredentials)) as ConnectorCredentials };
  }

  /**
   * WhatsApp Cloud's subscription handshake (`GET` on the webhook URL): the challenge, as text,
   * when `hub.mode` is `subscribe` and `hub.verify_token` is the connector's; else 403.
   */
  async handshake(query: URLSearchParams): Promise<{ status: number; html: string; headers: Record<string, string> }> {
    const { secrets } = await this.#connector('whatsapp_cloud', query);
    const challenge = whatsAppHandshake(secrets.verify_token ?? '', query);
    if (challenge === null) throw new ServiceError('FORBIDDEN', 'The subscription handshake does not carry this connector\'s verify token');
    return { status: 200, html: challenge, headers: { 'Content-Type': 'text/plain; charset=utf-8' } };
  }

  async handle(kind: string, rawBody: string, request: { pathAndQuery: string; headers: Record<string, string | string[] | undefined> }): Promise<Record<string, unknown>> {
    const query = new URL(request.pathAndQuery, 'http://callback').searchParams;
    const event = query.get('event');
    // Meta's webhook carries statuses and messages together: its URL names no event.
    if (kind !== 'whatsapp_cloud' && event !== 'status' && event !== 'inbound') throw badRequest('The callback URL names no event (status or inbound)');
    const { connector, secrets } = await this.#connector(kind, query);
    const connectorId = connector.id;
    const req: CarrierCallbackRequest = { url: `${this.#publicBaseUrl}${request.pathAndQuery}`, headers: request.headers, rawBody, event: event === 'status' || event === 'inbound' ? event : null };
    let verified: VerifiedCallback | null;
    try {
      verified = kind === 'twilio' ? verifyTwilioCallback(secrets.auth_token ?? '', req)
        : kind === 'telnyx' ? await verifyTelnyxCallback((connector.settings as TelnyxSettings).public_key, req)
          : kind === 'whatsapp_cloud' ? verifyWhatsAppCallback(secrets.app_secret ?? '', secrets.phone_number_id ?? '', req)
            : verifyVonageCallback(secrets.signature_secret ?? '', req);
    } catch (e) {
      if (e instanceof VendorFailure) throw badRequest(e.message);
      throw e;
    }
    if (!verified) throw new ServiceError('FORBIDDEN', `The ${kind} signature of this callback does not verify`);
    if (!(await this.#claim(connectorId, verified.key))) throw new ServiceError('FORBIDDEN', 'This signed callback was already received (replay)');
    try {
      let applied = 0;
      for (const event of verified.events) applied += (await this.#apply(connectorId, event)) ? 1 : 0;
      return verified.events.length === 1 ? { accepted: true, ...(applied === 0 ? { applied: false } : {}) } : { accepted: true, events: verified.events.length, applied };
    } catch (e) {
      // Not applied: the vendor's retry of the same request must get through.
      await this.#pool.query('delete from carrier_callbacks where connector_id = $1 and key = $2', [connectorId, verified.key]);
      throw e;
    }
  }

  async #claim(connectorId: string, key: string): Promise<boolean> {
    const { rowCount } = await this.#pool.query(
      `with pruned as (
         delete from carrier_callbacks where ctid = any(array(select ctid from carrier_callbacks where seen_at < now() - make_interval(days => $3) limit 100))
       )
       insert into carrier_callbacks (connector_id, key) values ($1, $2) on conflict do nothing`,
      [connectorId, key, SEEN_DAYS],
    );
    return rowCount === 1;
  }

  /** Applies one event; false when it is a step the message's status does not show. */
  async #apply(connectorId: string, event: CarrierCallbackEvent): Promise<boolean> {
    if (event.kind === 'status') {
      if (!event.status) return false;
      // The vendor may call back before the send's record commits: wait for it a little (2 s at most).
      let messageId: string | undefined;
      for (let attempt = 0; attempt < 40 && !messageId; attempt++) {
        if (attempt > 0) await sleep(50);
        messageId = await this.#store.messageOf(connectorId, event.providerMessageId);
      }
      await this.#inbox.report({
        ...(messageId ? { messageId } : {}), providerMessageId: event.providerMessageId, provider: connectorId, status: event.status,
        ...(event.errorCode ? { errorCode: event.errorCode } : {}), at: event.at ?? new Date(),
      });
      return true;
    }
    const outcome = await this.#inbox.inbound({
      connectorId, from: event.from, to: event.to, body: event.body,
      ...(event.providerMessageId ? { providerMessageId: event.providerMessageId } : {}), mediaUrls: event.mediaUrls,
      ...(event.content ? { content: event.content } : {}),
    });
    if (outcome === 'no_owner') throw new ServiceError('NOT_FOUND', `No organization owns ${event.to}`, { field: 'to' });
    return true;
  }
}
