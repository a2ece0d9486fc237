/**
 * Messaging end to end over HTTP, against the real database with real pg-boss workers and the
 * sandbox providers: the delivery lifecycle (and its magic recipients), retry and RCS → SMS
 * fallback. The other messaging-*.test.ts files cover the rest; shared setup is in
 * helpers/messaging.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { expectError, expectGqlError } from './helpers/assertions.ts';
import { MAGIC, STATUS_RANK, phone, email, sleep, MESSAGE_FIELDS, messagingHelpers, type MessageView, type StatusChange, startMessagingApp } from './helpers/messaging.ts';

describe('messaging (system clock, pg-boss workers, sandbox providers)', () => {
  let t: TestApp;
  let org: TestOrg;
  const app = useFileApp(startMessagingApp);
  beforeAll(() => { ({ t, org } = app()); });

  const { gql, send, getMessage, waitForStatus, openSession } = messagingHelpers(() => t, () => org);

  // -------------------------------------------------------------------------------------------
  describe('lifecycle', () => {
    it('an SMS is sent, then delivered, with its status history and times', async () => {
      const m = await send('sms', { to: phone(), body: 'lifecycle' });
      await waitForStatus(m.id, 'delivered');
      const got = await getMessage(m.id);
      expect(got.status).toBe('delivered');
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', 'delivered']);
      const times = got.status_history!.map((h) => Date.parse(h.at));
      expect(times.every((x, i) => i === 0 || x >= times[i - 1]!)).toBe(true);
      expect(got.sent_at).not.toBeNull();
      expect(got.delivered_at).not.toBeNull();
      expect(got.read_at).toBeNull();
      expect(got.error_code).toBeNull();
      expect(Date.parse(got.delivered_at!)).toBeGreaterThanOrEqual(Date.parse(got.sent_at!));
      const row = await t.db.query<{ provider: string; provider_message_id: string }>('select provider, provider_message_id from messages where id = $1', [m.id]);
      expect(row.rows[0]).toMatchObject({ provider: 'sandbox', provider_message_id: expect.stringMatching(/^SBX[0-9a-f]{24}$/) });

      // GraphQL sees the same record.
      const g = await gql(`query($id: ID!) { message(id: $id) { ${MESSAGE_FIELDS} } node(id: $id) { ... on Message { status } } }`, { id: m.id });
      expect(g.body.data.message.status).toBe('delivered');
      expect(g.body.data.message.statusHistory.map((h: StatusChange) => h.status)).toEqual(['queued', 'sent', 'delivered']);
      expect(g.body.data.node.status).toBe('delivered');
    });

    it('a WhatsApp message (inside the session) is read', async () => {
      const to = phone();
      await openSession(to);
      const m = await send('whatsapp', { to, text: { body: 'will be read' } });
      await waitForStatus(m.id, 'read');
      const got = await getMessage(m.id);
      expect(got.status).toBe('read');
      expect(got.read_at).not.toBeNull();
      expect(got.delivered_at).not.toBeNull();
      const statuses = got.status_history!.map((h) => h.status);
      expect(statuses.slice(0, 2)).toEqual(['queued', 'sent']);
      expect(statuses.at(-1)).toBe('read');
      // Never backwards: the history only climbs.
      expect(statuses.every((s, i) => i === 0 || STATUS_RANK[s]! > STATUS_RANK[statuses[i - 1]!]!)).toBe(true);
    });

    it('RCS and Viber messages are read too', async () => {
      const to = phone();
      const r = await send('rcs', { to, body: 'rcs' });
      const v = await send('viber', { to, body: 'viber' });
      await waitForStatus(r.id, 'read');
      await waitForStatus(v.id, 'read');
      expect((await getMessage(r.id)).read_at).not.toBeNull();
    });

    it(`${MAGIC.invalidRecipient} fails with INVALID_RECIPIENT without reaching the provider log`, async () => {
      const m = await send('sms', { to: MAGIC.invalidRecipient, body: 'x' });
      await waitForStatus(m.id, 'failed');
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ status: 'failed', error_code: 'INVALID_RECIPIENT', sent_at: null, delivered_at: null });
      expect(got.failed_at).not.toBeNull();
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'failed']);
      const sends = await t.db.query('select 1 from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(sends.rowCount).toBe(0);
    });

    it(`${MAGIC.providerError} is retried, then fails with PROVIDER_ERROR`, async () => {
      const m = await send('sms', { to: MAGIC.providerError, body: 'x' });
      await waitForStatus(m.id, 'failed');
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ status: 'failed', error_code: 'PROVIDER_ERROR' });
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'failed']);
      // MESSAGING_SEND_ATTEMPTS=2: tried twice, the retry due MESSAGING_RETRY_DELAY_SECONDS (1) after the
      // first try; the last attempt failed it and its delivery row went.
      const { rows: [times] } = await t.db.query<{ waited_ms: number }>(
        'select (extract(epoch from failed_at - created_at) * 1000)::float8 as waited_ms from messages where id = $1', [m.id]);
      expect(times!.waited_ms).toBeGreaterThanOrEqual(1000);
      const left = await t.db.query('select 1 from messaging_deliveries where message_id = $1', [m.id]);
      expect(left.rowCount).toBe(0);
    });

    it(`${MAGIC.noReports} stays sent while others are delivered`, async () => {
      const silent = await send('sms', { to: MAGIC.noReports, body: 'x' });
      const control = await send('sms', { to: phone(), body: 'x' });
      await waitForStatus(control.id, 'delivered');
      await waitForStatus(silent.id, 'sent');
      await sleep(700); // longer than the delivery delay plus a report-poll interval
      const got = await getMessage(silent.id);
      expect(got.status).toBe('sent');
      expect(got.delivered_at).toBeNull();
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent']);
    });

    it(`${MAGIC.bounce} fails with BOUNCED after being sent`, async () => {
      const m = await send('email', { to: MAGIC.bounce, subject: 'x', text: 'x' });
      const ok = await send('email', { to: [email(), email()], subject: 'x', text: 'x' });
      await waitForStatus(m.id, 'failed');
      await waitForStatus(ok.id, 'delivered');
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ status: 'failed', error_code: 'BOUNCED' });
      expect(got.sent_at).not.toBeNull();
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', 'failed']);
      expect(got.status_history!.at(-1)!.error_code).toBe('BOUNCED');
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('retry', () => {
    it('a failed message is sent again as a new message; others are a CONFLICT', async () => {
      const failed = await send('sms', { to: MAGIC.invalidRecipient, body: 'retry me', metadata: { n: 1 } });
      const delivered = await send('sms', { to: phone(), body: 'fine' });
      const sent = await send('sms', { to: MAGIC.noReports, body: 'stuck' });
      await waitForStatus(failed.id, 'failed');
      await waitForStatus(delivered.id, 'delivered');
      await waitForStatus(sent.id, 'sent');

      const res = await t.rest<{ data: MessageView }>('POST', `/v1/messages/${failed.id}/retry`, { key: org.testKey });
      expect(res.status, res.text).toBe(201);
      const retried = res.body.data;
      expect(retried.id).not.toBe(failed.id);
      expect(retried).toMatchObject({ original_message_id: failed.id, to: MAGIC.invalidRecipient, body: 'retry me', channel: 'sms', status: 'queued', metadata: { n: 1 } });
      expect(retried.status_history!.map((h) => h.status)).toEqual(['queued']);
      // The retry goes through delivery again (and fails again on this magic number).
      await waitForStatus(retried.id, 'failed');
      // The original is untouched.
      expect((await getMessage(failed.id)).status).toBe('failed');

      expectError(await t.rest('POST', `/v1/messages/${delivered.id}/retry`, { key: org.testKey }), 409, 'CONFLICT');
      expectError(await t.rest('POST', `/v1/messages/${sent.id}/retry`, { key: org.testKey }), 409, 'CONFLICT');
      expectError(await t.rest('POST', '/v1/messages/msg_01jd0000000000000000000000/retry', { key: org.testKey }), 404, 'NOT_FOUND');

      // GraphQL twin.
      const g = await gql(`mutation($id: ID!) { retryMessage(id: $id) { ${MESSAGE_FIELDS} } }`, { id: failed.id });
      expect(g.body.errors, g.text).toBeUndefined();
      expect(g.body.data.retryMessage).toMatchObject({ originalMessageId: failed.id, to: MAGIC.invalidRecipient, body: 'retry me', status: 'queued' });
      expect(g.body.data.retryMessage.id).not.toBe(retried.id);
      expectGqlError(await gql('mutation($id: ID!) { retryMessage(id: $id) { id } }', { id: delivered.id }), 'CONFLICT');
    });

    it('a retried email keeps all its recipients and content', async () => {
      const other = email();
      const failed = await send('email', { to: [MAGIC.bounce, other], subject: 'Sub', html: '<p>x</p>', text: 'x' });
      await waitForStatus(failed.id, 'failed');
      const res = await t.rest<{ data: MessageView }>('POST', `/v1/messages/${failed.id}/retry`, { key: org.testKey });
      expect(res.status, res.text).toBe(201);
      expect(res.body.data).toMatchObject({ to: [MAGIC.bounce, other], subject: 'Sub', html: '<p>x</p>', text: 'x', original_message_id: failed.id });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('RCS fallback', () => {
    it(`${MAGIC.noRcs} with fallback sms is delivered as an SMS and says so`, async () => {
      const m = await send('rcs', { to: MAGIC.noRcs, body: 'Fallback body €', fallback: { channel: 'sms' } });
      expect(m.status).toBe('queued');
      await waitForStatus(m.id, 'delivered');
      const got = await getMessage(m.id);
      expect(got.channel).toBe('rcs');
      expect(got.status).toBe('delivered');
      expect(got.fallback).toMatchObject({ channel: 'sms', reason: 'RCS_NOT_SUPPORTED' });
      expect(Number.isNaN(Date.parse(got.fallback!.at))).toBe(false);
      expect(got.from).toBe(MAGIC.sandboxSms);
      expect(got.encoding).toBe('GSM-7');
      expect(got.segments).toBe(1);
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', 'delivered']);
      // Usage: the RCS message and the fallback's SMS segments.
      const usage = await t.db.query<{ kind: string; quantity: number }>('select kind, quantity from usage_entries where resource_id = $1 order by kind', [m.id]);
      expect(usage.rows).toEqual([{ kind: 'rcs.message', quantity: 1 }, { kind: 'sms.segment', quantity: 1 }]);
    });

    it('a rich card falls back to an SMS with the fallback body', async () => {
      const m = await send('rcs', { to: MAGIC.noRcs, type: 'rich_card', card: { title: 'T' }, fallback: { channel: 'sms', body: 'م'.repeat(71) } });
      await waitForStatus(m.id, 'delivered');
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ body: 'م'.repeat(71), encoding: 'UCS-2', segments: 2, fallback: { channel: 'sms' } });
    });

    it('the SMS fallback respects the recipient\'s SMS opt-out', async () => {
      const other = await t.createOrg('enterprise', 'Opted-out fallback');
      const contact = await t.rest('POST', '/v1/contacts', { key: other.testKey, body: { phone: MAGIC.noRcs } });
      expect(contact.status, contact.text).toBe(201);
      const prefs = await t.rest('PUT', `/v1/contacts/${contact.body.data.id}/preferences`, { key: other.testKey, body: { sms: 'opted_out' } });
      expect(prefs.status, prefs.text).toBe(200);
      // RCS itself is allowed (no RCS opt-out); the fallback SMS is not.
      const m = await send('rcs', { to: MAGIC.noRcs, body: 'fallback to an opted-out number', fallback: { channel: 'sms' } }, other.testKey);
      await waitForStatus(m.id, 'failed');
      const got = await getMessage(m.id, other.testKey);
      expect(got).toMatchObject({ status: 'failed', error_code: 'RECIPIENT_OPTED_OUT' });
      expect(got.fallback).toBeUndefined();
      const sent = await t.db.query('select 1 from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(sent.rowCount).toBe(0);
    });

    it(`${MAGIC.noRcs} without fallback fails with RCS_NOT_SUPPORTED`, async () => {
      const m = await send('rcs', { to: MAGIC.noRcs, body: 'no fallback' });
      await waitForStatus(m.id, 'failed');
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ status: 'failed', error_code: 'RCS_NOT_SUPPORTED' });
      expect(got.fallback).toBeUndefined();
    });
  });
});
