/**
 * What the HTTP carrier API connectors (Twilio, Telnyx, Vonage; WhatsApp Cloud) share: the send-once record
 * (carrierSends.ts, one part per message: the vendor's message id), the classification of a
 * vendor's failure, and the connector's status.
 *
 * A send is recorded `sending` before the vendor is called; then:
 *  - the vendor answered with its message id → `sent` (a repeated delivery answers that id, any connector);
 *  - the vendor refused it for good (4xx but 429) → `failed`, the message fails with the vendor's code
 *    (`TWILIO_21211`, `TELNYX_40310`, `VONAGE_1150`);
 *  - the vendor answered that it took nothing (429, 5xx) or could not be reached (no connection) →
 *    released, retryable: the next route (or the next attempt) sends it;
 *  - the request went out and no answer came (timeout, connection reset) → the record stays
 *    `sending`: none of these APIs offers an idempotency key for a message send, so a later attempt
 *    fails the message with SEND_IN_DOUBT rather than risk a second copy.
 * The SDKs' own retries are off: a retried POST is exactly the second copy this avoids.
 *
 * Status: `connected` after a send the vendor answered, `degraded` after a 429 or 5xx, `down`
 * after a failure to reach it; a down connector is still tried (an HTTP API has no link to watch).
 */
import type { CarrierSendStore } from '../carrierSends.ts';
import {
  PinnedToConnector, PROVIDER_ERROR_CODES, ProviderError,
  type CarrierEvents, type Channel, type ConnectorState, type ConnectorStatus, type MessagingProvider, type OutboundMessage, type SendResult,
} from '../types.ts';

/** A vendor's answer to a send that failed. `taken`: whether the vendor may have taken the message. */
export class VendorFailure extends Error {
  readonly code: string;
  readonly kind: 'permanent' | 'not_sent' | 'unknown';
  constructor(code: string, message: string, kind: 'permanent' | 'not_sent' | 'unknown') {
    super(message);
    this.name = 'VendorFailure';
    this.code = code;
    this.kind = kind;
  }
}

/** Classifies an HTTP status of a refused send: 4xx but 429 is permanent, 429 and 5xx took nothing. */
export function failureOf(status: number | undefined, code: string, message: string): VendorFailure {
  if (status === undefined) return new VendorFailure(PROVIDER_ERROR_CODES.CONNECTOR_UNAVAILABLE, message, 'unknown');
  if (status === 429 || status >= 500) return new VendorFailure(code, message, 'not_sent');
  return new VendorFailure(code, message, 'permanent');
}

/** Connection errors that happened before any byte of the request left (the vendor took nothing). */
export function neverConnected(e: unknown): boolean {
  const codes = new Set<string>();
  for (let c: unknown = e, depth = 0; c && depth < 5; c = (c as { cause?: unknown }).cause, depth++) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === 'string') codes.add(code);
  }
  return ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'].some((c) => codes.has(c));
}

/** What a connector submits: the message's addresses, body, SMS media URLs and its channel's content (WhatsApp's `type`, `template`, `media`). */
export type MediaMessage = { from: string; to: string; body: string | null; mediaUrls: string[]; content: Record<string, unknown> };

/** The callback URLs a connector gives the vendor with each send (status reports). */
export type CallbackUrls = { status: string; inbound: string };

export type HttpConnectorDeps = { store: CarrierSendStore; events: Pick<CarrierEvents, 'status'>; callbacks: CallbackUrls };

export abstract class HttpCarrierConnector implements MessagingProvider {
  readonly name: string;
  /** The channel the vendor carries (SMS and MMS; WhatsApp's connector overrides it). */
  readonly channel: Channel = 'sms';
  readonly #store: CarrierSendStore;
  readonly #events: Pick<CarrierEvents, 'status'>;
  protected readonly callbacks: CallbackUrls;
  #state: ConnectorState = 'connected';
  #lastError: string | null = null;
  #lastErrorAt: Date | null = null;
  #reported = '';
  #started = false;

  constructor(id: string, deps: HttpConnectorDeps) {
    this.name = id;
    this.#store = deps.store;
    this.#events = deps.events;
    this.callbacks = deps.callbacks;
  }

  /** Sends one message through the vendor's API; answers the vendor's message id or throws a VendorFailure. */
  protected abstract submit(message: MediaMessage, messageId: string): Promise<string>;

  async start(): Promise<void> {
    this.#started = true;
    this.#report();
  }

  async close(): Promise<void> {
    this.#started = false;
  }

  status(): ConnectorStatus {
    return { state: this.#state, lastError: this.#lastError, lastErrorAt: this.#lastErrorAt, bound: this.#state === 'down' ? 0 : 1, binds: 1 };
  }

  async supports(_to: string): Promise<boolean> {
    return true;
  }

  async send(message: OutboundMessage): Promise<SendResult> {
    if (message.channel !== this.channel) throw new Error(`The connector ${this.name} was asked to send a ${message.channel} message`);
    const to = message.to[0];
    if (!to) throw new ProviderError(PROVIDER_ERROR_CODES.INVALID_RECIPIENT, 'The message has no recipient', false);
    const begun = await this.#store.begin(message.id, this.name, 0);
    if (begun.kind === 'sent') return { providerMessageId: begun.providerMessageId, provider: begun.connectorId };
    // Part of it went out through an SMPP connector: only that one may send the rest.
    if (begun.kind === 'pinned') throw new PinnedToConnector(begun.connectorId);
    if (begun.kind !== 'new') {
      const by = 'connectorId' in begun ? begun.connectorId : this.name;
      throw new ProviderError(PROVIDER_ERROR_CODES.SEND_IN_DOUBT, `An earlier attempt through ${by} may have sent this message; it is not sent again`, false);
    }
    const mediaUrls = Array.isArray(message.content.media_urls) ? (message.content.media_urls as string[]) : [];
    let id: string;
    try {
      id = await this.submit({ from: message.from, to, body: message.body, mediaUrls, content: message.content }, message.id);
    } catch (e) {
      const failure = e instanceof VendorFailure ? e
        : neverConnected(e) ? new VendorFailure(PROVIDER_ERROR_CODES.CONNECTOR_UNAVAILABLE, `${this.name}: ${errorText(e)}`, 'not_sent')
          : new VendorFailure(PROVIDER_ERROR_CODES.CONNECTOR_UNAVAILABLE, `${this.name}: ${errorText(e)}`, 'unknown');
      this.#failure(failure);
      if (failure.kind === 'permanent') {
        await this.#store.failed(message.id, this.name);
        throw new ProviderError(failure.code, failure.message, false);
      }
      if (failure.kind === 'not_sent') {
        await this.#store.release(message.id, this.name);
        throw new ProviderError(failure.code, failure.message, true);
      }
      // The request may have reached the vendor: the record stays `sending`; the next attempt is in doubt.
      throw new ProviderError(PROVIDER_ERROR_CODES.SEND_IN_DOUBT, `${failure.message}; the vendor may have taken the message, it is not sent again`, false);
    }
    await this.#store.finish(message.id, this.name, [id]);
    this.#ok();
    return { providerMessageId: id };
  }

  #failure(f: VendorFailure): void {
    this.#lastError = `${f.code}: ${f.message}`;
    this.#lastErrorAt = new Date();
    if (f.kind === 'permanent') return this.#report();
    this.#state = f.code === PROVIDER_ERROR_CODES.CONNECTOR_UNAVAILABLE ? 'down' : 'degraded';
    this.#report();
  }

  #ok(): void {
    this.#state = 'connected';
    this.#report();
  }

  #report(): void {
    if (!this.#started) return;
    const s = this.status();
    const key = `${s.state}|${s.lastError ?? ''}`;
    if (key === this.#reported) return;
    this.#reported = key;
    this.#events.status(this.name, s);
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The MMS media type Vonage's `content` message wants, from the URL's extension. */
export function mediaKind(url: string): 'image' | 'video' | 'audio' | 'vcard' | 'file' {
  const ext = /\.([a-z0-9]+)(?:$|[?#])/i.exec(new URL(url).pathname)?.[1]?.toLowerCase() ?? '';
  if (['jpg', 'jpeg', 'png', 'gif', 'webp', 'bmp'].includes(ext)) return 'image';
  if (['mp4', '3gp', 'mov', 'webm'].includes(ext)) return 'video';
  if (['mp3', 'amr', 'aac', 'ogg', 'wav', 'm4a'].includes(ext)) return 'audio';
  if (ext === 'vcf') return 'vcard';
  return 'file';
}
