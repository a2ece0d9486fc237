/**
 * WhatsApp Business Cloud API (Meta). Meta maintains no Node SDK, so this is plain `fetch` to the
 * Graph API: `POST {base}/{version}/{phone-number-id}/messages` with `Authorization: Bearer
 * <access token>`, JSON `{ messaging_product: "whatsapp", to, type, text | template | image |
 * video | audio | document }` → `{ messages: [{ id: "wamid…" }] }`; errors `{ error: { code,
 * message, error_subcode, error_data } }`.
 * Reference: https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages,
 * https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes.
 *
 * Webhooks (one URL per Meta app, or per WABA / phone number with an override): the subscription
 * handshake `GET ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…` answered with the
 * challenge when the token is the connector's, and notifications `POST`ed with `X-Hub-Signature-256:
 * sha256=<hex HMAC-SHA256 of the raw body with the app secret>`, each carrying
 * `entry[].changes[].value.{statuses[], messages[]}` for a `metadata.phone_number_id`.
 * Reference: https://developers.facebook.com/docs/graph-api/webhooks/getting-started#verification-requests,
 * https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/components.
 *
 * `apiBaseUrl` (MESSAGING_WHATSAPP_API_URL) replaces https://graph.facebook.com.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { ReportedStatus } from '../types.ts';
import { headerOf, type CarrierCallbackEvent, type CarrierCallbackRequest, type VerifiedCallback } from './callbacks.ts';
import { failureOf, HttpCarrierConnector, VendorFailure, type HttpConnectorDeps, type MediaMessage } from './connector.ts';

export const WHATSAPP_GRAPH_URL = 'https://graph.facebook.com';
export const WHATSAPP_API_VERSION = 'v21.0';

export type WhatsAppCloudConnectorSettings = {
  id: string;
  accessToken: string;
  phoneNumberId: string;
  apiVersion?: string | undefined;
  apiBaseUrl?: string | undefined;
  timeoutMs?: number | undefined;
};

/**
 * Meta error codes that say the request was refused before anything was taken and may succeed
 * later: unknown/temporary (1, 2), throttling (4, 80007, 130429), spam and pair rate limits
 * (131048, 131056), service unavailable (131016, 133004), "something went wrong" (131000).
 * Every other code is permanent for this message (131047 outside the 24-hour window, 131026
 * undeliverable, 132001 no such template, 190 expired token, …).
 */
const NOT_TAKEN = new Set([1, 2, 4, 80007, 130429, 131000, 131016, 131048, 131056, 133004]);

const STATUSES: Record<string, ReportedStatus | null> = { sent: 'sent', delivered: 'delivered', read: 'read', failed: 'failed' };

type GraphError = { error?: { code?: number; message?: string; error_subcode?: number; error_data?: { details?: string } } };

const digitsOf = (phone: string) => phone.replace(/\D/g, '');
const phoneOf = (digits: string) => {
  const d = digitsOf(digits);
  return /^\d{7,15}$/.test(d) ? `+${d}` : digits;
};

/** Classifies a Graph API refusal: a code Meta documents as temporary, or a 429/5xx, took nothing. */
export function whatsAppFailure(status: number, body: GraphError): VendorFailure {
  const code = body.error?.code;
  const name = code !== undefined ? `WHATSAPP_${code}` : `WHATSAPP_HTTP_${status}`;
  const text = `WhatsApp answered ${status}: ${body.error?.error_data?.details ?? body.error?.message ?? ''}`.trim();
  if (code !== undefined && NOT_TAKEN.has(code)) return new VendorFailure(name, text, 'not_sent');
  return failureOf(status, name, text);
}

export class WhatsAppCloudConnector extends HttpCarrierConnector {
  override readonly channel = 'whatsapp' as const;
  readonly #url: string;
  readonly #token: string;
  readonly #timeoutMs: number;

  constructor(settings: WhatsAppCloudConnectorSettings, deps: HttpConnectorDeps) {
    super(settings.id, deps);
    const base = (settings.apiBaseUrl ?? WHATSAPP_GRAPH_URL).replace(/\/+$/, '');
    this.#url = `${base}/${settings.apiVersion ?? WHATSAPP_API_VERSION}/${encodeURIComponent(settings.phoneNumberId)}/messages`;
    this.#token = settings.accessToken;
    this.#timeoutMs = settings.timeoutMs ?? 10_000;
  }

  protected async submit(m: MediaMessage): Promise<string> {
    const response = await fetch(this.#url, {
      method: 'POST',
      headers: { Authorization: `Bearer ${this.#token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(requestOf(m)),
      signal: AbortSignal.timeout(this.#timeoutMs),
    });
    const body = await response.json().catch(() => ({})) as GraphError & { messages?: { id?: string }[] };
    if (!response.ok) throw whatsAppFailure(response.status, body);
    const id = body.messages?.[0]?.id;
    if (!id) throw new VendorFailure('WHATSAPP_BAD_RESPONSE', 'WhatsApp answered without a message id', 'unknown');
    return id;
  }
}

type Template = { name: string; language: string; components?: { type: string; parameters?: { type: string; text?: string }[] }[] };
type Media = { type: 'image' | 'video' | 'audio' | 'document'; url: string; caption?: string; filename?: string };

/** The Graph API request of a session (text, media by link) or template message. */
export function requestOf(m: MediaMessage): Record<string, unknown> {
  const base = { messaging_product: 'whatsapp', recipient_type: 'individual', to: digitsOf(m.to) };
  const type = m.content.type;
  if (type === 'template') {
    const t = m.content.template as Template;
    const components = (t.components ?? []).filter((c) => (c.parameters ?? []).length > 0);
    return { ...base, type: 'template', template: { name: t.name, language: { code: t.language }, ...(components.length > 0 ? { components } : {}) } };
  }
  if (type === 'media') {
    const media = m.content.media as Media;
    // Audio takes no caption; a document keeps its file name.
    const object = {
      link: media.url,
      ...(media.caption && media.type !== 'audio' ? { caption: media.caption } : {}),
      ...(media.filename && media.type === 'document' ? { filename: media.filename } : {}),
    };
    return { ...base, type: media.type, [media.type]: object };
  }
  return { ...base, type: 'text', text: { preview_url: false, body: m.body ?? '' } };
}

function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b) && given.length === expected.length;
}

/**
 * The subscription handshake: the challenge to echo when `hub.mode` is `subscribe` and
 * `hub.verify_token` is the connector's (compared in constant time), else null.
 */
export function whatsAppHandshake(verifyToken: string, query: URLSearchParams): string | null {
  const challenge = query.get('hub.challenge') ?? '';
  if (query.get('hub.mode') !== 'subscribe' || !verifyToken) return null;
  if (!sameSecret(query.get('hub.verify_token') ?? '', verifyToken)) return null;
  // Meta's challenge is a number; anything else is not echoed (the page is the request's own text).
  return /^[A-Za-z0-9._-]{1,256}$/.test(challenge) ? challenge : null;
}

type WebhookMessage = {
  from?: string; id?: string; timestamp?: string; type?: string;
  text?: { body?: string };
  button?: { text?: string; payload?: string };
  interactive?: { type?: string; button_reply?: { id?: string; title?: string }; list_reply?: { id?: string; title?: string } };
  location?: { name?: string; address?: string };
  context?: { id?: string };
} & Record<string, unknown>;
type WebhookStatus = { id?: string; status?: string; timestamp?: string; recipient_id?: string; errors?: { code?: number; title?: string }[] };
type Webhook = {
  object?: string;
  entry?: { id?: string; changes?: { field?: string; value?: { metadata?: { display_phone_number?: string; phone_number_id?: string }; messages?: WebhookMessage[]; statuses?: WebhookStatus[] } }[] }[];
};

const MEDIA_TYPES = ['image', 'video', 'audio', 'document', 'sticker'];

/**
 * Verifies a webhook notification (`X-Hub-Signature-256`, constant-time) with the app secret and
 * reads the statuses and messages of the connector's phone number (other numbers of the same app
 * and other fields, such as template status updates, are left out). Null when it does not verify.
 */
export function verifyWhatsAppCallback(appSecret: string, phoneNumberId: string, req: CarrierCallbackRequest): VerifiedCallback | null {
  const header = headerOf(req.headers, 'x-hub-signature-256') ?? '';
  const given = /^sha256=([0-9a-f]{64})$/i.exec(header)?.[1]?.toLowerCase();
  if (!given || !appSecret) return null;
  const expected = createHmac('sha256', appSecret).update(req.rawBody, 'utf8').digest();
  if (!timingSafeEqual(Buffer.from(given, 'hex'), expected)) return null;
  let body: Webhook;
  try {
    body = JSON.parse(req.rawBody) as Webhook;
  } catch {
    throw new VendorFailure('WHATSAPP_BAD_CALLBACK', 'A webhook body that is not JSON', 'permanent');
  }
  if (body.object !== 'whatsapp_business_account') throw new VendorFailure('WHATSAPP_BAD_CALLBACK', `A webhook about ${String(body.object)}, not whatsapp_business_account`, 'permanent');
  const events: CarrierCallbackEvent[] = [];
  for (const entry of body.entry ?? []) {
    for (const change of entry.changes ?? []) {
      const value = change.value;
      if (change.field !== 'messages' || !value || value.metadata?.phone_number_id !== phoneNumberId) continue;
      for (const s of value.statuses ?? []) events.push(statusEvent(s));
      const to = phoneOf(value.metadata.display_phone_number ?? '');
      for (const m of value.messages ?? []) events.push(inboundEvent(m, to));
    }
  }
  return { key: `whatsapp_cloud:${given}`, events };
}

function statusEvent(s: WebhookStatus): CarrierCallbackEvent {
  if (!s.id) throw new VendorFailure('WHATSAPP_BAD_CALLBACK', 'A status without id', 'permanent');
  const status = STATUSES[s.status ?? ''] ?? null;
  const at = s.timestamp ? new Date(Number(s.timestamp) * 1000) : undefined;
  const code = s.errors?.[0]?.code;
  return {
    kind: 'status', providerMessageId: s.id, status, ...(at && !Number.isNaN(at.getTime()) ? { at } : {}),
    ...(status === 'failed' ? { errorCode: code !== undefined ? `WHATSAPP_${code}` : 'WHATSAPP_FAILED' } : {}),
  };
}

/** An inbound message: its text (a caption, a button's or a list reply's title) as the body, Meta's typed part as `content`. */
function inboundEvent(m: WebhookMessage, to: string): CarrierCallbackEvent {
  const type = m.type ?? 'unknown';
  const typed = m[type];
  const caption = MEDIA_TYPES.includes(type) ? (typed as { caption?: string } | undefined)?.caption : undefined;
  const body = m.text?.body ?? caption ?? m.button?.text ?? m.interactive?.button_reply?.title ?? m.interactive?.list_reply?.title ?? m.location?.name ?? '';
  return {
    kind: 'inbound', providerMessageId: m.id ?? null, from: phoneOf(m.from ?? ''), to, body, mediaUrls: [],
    content: { type, ...(typed !== undefined && type !== 'text' ? { [type]: typed } : {}), ...(m.context?.id ? { context: { id: m.context.id } } : {}) },
  };
}
