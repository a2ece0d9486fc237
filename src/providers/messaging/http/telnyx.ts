/**
 * Telnyx Messaging through the `telnyx` SDK: `messages.send` (from, to, text, media_urls for MMS,
 * messaging_profile_id, webhook_url to this service), and its webhooks (`message.sent`,
 * `message.finalized`, `message.received`) verified by the SDK's `webhooks.unwrap`: Ed25519 over
 * `timestamp|body` with the account's public key (`telnyx-signature-ed25519`, `telnyx-timestamp`,
 * at most 300 s off). Reference: https://developers.telnyx.com/api/messaging/send-message,
 * https://developers.telnyx.com/docs/messaging/messages/receiving-webhooks.
 *
 * `apiBaseUrl` (MESSAGING_TELNYX_API_URL) is the SDK's `baseURL` (default https://api.telnyx.com/v2).
 */
import { createHash } from 'node:crypto';
import Telnyx, { APIConnectionTimeoutError, APIError } from 'telnyx';
import type { ReportedStatus } from '../types.ts';
import type { CarrierCallbackRequest, VerifiedCallback } from './callbacks.ts';
import { failureOf, HttpCarrierConnector, VendorFailure, type HttpConnectorDeps, type MediaMessage } from './connector.ts';

export type TelnyxConnectorSettings = {
  id: string;
  apiKey: string;
  /** The account's webhook public key (base64 Ed25519, Mission Control → Keys & Credentials). */
  publicKey: string;
  messagingProfileId: string | null;
  apiBaseUrl?: string | undefined;
  timeoutMs?: number;
};

type TelnyxEvent = {
  data?: {
    id?: string;
    event_type?: string;
    occurred_at?: string;
    payload?: {
      id?: string;
      text?: string | null;
      from?: { phone_number?: string };
      to?: { phone_number?: string; status?: string }[];
      errors?: { code?: string | number; title?: string }[];
      media?: { url?: string }[];
    };
  };
};

const FINAL: Record<string, ReportedStatus | null> = {
  queued: null, sending: null, sent: 'sent', delivered: 'delivered', delivery_unconfirmed: 'sent',
  sending_failed: 'failed', delivery_failed: 'failed',
};

export class TelnyxConnector extends HttpCarrierConnector {
  readonly #s: TelnyxConnectorSettings;
  readonly #client: Telnyx;

  constructor(settings: TelnyxConnectorSettings, deps: HttpConnectorDeps) {
    super(settings.id, deps);
    this.#s = settings;
    this.#client = new Telnyx({
      apiKey: settings.apiKey, publicKey: settings.publicKey, maxRetries: 0, timeout: settings.timeoutMs ?? 10_000,
      ...(settings.apiBaseUrl ? { baseURL: settings.apiBaseUrl } : {}),
    });
  }

  protected async submit(m: MediaMessage): Promise<string> {
    try {
      const sent = await this.#client.messages.send({
        to: m.to, from: m.from,
        ...(m.body ? { text: m.body } : {}),
        ...(m.mediaUrls.length > 0 ? { media_urls: m.mediaUrls, type: 'MMS' as const } : {}),
        ...(this.#s.messagingProfileId ? { messaging_profile_id: this.#s.messagingProfileId } : {}),
        webhook_url: this.callbacks.status,
      });
      const id = sent.data?.id;
      if (!id) throw new VendorFailure('TELNYX_BAD_RESPONSE', 'Telnyx answered without a message id', 'unknown');
      return id;
    } catch (e) {
      if (e instanceof APIConnectionTimeoutError) throw e;
      if (e instanceof APIError && e.status !== undefined) {
        const first = (e.error as { errors?: { code?: string | number; title?: string; detail?: string }[] } | undefined)?.errors?.[0];
        throw failureOf(e.status, first?.code ? `TELNYX_${first.code}` : `TELNYX_HTTP_${e.status}`, `Telnyx answered ${e.status}: ${first?.detail ?? first?.title ?? e.message}`);
      }
      throw e;
    }
  }
}

/** Verifies a webhook with the SDK's `webhooks.unwrap` (signature and 300 s timestamp tolerance); null when it does not verify. */
export async function verifyTelnyxCallback(publicKey: string, req: CarrierCallbackRequest): Promise<VerifiedCallback | null> {
  // A client only to reach the SDK's verifier: it makes no request.
  const client = new Telnyx({ apiKey: 'webhook-verification', publicKey, maxRetries: 0 });
  let event: TelnyxEvent;
  try {
    event = (await client.webhooks.unwrap(req.rawBody, { headers: flatHeaders(req.headers), key: publicKey })) as TelnyxEvent;
  } catch {
    return null;
  }
  const signature = String(req.headers['telnyx-signature-ed25519'] ?? '');
  const key = `telnyx:${createHash('sha256').update(signature).digest('hex')}`;
  return { key, events: [eventOf(event)] };
}

function flatHeaders(headers: CarrierCallbackRequest['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

function eventOf(e: TelnyxEvent): VerifiedCallback['events'][number] {
  const data = e.data ?? {};
  const p = data.payload ?? {};
  const at = data.occurred_at ? new Date(data.occurred_at) : undefined;
  if (data.event_type === 'message.received') {
    return {
      kind: 'inbound', providerMessageId: p.id ?? null, from: p.from?.phone_number ?? '', to: p.to?.[0]?.phone_number ?? '', body: p.text ?? '',
      mediaUrls: (p.media ?? []).map((x) => x.url).filter((u): u is string => !!u),
    };
  }
  if (!p.id) throw new VendorFailure('TELNYX_BAD_CALLBACK', 'A messaging webhook without payload.id', 'permanent');
  const raw = p.to?.[0]?.status ?? (data.event_type === 'message.sent' ? 'sent' : '');
  const status = FINAL[raw] ?? null;
  const code = p.errors?.[0]?.code;
  return {
    kind: 'status', providerMessageId: p.id, status, ...(at && !Number.isNaN(at.getTime()) ? { at } : {}),
    ...(status === 'failed' ? { errorCode: code !== undefined ? `TELNYX_${code}` : `TELNYX_${raw.toUpperCase()}` } : {}),
  };
}
