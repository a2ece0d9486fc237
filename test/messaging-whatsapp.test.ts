/**
 * Messaging end to end over HTTP, against the real database with real pg-boss workers and the
 * sandbox providers: WhatsApp template and 24-hour session rules; the 24-hour window runs on a
 * second app with a manual clock. The other messaging-*.test.ts files cover the rest; shared setup
 * is in helpers/messaging.ts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { openSandboxPayload } from './helpers/sandbox.ts';
import { startTestApp, type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { expectError, expectGqlError, eventually } from './helpers/assertions.ts';
import { phone, messagingHelpers, startMessagingApp } from './helpers/messaging.ts';

describe('messaging (system clock, pg-boss workers, sandbox providers)', () => {
  let t: TestApp;
  let org: TestOrg;
  const app = useFileApp(startMessagingApp);
  beforeAll(() => { ({ t, org } = app()); });

  const { post, gql, send, waitForStatus, counts, createApprovedTemplate } = messagingHelpers(() => t, () => org);

  // -------------------------------------------------------------------------------------------
  describe('WhatsApp rules', () => {
    it('free-form text or media without an inbound message is TEMPLATE_NOT_APPROVED', async () => {
      const before = await counts(org.orgId);
      expectError(await post('/v1/messages/whatsapp', { to: phone(), text: { body: 'cold' } }), 422, 'TEMPLATE_NOT_APPROVED');
      expectError(await post('/v1/messages/whatsapp', { to: phone(), media: { type: 'image', url: 'https://example.com/a.jpg' } }), 422, 'TEMPLATE_NOT_APPROVED');
      expectGqlError(await gql('mutation { sendWhatsApp(input: { to: "+14155550100", text: { body: "cold" } }) { id } }'), 'TEMPLATE_NOT_APPROVED');
      // An inbound on another channel does not open the WhatsApp session.
      const to = phone();
      expect((await t.rest('POST', '/v1/sandbox/inbound', { key: org.testKey, body: { channel: 'sms', from: to, body: 'hi' } })).status).toBe(201);
      expectError(await post('/v1/messages/whatsapp', { to, text: { body: 'still cold' } }), 422, 'TEMPLATE_NOT_APPROVED');
      const after = await counts(org.orgId);
      expect(after.messages).toBe(before.messages + 1); // just the inbound SMS
    });

    it('draft and rejected templates are TEMPLATE_NOT_APPROVED; an approved one renders its parameters', async () => {
      const draft = await t.rest('POST', '/v1/messages/templates', { key: org.testKey, body: { channel: 'whatsapp', name: 'draft_note', content: 'Draft {{1}}', status: 'draft' } });
      expect(draft.status, draft.text).toBe(201);
      expect(draft.body.data.status).toBe('draft');

      const rejected = await t.rest('POST', '/v1/messages/templates', { key: org.testKey, body: { channel: 'whatsapp', name: 'reject_promo', content: 'Promo {{1}}' } });
      expect(rejected.status, rejected.text).toBe(201);
      await eventually('reject_promo rejected', async () => {
        const r = await t.db.query<{ status: string }>('select status from message_templates where id = $1', [rejected.body.data.id]);
        return r.rows[0]?.status === 'rejected' ? true : undefined;
      });
      const rejectedView = await t.rest('GET', `/v1/messages/templates/${rejected.body.data.id}`, { key: org.testKey });
      expect(rejectedView.body.data).toMatchObject({ status: 'rejected', rejection_reason: expect.any(String) });

      const approvedId = await createApprovedTemplate('order_shipped', 'Hi {{1}}, order {{2}} has shipped');

      const to = phone();
      const params = [{ type: 'body', parameters: [{ type: 'text', text: 'Ana' }, { type: 'text', text: 'A-17' }] }];
      const d = expectError(await post('/v1/messages/whatsapp', { to, template: { name: 'draft_note', language: 'en', components: params } }), 422, 'TEMPLATE_NOT_APPROVED');
      expect(d.error.details.status).toBe('draft');
      const r = expectError(await post('/v1/messages/whatsapp', { to, template: { name: 'reject_promo', language: 'en', components: params } }), 422, 'TEMPLATE_NOT_APPROVED');
      expect(r.error.details.status).toBe('rejected');

      const m = await send('whatsapp', { to, template: { name: 'order_shipped', language: 'en', components: params } });
      expect(m).toMatchObject({ body: 'Hi Ana, order A-17 has shipped', template_id: approvedId, type: 'template', status: 'queued' });
      await waitForStatus(m.id, 'read');
      const sent = await t.db.query<{ payload: { body: string } }>('select payload from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(openSandboxPayload(sent.rows[0]!.payload).body).toBe('Hi Ana, order A-17 has shipped');

      // A missing parameter is INVALID_TEMPLATE.
      expectError(await post('/v1/messages/whatsapp', { to, template: { name: 'order_shipped', language: 'en', components: [{ type: 'body', parameters: [{ type: 'text', text: 'only one' }] }] } }), 422, 'INVALID_TEMPLATE');

      // A failed template message is retried with the same template and parameters.
      const failed = await send('whatsapp', { to: '+15005550001', template: { name: 'order_shipped', language: 'en', components: params } });
      await waitForStatus(failed.id, 'failed');
      const retried = await t.rest('POST', `/v1/messages/${failed.id}/retry`, { key: org.testKey });
      expect(retried.status, retried.text).toBe(201);
      expect(retried.body.data).toMatchObject({ original_message_id: failed.id, body: 'Hi Ana, order A-17 has shipped', template_id: approvedId, status: 'queued' });

      // Listed among the WhatsApp templates with their statuses.
      const list = await t.rest('GET', '/v1/whatsapp/templates?limit=100', { key: org.testKey });
      const byName = Object.fromEntries((list.body.data as { name: string; status: string }[]).map((x) => [x.name, x.status]));
      expect(byName).toMatchObject({ draft_note: 'draft', reject_promo: 'rejected', order_shipped: 'approved' });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('WhatsApp 24-hour window and queued messages (manual clock, no workers)', () => {
    let m: TestApp;
    let clock: ManualClock;
    let o: TestOrg;

    beforeAll(async () => {
      m = await startTestApp();
      clock = m.clock as ManualClock;
      o = await m.createOrg('enterprise', 'Manual clock org');
    });
    afterAll(async () => { await m?.close(); });
    beforeEach(() => { clock.advance(1_000); });

    const HOUR = 3600_000;
    const sendWa = (to: string, body = 'free-form') => m.rest('POST', '/v1/messages/whatsapp', { key: o.testKey, body: { to, text: { body } } });

    it('free-form is allowed within 24 h of the last inbound message and refused after', async () => {
      const customer = phone();
      const stranger = phone();
      const inbound = await m.rest('POST', '/v1/sandbox/inbound', { key: o.testKey, body: { channel: 'whatsapp', from: customer, body: 'hi' } });
      expect(inbound.status, inbound.text).toBe(201);
      expect(inbound.body.data).toMatchObject({ direction: 'inbound', channel: 'whatsapp', from: customer, status: 'delivered' });

      clock.advance(23 * HOUR);
      const ok = await sendWa(customer);
      expect(ok.status, ok.text).toBe(201);
      expect(ok.body.data.status).toBe('queued');
      expectError(await sendWa(stranger), 422, 'TEMPLATE_NOT_APPROVED');

      clock.advance(HOUR - 2_000);
      expect((await sendWa(customer)).status).toBe(201); // just under 24 h

      clock.advance(HOUR + 2_000); // T + 25 h
      const late = expectError(await sendWa(customer), 422, 'TEMPLATE_NOT_APPROVED');
      expect(late.error.details.session_open).toBe(false);
      expectError(await m.rest('POST', '/v1/messages/whatsapp', { key: o.testKey, body: { to: customer, media: { type: 'image', url: 'https://example.com/a.jpg' } } }), 422, 'TEMPLATE_NOT_APPROVED');
      expectGqlError(await m.gql('mutation($to: String!) { sendWhatsApp(input: { to: $to, text: { body: "late" } }) { id } }', { to: customer }, { key: o.testKey }), 'TEMPLATE_NOT_APPROVED');

      // A new inbound message reopens the window.
      clock.advance(1_000);
      expect((await m.gql('mutation($from: String!) { simulateInboundMessage(channel: whatsapp, from: $from, body: "back") { id direction } }', { from: customer }, { key: o.testKey })).body.data.simulateInboundMessage.direction).toBe('inbound');
      clock.advance(1_000);
      expect((await sendWa(customer)).status).toBe(201);
    });

    it('a template still pending approval is TEMPLATE_NOT_APPROVED', async () => {
      const tpl = await m.rest('POST', '/v1/messages/templates', { key: o.testKey, body: { channel: 'whatsapp', name: 'pending_one', content: 'Hello {{1}}' } });
      expect(tpl.status, tpl.text).toBe(201);
      expect(tpl.body.data.status).toBe('pending_approval');
      const res = expectError(await m.rest('POST', '/v1/messages/whatsapp', {
        key: o.testKey, body: { to: phone(), template: { name: 'pending_one', language: 'en', components: [{ type: 'body', parameters: [{ type: 'text', text: 'x' }] }] } },
      }), 422, 'TEMPLATE_NOT_APPROVED');
      expect(res.error.details.status).toBe('pending_approval');
    });

    it('retrying a queued message is a CONFLICT', async () => {
      const q = await m.rest('POST', '/v1/messages/sms', { key: o.testKey, body: { to: phone(), body: 'stays queued' } });
      expect(q.status).toBe(201);
      const got = await m.rest('GET', `/v1/messages/${q.body.data.id}`, { key: o.testKey });
      expect(got.body.data.status).toBe('queued');
      const c = expectError(await m.rest('POST', `/v1/messages/${q.body.data.id}/retry`, { key: o.testKey }), 409, 'CONFLICT');
      expect(c.error.details.status).toBe('queued');
      expectGqlError(await m.gql('mutation($id: ID!) { retryMessage(id: $id) { id } }', { id: q.body.data.id }, { key: o.testKey }), 'CONFLICT');
    });
  });
});
