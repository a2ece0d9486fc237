/**
 * The URLs of this service a connector's vendor calls (docs/messaging.md, "Carriers"), under
 * PUBLIC_BASE_URL: `POST /v1/providers/{kind}/callbacks?connector={id}&event=status|inbound` for
 * the SMS carrier APIs (the status URL given with each send), and WhatsApp Cloud's one webhook URL
 * `…/v1/providers/whatsapp_cloud/callbacks?connector={id}` (GET: the subscription handshake; POST:
 * statuses and messages together, so it names no event).
 */
import type { CallbackUrls } from '../../providers/messaging/http/connector.ts';

export function callbackUrls(publicBaseUrl: string, kind: string, connectorId: string): CallbackUrls {
  const url = (event: string) => `${publicBaseUrl}/v1/providers/${kind}/callbacks?connector=${encodeURIComponent(connectorId)}&event=${event}`;
  return { status: url('status'), inbound: url('inbound') };
}

export function whatsAppWebhookUrl(publicBaseUrl: string, connectorId: string): string {
  return `${publicBaseUrl}/v1/providers/whatsapp_cloud/callbacks?connector=${encodeURIComponent(connectorId)}`;
}
