/**
 * Messaging end to end over HTTP, against the real database with real pg-boss workers and the
 * sandbox providers: every channel and request shape on REST and its GraphQL twin, validation and
 * SMS segmentation. The other messaging-*.test.ts files cover the rest; shared setup is in
 * helpers/messaging.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { expectError, expectGqlError } from './helpers/assertions.ts';
import { MAGIC, phone, email, MESSAGE_FIELDS, messagingHelpers, type StatusChange, startMessagingApp } from './helpers/messaging.ts';

describe('messaging (system clock, pg-boss workers, sandbox providers)', () => {
  let t: TestApp;
  let org: TestOrg;
  const app = useFileApp(startMessagingApp);
  beforeAll(() => { ({ t, org } = app()); });

  const { post, gql, send, getMessage, openSession, counts, createApprovedTemplate, expectAccepted } = messagingHelpers(() => t, () => org);

  // -------------------------------------------------------------------------------------------
  describe('accepting each channel and request shape', () => {
    it('SMS on REST and sendSms on GraphQL', async () => {
      const to = phone();
      const m = await send('sms', { to, body: 'Your code is 1234', metadata: { order: 'A-1' }, webhook_url: 'https://example.com/hook' });
      expectAccepted(m, 'sms', to);
      expect(m).toMatchObject({ body: 'Your code is 1234', from: MAGIC.sandboxSms, encoding: 'GSM-7', segments: 1, metadata: { order: 'A-1' }, webhook_url: 'https://example.com/hook' });

      // National formatting with separators is normalized to E.164.
      const spaced = await send('sms', { to: `${to.slice(0, 2)} (${to.slice(2, 5)}) ${to.slice(5, 8)}-${to.slice(8)}`, body: 'hi' });
      expect(spaced.to).toBe(to);

      const g = await gql(`mutation($to: String!) { sendSms(input: { to: $to, body: "Hello from GraphQL", metadata: { k: "v" } }) { ${MESSAGE_FIELDS} } }`, { to });
      expect(g.status, g.text).toBe(200);
      expect(g.body.errors).toBeUndefined();
      const s = g.body.data.sendSms;
      expect(s).toMatchObject({ channel: 'sms', direction: 'outbound', to, status: 'queued', body: 'Hello from GraphQL', encoding: 'GSM-7', segments: 1, from: MAGIC.sandboxSms });
      expect(s.id).toMatch(/^msg_/);
      expect(s.statusHistory.map((h: StatusChange) => h.status)).toEqual(['queued']);
      expect((await getMessage(s.id)).metadata).toEqual({ k: 'v' });
    });

    it('WhatsApp: text object, type text + body, media, template (REST) and sendWhatsApp (GraphQL)', async () => {
      const to = phone();
      await openSession(to);
      const a = await send('whatsapp', { to, text: { body: 'Hi there' } });
      expectAccepted(a, 'whatsapp', to);
      expect(a).toMatchObject({ type: 'text', body: 'Hi there', from: MAGIC.sandboxSms });

      const b = await send('whatsapp', { to, type: 'text', body: 'Typed text' });
      expect(b).toMatchObject({ type: 'text', body: 'Typed text', status: 'queued' });

      const c = await send('whatsapp', { to, media: { type: 'image', url: 'https://example.com/a.jpg', mime_type: 'image/jpeg', size_bytes: 5 * 1024 * 1024, caption: 'A photo' } });
      expect(c).toMatchObject({ type: 'media', body: 'A photo', media: { type: 'image', url: 'https://example.com/a.jpg', mime_type: 'image/jpeg', size_bytes: 5 * 1024 * 1024 } });

      const d = await send('whatsapp', { to, type: 'document', media: { url: 'https://example.com/terms.pdf', filename: 'terms.pdf' } });
      expect(d).toMatchObject({ type: 'media', media: { type: 'document', url: 'https://example.com/terms.pdf' } });

      const tplId = await createApprovedTemplate('shape_welcome', 'Welcome {{1}}!');
      const stranger = phone(); // no inbound: templates need no session
      const e = await send('whatsapp', { to: stranger, template: { name: 'shape_welcome', language: 'en', components: [{ type: 'body', parameters: [{ type: 'text', text: 'Ana' }] }] } });
      expect(e).toMatchObject({ type: 'template', body: 'Welcome Ana!', template_id: tplId, to: stranger });
      const f = await send('whatsapp', { to: stranger, type: 'template', template: { name: 'shape_welcome', language: { code: 'en' }, components: [{ type: 'BODY', parameters: [{ type: 'text', text: 'Bo' }] }] } });
      expect(f).toMatchObject({ type: 'template', body: 'Welcome Bo!' });

      const g = await gql(`mutation($to: String!) {
        text: sendWhatsApp(input: { to: $to, text: { body: "GraphQL text" } }) { ${MESSAGE_FIELDS} }
        media: sendWhatsApp(input: { to: $to, type: "image", media: { url: "https://example.com/b.png", mimeType: "image/png", sizeBytes: 1000 } }) { ${MESSAGE_FIELDS} }
        tpl: sendWhatsApp(input: { to: $to, template: { name: "shape_welcome", language: "en", components: [{ type: "body", parameters: [{ type: "text", text: "Cy" }] }] } }) { ${MESSAGE_FIELDS} }
      }`, { to });
      expect(g.body.errors, g.text).toBeUndefined();
      expect(g.body.data.text).toMatchObject({ channel: 'whatsapp', to, status: 'queued', body: 'GraphQL text', content: { type: 'text' } });
      expect(g.body.data.media).toMatchObject({ channel: 'whatsapp', content: { type: 'media', media: { type: 'image', mime_type: 'image/png', size_bytes: 1000 } } });
      expect(g.body.data.tpl).toMatchObject({ body: 'Welcome Cy!', templateId: tplId });
    });

    it('email: to as a string and as an array, html and/or text (REST) and sendEmail (GraphQL)', async () => {
      const one = email();
      const a = await send('email', { to: one.toUpperCase(), subject: 'Hello', text: 'Plain body' });
      expectAccepted(a, 'email', one);
      expect(a).toMatchObject({ subject: 'Hello', text: 'Plain body', html: null, body: 'Plain body', from: 'sandbox@sandbox.test' });

      const [x, y] = [email('x'), email('y')];
      const b = await send('email', { to: [x, y, x], subject: 'Both', html: '<p>Hi</p>', text: 'Hi' });
      expectAccepted(b, 'email', [x, y]);
      expect(b).toMatchObject({ html: '<p>Hi</p>', text: 'Hi' });

      const c = await send('email', { to: [one], subject: 'Html only', html: '<b>only</b>' });
      expect(c).toMatchObject({ to: one, html: '<b>only</b>', text: null, body: null });

      const g = await gql(`mutation($to: [String!]!) { sendEmail(input: { to: $to, subject: "From GraphQL", html: "<i>x</i>" }) { ${MESSAGE_FIELDS} } }`, { to: [x, y] });
      expect(g.body.errors, g.text).toBeUndefined();
      expect(g.body.data.sendEmail).toMatchObject({ channel: 'email', status: 'queued', to: x, recipients: [x, y], content: { subject: 'From GraphQL', html: '<i>x</i>' } });
    });

    it('RCS: text with suggestions, rich_card, carousel (REST) and sendRcs (GraphQL)', async () => {
      const to = phone();
      const a = await send('rcs', { to, body: 'Pick one', suggestions: [{ type: 'reply', text: 'Yes' }, { type: 'action', text: 'Open', url: 'https://example.com' }] });
      expectAccepted(a, 'rcs', to);
      expect(a).toMatchObject({ type: 'text', body: 'Pick one', from: 'sandbox_rcs_agent', suggestions: [{ type: 'reply', text: 'Yes' }, { type: 'action', text: 'Open', url: 'https://example.com' }] });

      const b = await send('rcs', { to, type: 'rich_card', card: { title: 'Sale', description: '50% off', media_url: 'https://example.com/sale.png' } });
      expect(b).toMatchObject({ type: 'rich_card', card: { title: 'Sale', description: '50% off', media_url: 'https://example.com/sale.png' } });

      const cards = [{ title: 'One' }, { title: 'Two', description: 'second' }];
      const c = await send('rcs', { to, type: 'carousel', cards });
      expect(c).toMatchObject({ type: 'carousel', cards });

      const g = await gql(`mutation($to: String!) {
        card: sendRcs(input: { to: $to, type: "rich_card", card: { title: "GQL card", mediaUrl: "https://example.com/c.png" } }) { ${MESSAGE_FIELDS} }
        carousel: sendRcs(input: { to: $to, type: "carousel", cards: [{ title: "A" }, { title: "B" }, { title: "C" }] }) { ${MESSAGE_FIELDS} }
      }`, { to });
      expect(g.body.errors, g.text).toBeUndefined();
      expect(g.body.data.card).toMatchObject({ channel: 'rcs', status: 'queued', content: { type: 'rich_card', card: { title: 'GQL card', media_url: 'https://example.com/c.png' } } });
      expect(g.body.data.carousel.content.cards).toHaveLength(3);
    });

    it('Viber: body, media_url, button (REST) and sendViber (GraphQL)', async () => {
      const to = phone();
      const a = await send('viber', { to, body: 'Viber text' });
      expectAccepted(a, 'viber', to);
      expect(a).toMatchObject({ body: 'Viber text', from: 'SandboxViber' });
      const b = await send('viber', { to, media_url: 'https://example.com/v.jpg' });
      expect(b).toMatchObject({ media_url: 'https://example.com/v.jpg', body: null });
      const c = await send('viber', { to, body: 'Tap', button: { text: 'Open', url: 'https://example.com/go' } });
      expect(c).toMatchObject({ body: 'Tap', button: { text: 'Open', url: 'https://example.com/go' } });

      const g = await gql(`mutation($to: String!) { sendViber(input: { to: $to, body: "GQL", button: { text: "Go", url: "https://example.com" } }) { ${MESSAGE_FIELDS} } }`, { to });
      expect(g.body.errors, g.text).toBeUndefined();
      expect(g.body.data.sendViber).toMatchObject({ channel: 'viber', to, status: 'queued', body: 'GQL', content: { button: { text: 'Go', url: 'https://example.com' } } });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('validation', () => {
    it('MMS only from a number with the mms capability: SENDER_NOT_CONFIGURED otherwise, nothing stored', async () => {
      const o = await t.createOrg('enterprise', 'MMS org');
      const available = await t.rest('GET', '/v1/numbers/available?country=US&area_code=415&type=local&limit=50', { key: o.testKey });
      expect(available.status, available.text).toBe(200);
      const listed = available.body.data as { number: string; capabilities: string[] }[];
      const withoutMms = listed.find((n) => n.capabilities.includes('sms') && !n.capabilities.includes('mms'))!;
      const withMms = listed.find((n) => n.capabilities.includes('mms'))!;
      expect(withoutMms && withMms).toBeTruthy();
      for (const n of [withoutMms, withMms]) {
        const bought = await t.rest('POST', '/v1/numbers', { key: o.testKey, body: { number: n.number } });
        expect(bought.status, bought.text).toBe(201);
      }
      const before = await counts(o.orgId);
      const media = ['https://cdn.example.com/cat.jpg'];
      const refused = expectError(await post('/v1/messages/sms', { to: phone(), from: withoutMms.number, body: 'pic', media_urls: media }, o.testKey), 422, 'SENDER_NOT_CONFIGURED');
      expect(refused.error.details).toMatchObject({ field: 'from', from: withoutMms.number, capability: 'mms' });
      expect(await counts(o.orgId)).toEqual(before);
      // The same number sends plain SMS; a number with mms sends the MMS.
      expect((await post('/v1/messages/sms', { to: phone(), from: withoutMms.number, body: 'text only' }, o.testKey)).status).toBe(201);
      const mms = await post('/v1/messages/sms', { to: phone(), from: withMms.number, body: 'pic', media_urls: media }, o.testKey);
      expect(mms.status, mms.text).toBe(201);
      expect(mms.body.data).toMatchObject({ from: withMms.number });
    });

    it('rejects invalid requests with the spec codes and stores nothing', async () => {
      const v = await t.createOrg('enterprise', 'Validation org');
      const before = await counts(v.orgId);
      const cases: [string, unknown, string, string?][] = [
        ['sms', { to: '415-555-0100', body: 'x' }, 'INVALID_PHONE_NUMBER', 'to'],
        ['sms', { to: '+12', body: 'x' }, 'INVALID_PHONE_NUMBER', 'to'],
        ['whatsapp', { to: 'nope', text: { body: 'x' } }, 'INVALID_PHONE_NUMBER', 'to'],
        ['email', { to: 'not-an-email', subject: 's', text: 'x' }, 'INVALID_EMAIL', 'to'],
        ['email', { to: ['ok@example.com', 'bad@'], subject: 's', text: 'x' }, 'INVALID_EMAIL', 'to.1'],
        ['sms', { to: phone(), body: 'a'.repeat(1601) }, 'MESSAGE_TOO_LONG', 'body'],
        ['rcs', { to: phone(), type: 'carousel', cards: Array.from({ length: 11 }, (_, i) => ({ title: `c${i}` })) }, 'VALIDATION_ERROR', 'cards'],
        ['rcs', { to: phone(), type: 'carousel', cards: [{ title: 'only one' }] }, 'VALIDATION_ERROR', 'cards'],
        ['whatsapp', { to: phone(), media: { type: 'image', url: 'https://example.com/big.jpg', size_bytes: 5 * 1024 * 1024 + 1 } }, 'MEDIA_TOO_LARGE', 'media.size_bytes'],
        ['whatsapp', { to: phone(), type: 'video', media: { url: 'https://example.com/v.mp4', size_bytes: 16 * 1024 * 1024 + 1 } }, 'MEDIA_TOO_LARGE', 'media.size_bytes'],
        // MMS: at most 10 media, and not a file type MMS cannot carry (known from the URL without fetching it).
        ['sms', { to: phone(), body: 'x', media_urls: Array.from({ length: 11 }, (_, i) => `https://cdn.example.com/${i}.jpg`) }, 'VALIDATION_ERROR', 'media_urls'],
        ['sms', { to: phone(), body: 'x', media_urls: ['https://cdn.example.com/a.png', 'https://cdn.example.com/setup.ZIP?sig=1'] }, 'VALIDATION_ERROR', 'media_urls.1'],
        ['sms', { body: 'no recipient' }, 'MISSING_REQUIRED_FIELD', 'to'],
        ['sms', { to: phone() }, 'MISSING_REQUIRED_FIELD', 'body'],
        ['viber', { to: phone() }, 'MISSING_REQUIRED_FIELD', 'body'],
        ['email', { subject: 's', text: 'x' }, 'MISSING_REQUIRED_FIELD', 'to'],
        ['whatsapp', { to: phone() }, 'MISSING_REQUIRED_FIELD', 'text'],
        ['rcs', { to: phone(), type: 'rich_card' }, 'MISSING_REQUIRED_FIELD', 'card'],
        // PostgreSQL cannot store NUL in text or jsonb: refused up front, not a 500 from the database.
        ['sms', { to: phone(), body: 'nul \u0000 inside' }, 'VALIDATION_ERROR', 'body'],
        ['sms', { to: phone(), body: 'ok', metadata: { note: 'a\u0000b' } }, 'VALIDATION_ERROR', 'metadata.note'],
      ];
      for (const [channel, body, code, field] of cases) {
        const res = await post(`/v1/messages/${channel}`, body, v.testKey);
        const err = expectError(res, 422, code);
        if (field !== undefined) expect(err.error.details.field, `${channel} ${code}`).toBe(field);
      }

      // The GraphQL twins answer the same codes.
      const g1 = await gql('mutation { sendSms(input: { to: "12345", body: "x" }) { id } }', undefined, v.testKey);
      expect(expectGqlError(g1, 'INVALID_PHONE_NUMBER').extensions.status).toBe(422);
      const g2 = await gql('mutation($b: String!) { sendSms(input: { to: "+14155550100", body: $b }) { id } }', { b: 'x'.repeat(1601) }, v.testKey);
      expectGqlError(g2, 'MESSAGE_TOO_LONG');
      const g3 = await gql('mutation { sendEmail(input: { to: ["a@b"], subject: "s", text: "x" }) { id } }', undefined, v.testKey);
      expectGqlError(g3, 'INVALID_EMAIL');
      const g4 = await gql('mutation { sendSms(input: { to: "+14155550100" }) { id } }', undefined, v.testKey);
      expect(expectGqlError(g4, 'MISSING_REQUIRED_FIELD').extensions.details?.field).toBe('body');
      const g5 = await gql('mutation($b: String!) { sendSms(input: { to: "+14155550100", body: $b }) { id } }', { b: 'x\u0000y' }, v.testKey);
      expect(expectGqlError(g5, 'VALIDATION_ERROR').extensions.details?.field).toBe('body');

      expect(await counts(v.orgId)).toEqual(before);
      expect(before.messages).toBe(0);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('SMS encoding and segments', () => {
    const cases: [string, string, 'GSM-7' | 'UCS-2', number][] = [
      ['160 GSM-7 characters', 'a'.repeat(160), 'GSM-7', 1],
      ['161 GSM-7 characters', 'a'.repeat(161), 'GSM-7', 2],
      ['306 GSM-7 characters', 'a'.repeat(306), 'GSM-7', 2],
      ['307 GSM-7 characters', 'a'.repeat(307), 'GSM-7', 3],
      ['€ + 158 (160 septets)', `€${'a'.repeat(158)}`, 'GSM-7', 1],
      ['€ + 159 (161 septets)', `€${'a'.repeat(159)}`, 'GSM-7', 2],
      ['70 Arabic letters', 'م'.repeat(70), 'UCS-2', 1],
      ['71 Arabic letters', 'م'.repeat(71), 'UCS-2', 2],
      ['35 emoji (70 UTF-16 units)', '😀'.repeat(35), 'UCS-2', 1],
      ['36 emoji (72 UTF-16 units)', '😀'.repeat(36), 'UCS-2', 2],
      ['1600 characters', 'a'.repeat(1600), 'GSM-7', 11],
    ];
    it.each(cases)('%s', async (_label, body, encoding, segments) => {
      const m = await send('sms', { to: phone(), body });
      expect({ encoding: m.encoding, segments: m.segments }).toEqual({ encoding, segments });
      const got = await getMessage(m.id);
      expect({ encoding: got.encoding, segments: got.segments, body: got.body }).toEqual({ encoding, segments, body });
    });

    it('GraphQL sendSms reports the same encoding and segments', async () => {
      const g = await gql('mutation($b: String!) { sendSms(input: { to: "+14155550100", body: $b }) { encoding segments } }', { b: 'م'.repeat(71) });
      expect(g.body.data.sendSms).toEqual({ encoding: 'UCS-2', segments: 2 });
    });
  });
});
