/**
 * Vonage Messages API through `@vonage/server-sdk` (`messages.send`: channel `sms` text, channel
 * `mms` image/video/audio/vcard/file or `content` for several media; `client_ref` our message id),
 * and its signed webhooks (status and inbound URLs of the Vonage application): `Authorization:
 * Bearer <JWT>` HS256 with the account's signature secret, checked by `verifySignature`
 * (@vonage/jwt); its `payload_hash` must be the SHA-256 of the body and its `iat` within 300 s.
 * Reference: https://developer.vonage.com/en/api/messages-olympus,
 * https://developer.vonage.com/en/getting-started/concepts/webhooks#validating-signed-webhooks.
 *
 * `apiBaseUrl` (MESSAGING_VONAGE_API_URL) is the SDK's `apiHost` (default https://api.nexmo.com).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { Vonage } from '@vonage/server-sdk';
import { verifySignature } from '@vonage/jwt';
import type { ReportedStatus } from '../types.ts';
import { headerOf, type CarrierCallbackRequest, type VerifiedCallback } from './callbacks.ts';
import { failureOf, HttpCarrierConnector, mediaKind, VendorFailure, type HttpConnectorDeps, type MediaMessage } from './connector.ts';

export type VonageConnectorSettings = {
  id: string;
  apiKey: string;
  apiSecret: string;
  /** The signature secret of the account (Dashboard → Settings): signs the webhooks. */
  signatureSecret: string;
  apiBaseUrl?: string | undefined;
  timeoutMs?: number;
};

/** How far a webhook's `iat` may be from now. */
export const VONAGE_TOLERANCE_SECONDS = 300;

const STATUSES: Record<string, ReportedStatus | null> = {
  submitted: 'sent', delivered: 'delivered', read: 'delivered', rejected: 'failed', undeliverable: 'failed',
};

type SendParams = Parameters<Vonage['messages']['send']>[0];

const digitsOf = (phone: string) => phone.replace(/^\+/, '');
const phoneOf = (digits: string) => (/^\d{8,15}$/.test(digits) ? `+${digits}` : digits);

export class VonageConnector extends HttpCarrierConnector {
  readonly #client: Vonage;

  constructor(settings: VonageConnectorSettings, deps: HttpConnectorDeps) {
    super(settings.id, deps);
    this.#client = new Vonage({ apiKey: settings.apiKey, apiSecret: settings.apiSecret }, {
      timeout: settings.timeoutMs ?? 10_000, ...(settings.apiBaseUrl ? { apiHost: settings.apiBaseUrl.replace(/\/+$/, '') } : {}),
    });
  }

  protected async submit(m: MediaMessage, messageId: string): Promise<string> {
    const base = { to: digitsOf(m.to), from: digitsOf(m.from), clientRef: messageId };
    let params: Record<string, unknown>;
    if (m.mediaUrls.length === 0) params = { ...base, channel: 'sms', messageType: 'text', text: m.body ?? '' };
    else if (m.mediaUrls.length === 1) {
      const kind = mediaKind(m.mediaUrls[0]!);
      params = { ...base, channel: 'mms', messageType: kind, [kind]: { url: m.mediaUrls[0], ...(m.body ? { caption: m.body } : {}) } };
    } else {
      params = { ...base, channel: 'mms', messageType: 'content', content: [...(m.body ? [{ type: 'text', text: m.body }] : []), ...m.mediaUrls.map((url) => ({ type: mediaKind(url), url }))] };
    }
    try {
      const sent = await this.#client.messages.send(params as unknown as SendParams);
      if (!sent.messageUUID) throw new VendorFailure('VONAGE_BAD_RESPONSE', 'Vonage answered without a message_uuid', 'unknown');
      return sent.messageUUID;
    } catch (e) {
      const response = (e as { response?: Response }).response;
      if (response && typeof response.status === 'number') {
        const problem = await response.json().catch(() => ({})) as { type?: string; title?: string; detail?: string };
        const code = /#(\w+)$/.exec(problem.type ?? '')?.[1];
        throw failureOf(response.status, code ? `VONAGE_${code}` : `VONAGE_HTTP_${response.status}`, `Vonage answered ${response.status}: ${problem.detail ?? problem.title ?? ''}`);
      }
      throw e;
    }
  }
}

/** Verifies a Vonage signed webhook (JWT signature, payload hash, freshness); null when it does not verify. */
export function verifyVonageCallback(signatureSecret: string, req: CarrierCallbackRequest, nowMs = Date.now()): VerifiedCallback | null {
  const token = /^Bearer\s+(\S+)$/i.exec(headerOf(req.headers, 'authorization') ?? '')?.[1];
  if (!token || !verifySignature(token, signatureSecret)) return null;
  let claims: { iat?: number; jti?: string; payload_hash?: string };
  try {
    claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as typeof claims;
  } catch {
    return null;
  }
  const hash = createHash('sha256').update(req.rawBody).digest('hex');
  if (typeof claims.payload_hash !== 'string' || claims.payload_hash.length !== hash.length || !timingSafeEqual(Buffer.from(claims.payload_hash), Buffer.from(hash))) return null;
  if (typeof claims.iat !== 'number' || Math.abs(nowMs / 1000 - claims.iat) > VONAGE_TOLERANCE_SECONDS) return null;
  const key = `vonage:${claims.jti ?? createHash('sha256').update(token).digest('hex')}`;
  let body: {
    message_uuid?: string; to?: string; from?: string; status?: string; timestamp?: string; text?: string; message_type?: string;
    error?: { type?: string; title?: string | number };
    image?: { url?: string }; video?: { url?: string }; audio?: { url?: string }; file?: { url?: string }; vcard?: { url?: string };
  };
  try {
    body = JSON.parse(req.rawBody) as typeof body;
  } catch {
    throw new VendorFailure('VONAGE_BAD_CALLBACK', 'A webhook body that is not JSON', 'permanent');
  }
  if (!body.message_uuid) throw new VendorFailure('VONAGE_BAD_CALLBACK', 'A webhook without message_uuid', 'permanent');
  if (req.event === 'status') {
    const status = STATUSES[body.status ?? ''] ?? null;
    const code = body.error?.title ?? /#(\w+)$/.exec(body.error?.type ?? '')?.[1];
    const at = body.timestamp ? new Date(body.timestamp) : undefined;
    return {
      key,
      events: [{
        kind: 'status', providerMessageId: body.message_uuid, status, ...(at && !Number.isNaN(at.getTime()) ? { at } : {}),
        ...(status === 'failed' ? { errorCode: code !== undefined ? `VONAGE_${code}` : `VONAGE_${String(body.status).toUpperCase()}` } : {}),
      }],
    };
  }
  const media = [body.image, body.video, body.audio, body.file, body.vcard].map((x) => x?.url).filter((u): u is string => !!u);
  return {
    key,
    events: [{ kind: 'inbound', providerMessageId: body.message_uuid, from: phoneOf(body.from ?? ''), to: phoneOf(body.to ?? ''), body: body.text ?? '', mediaUrls: media }],
  };
}
