/**
 * A local stand-in for the Twilio, Telnyx and Vonage messaging APIs, answering as their API
 * references document (only the send endpoints this service calls, with their documented request
 * and response shapes), so the official SDKs run unmodified against it:
 *  - Twilio `POST /2010-04-01/Accounts/{AccountSid}/Messages.json`, form-encoded, HTTP Basic
 *    (AccountSid:AuthToken) → 201 Message resource; errors `{ code, message, more_info, status }`
 *    (https://www.twilio.com/docs/messaging/api/message-resource#create-a-message-resource,
 *    https://www.twilio.com/docs/usage/twilios-response#response-formats-exceptions).
 *  - Telnyx `POST /v2/messages`, JSON, `Authorization: Bearer <API key>` → 200 `{ data: { record_type:
 *    "message", id, … } }`; errors `{ errors: [{ code, title, detail }] }`
 *    (https://developers.telnyx.com/api/messaging/send-message).
 *  - Vonage Messages `POST /v1/messages`, JSON, HTTP Basic (api_key:api_secret) → 202 `{ message_uuid }`;
 *    errors RFC 7807 `{ type: "…#<code>", title, detail, instance }`
 *    (https://developer.vonage.com/en/api/messages-olympus#SendMessage).
 * A destination listed in `refuse` gets the vendor's invalid-recipient answer; with `unavailable`
 * every send answers 503 (a vendor outage: nothing taken).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type VendorRequest = { vendor: 'twilio' | 'telnyx' | 'vonage'; path: string; auth: string; contentType: string; body: Record<string, unknown> | URLSearchParams; id: string };

export type CarrierApis = {
  url: string;
  requests: VendorRequest[];
  /** Destinations (E.164) each vendor refuses as invalid. */
  refuse: Set<string>;
  unavailable: Set<'twilio' | 'telnyx' | 'vonage'>;
  close(): Promise<void>;
};

const json = (res: http.ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
};

export async function startCarrierApis(): Promise<CarrierApis> {
  const requests: VendorRequest[] = [];
  const refuse = new Set<string>();
  const unavailable = new Set<'twilio' | 'telnyx' | 'vonage'>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const auth = req.headers.authorization ?? '';
      const contentType = req.headers['content-type'] ?? '';
      const twilio = /^\/2010-04-01\/Accounts\/(AC[0-9a-f]{32})\/Messages\.json$/.exec(path);
      if (req.method === 'POST' && twilio) {
        const form = new URLSearchParams(raw);
        if (unavailable.has('twilio')) return json(res, 503, { code: 20503, message: 'Service unavailable', more_info: 'https://www.twilio.com/docs/errors/20503', status: 503 });
        if (!auth.startsWith('Basic ')) return json(res, 401, { code: 20003, message: 'Authenticate', more_info: 'https://www.twilio.com/docs/errors/20003', status: 401 });
        const to = form.get('To') ?? '';
        if (refuse.has(to)) return json(res, 400, { code: 21211, message: `The 'To' number ${to} is not a valid phone number.`, more_info: 'https://www.twilio.com/docs/errors/21211', status: 400 });
        const sid = `SM${randomBytes(16).toString('hex')}`;
        requests.push({ vendor: 'twilio', path, auth, contentType, body: form, id: sid });
        const media = form.getAll('MediaUrl');
        return json(res, 201, {
          account_sid: twilio[1], api_version: '2010-04-01', body: form.get('Body') ?? '', date_created: new Date().toUTCString(), date_sent: null, date_updated: new Date().toUTCString(),
          direction: 'outbound-api', error_code: null, error_message: null, from: form.get('From'), messaging_service_sid: form.get('MessagingServiceSid'),
          num_media: String(media.length), num_segments: '1', price: null, price_unit: 'USD', sid, status: 'queued', subresource_uris: { media: `/2010-04-01/Accounts/${twilio[1]}/Messages/${sid}/Media.json` },
          to, uri: `/2010-04-01/Accounts/${twilio[1]}/Messages/${sid}.json`,
        });
      }
      if (req.method === 'POST' && path === '/v2/messages') {
        if (unavailable.has('telnyx')) return json(res, 503, { errors: [{ code: '10011', title: 'Service unavailable', detail: 'Try again later' }] });
        if (!auth.startsWith('Bearer ')) return json(res, 401, { errors: [{ code: '10009', title: 'Authentication failed', detail: 'No API key' }] });
        const body = JSON.parse(raw) as { to: string; from?: string; text?: string; media_urls?: string[]; type?: string };
        if (refuse.has(body.to)) return json(res, 400, { errors: [{ code: '40310', title: 'Invalid \'to\' address', detail: `The 'to' address ${body.to} is invalid.` }] });
        const id = randomUUID();
        requests.push({ vendor: 'telnyx', path, auth, contentType, body, id });
        return json(res, 200, {
          data: {
            record_type: 'message', direction: 'outbound', id, type: body.media_urls?.length ? 'MMS' : 'SMS', messaging_profile_id: null,
            from: { phone_number: body.from, carrier: 'Telnyx', line_type: 'Wireless' }, to: [{ phone_number: body.to, status: 'queued', carrier: 'T-MOBILE USA, INC.', line_type: 'Wireless' }],
            text: body.text ?? '', media: (body.media_urls ?? []).map((url) => ({ url, content_type: null, sha256: null, size: null })),
            webhook_url: null, encoding: 'GSM-7', parts: 1, tags: [], cost: null, received_at: new Date().toISOString(), errors: [],
          },
        });
      }
      if (req.method === 'POST' && path === '/v1/messages') {
        if (unavailable.has('vonage')) return json(res, 503, { type: 'https://developer.vonage.com/api-errors#service-unavailable', title: 'Service Unavailable', detail: 'Try again later', instance: randomUUID() });
        if (!auth.startsWith('Basic ')) return json(res, 401, { type: 'https://developer.vonage.com/api-errors#unauthorized', title: 'Unauthorized', detail: 'You did not provide correct credentials.', instance: randomUUID() });
        const body = JSON.parse(raw) as { to: string };
        if (refuse.has(`+${body.to}`)) return json(res, 422, { type: 'https://developer.vonage.com/api-errors/messages#1150', title: 'Invalid params', detail: 'The value of the `to` parameter is invalid.', instance: randomUUID() });
        const id = randomUUID();
        requests.push({ vendor: 'vonage', path, auth, contentType, body, id });
        return json(res, 202, { message_uuid: id });
      }
      json(res, 404, { message: 'not found' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`, requests, refuse, unavailable,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
