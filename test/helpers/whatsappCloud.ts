/**
 * A local stand-in for Meta's WhatsApp Cloud API send endpoint, answering as its reference documents:
 * `POST /{version}/{phone-number-id}/messages`, JSON, `Authorization: Bearer <access token>` →
 * 200 `{ messaging_product: "whatsapp", contacts: [{ input, wa_id }], messages: [{ id: "wamid.…" }] }`
 * (https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages); errors as Graph API
 * errors `{ error: { message, type, code, error_data: { messaging_product, details }, fbtrace_id } }`
 * (https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes): a destination in
 * `refuse` gets 131026 (undeliverable, HTTP 400); a phone number id in `throttled` gets 130429
 * (throughput rate limit, HTTP 400: a refusal that took nothing); a wrong token gets 190 (401).
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type CloudRequest = { version: string; phoneNumberId: string; auth: string; body: Record<string, unknown>; id: string };

export type WhatsAppCloudApi = {
  url: string;
  requests: CloudRequest[];
  /** Recipients (E.164) the API refuses as undeliverable. */
  refuse: Set<string>;
  /** Phone number ids whose sends hit the throughput limit. */
  throttled: Set<string>;
  close(): Promise<void>;
};

const graphError = (res: http.ServerResponse, status: number, code: number, message: string, details: string) => {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ error: { message: `(#${code}) ${message}`, type: 'OAuthException', code, error_data: { messaging_product: 'whatsapp', details }, fbtrace_id: randomBytes(8).toString('base64url') } }));
};

export async function startWhatsAppCloudApi(tokens: ReadonlySet<string>): Promise<WhatsAppCloudApi> {
  const requests: CloudRequest[] = [];
  const refuse = new Set<string>();
  const throttled = new Set<string>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const match = /^\/(v\d+\.\d+)\/(\d+)\/messages$/.exec(path);
      if (req.method !== 'POST' || !match) return graphError(res, 400, 100, 'Unsupported post request', `No route ${req.method} ${path}`);
      const auth = req.headers.authorization ?? '';
      if (!tokens.has(auth.replace(/^Bearer /, ''))) return graphError(res, 401, 190, 'Invalid OAuth access token', 'Invalid OAuth access token - Cannot parse access token');
      const [, version, phoneNumberId] = match as unknown as [string, string, string];
      if (throttled.has(phoneNumberId)) return graphError(res, 400, 130429, 'Rate limit hit', 'Cloud API message throughput has been reached.');
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { to: string; messaging_product?: string };
      if (body.messaging_product !== 'whatsapp') return graphError(res, 400, 100, 'Invalid parameter', 'messaging_product must be whatsapp');
      if (refuse.has(`+${body.to}`)) return graphError(res, 400, 131026, 'Message undeliverable', 'Unable to deliver message.');
      const id = `wamid.${randomBytes(24).toString('base64url')}`;
      requests.push({ version, phoneNumberId, auth, body, id });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ messaging_product: 'whatsapp', contacts: [{ input: body.to, wa_id: body.to }], messages: [{ id }] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`, requests, refuse, throttled,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
