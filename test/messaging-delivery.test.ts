/**
 * Messaging end to end over HTTP, against the real database with real pg-boss workers and the
 * sandbox providers: durability (usage, events, a delivery job that runs twice) and provider
 * callbacks. The other messaging-*.test.ts files cover the rest; shared setup is in
 * helpers/messaging.ts.
 */
import { createHmac } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { systemScope } from '../src/platform/auth/scope.ts';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { expectError, eventually } from './helpers/assertions.ts';
import { MAGIC, phone, email, messagingHelpers, type MessageView, startMessagingApp } from './helpers/messaging.ts';

describe('messaging (system clock, pg-boss workers, sandbox providers)', () => {
  let t: TestApp;
  let org: TestOrg;
  const app = useFileApp(startMessagingApp);
  beforeAll(() => { ({ t, org } = app()); });

  const { post, send, getMessage, waitForStatus } = messagingHelpers(() => t, () => org);

  // -------------------------------------------------------------------------------------------
  describe('durability and idempotency', () => {
    it('each accepted message has exactly one usage entry and one message.queued event', async () => {
      const sms = await send('sms', { to: phone(), body: 'a'.repeat(200) });
      expect(sms.segments).toBe(2);
      const mail = await send('email', { to: [email(), email(), email()], subject: 's', text: 'x' });
      const viber = await send('viber', { to: phone(), body: 'v' });
      const expected: [string, string, number][] = [[sms.id, 'sms.segment', 2], [mail.id, 'email.recipient', 3], [viber.id, 'viber.message', 1]];
      for (const [id, kind, quantity] of expected) {
        const usage = await t.db.query('select kind, quantity, mode, context, organization_id from usage_entries where resource_id = $1', [id]);
        expect(usage.rows).toEqual([{ kind, quantity, mode: 'test', context: 'messaging', organization_id: org.orgId }]);
        const queued = await t.db.query(`select sequence from events where resource_id = $1 and type = 'message.queued'`, [id]);
        expect(queued.rows).toEqual([{ sequence: 1 }]);
      }
      // Delivery does not add usage.
      await waitForStatus(sms.id, 'delivered');
      const after = await t.db.query('select count(*)::int as n from usage_entries where resource_id = $1', [sms.id]);
      expect(after.rows[0].n).toBe(1);
    });

    it('concurrent sends are group-committed: each has its row, event, usage entry and delivery row (no job), and is delivered', async () => {
      const recipients = Array.from({ length: 40 }, () => phone());
      const accepted = await Promise.all(recipients.map((to, i) => send('sms', { to, body: `batch ${i}` })));
      const ids = accepted.map((m) => m.id);
      expect(new Set(ids).size).toBe(40);
      const counts = await t.db.query(
        `select (select count(*)::int from messages where id = any($1)) as messages,
                (select count(*)::int from events where resource_id = any($1) and type = 'message.queued') as events,
                (select count(*)::int from usage_entries where resource_id = any($1)) as usage,
                (select count(*)::int from pgboss.job where name = 'messaging.deliver' and data->'data'->>'messageId' = any($1)) as jobs`,
        [ids],
      );
      expect(counts.rows[0]).toEqual({ messages: 40, events: 40, usage: 40, jobs: 0 });
      for (const [i, m] of accepted.entries()) expect(m.to).toBe(recipients[i]);
      for (const id of ids) await waitForStatus(id, 'delivered');
      // Each was a row of the delivery queue, deleted once its send was recorded.
      await eventually('the delivery rows to be deleted', async () => {
        const left = await t.db.query('select count(*)::int as n from messaging_deliveries where message_id = any($1)', [ids]);
        return left.rows[0].n === 0 ? true : undefined;
      });
    });

    it('a delivery row committed with its message (workers stopped) is claimed and sent once the workers run', async () => {
      await t.app.services.deliveries.stop();
      let id: string;
      try {
        id = (await send('sms', { to: phone(), body: 'queued row' })).id;
        const { rows } = await t.db.query('select organization_id, mode, plan, paced, attempts, due_at <= now() as due from messaging_deliveries where message_id = $1', [id]);
        expect(rows).toEqual([{ organization_id: org.orgId, mode: 'test', plan: 'enterprise', paced: false, attempts: 0, due: true }]);
        expect((await getMessage(id)).status).toBe('queued');
      } finally {
        await t.app.services.deliveries.start();
      }
      await waitForStatus(id, 'delivered');
      expect((await t.db.query('select 1 from messaging_deliveries where message_id = $1', [id])).rowCount).toBe(0);
    });

    it('a delivery row queued again for a sent message sends nothing more', async () => {
      const m = await send('sms', { to: phone(), body: 'once (row)' });
      await waitForStatus(m.id, 'delivered');
      await t.db.query(`insert into messaging_deliveries (message_id, organization_id, mode, plan) values ($1, $2, 'test', 'enterprise')`, [m.id, org.orgId]);
      await eventually('the repeated delivery row to be settled', async () => {
        const left = await t.db.query('select 1 from messaging_deliveries where message_id = $1', [m.id]);
        return left.rowCount === 0 ? true : undefined;
      });
      const sends = await t.db.query('select provider_message_id from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(sends.rowCount).toBe(1);
      const events = await t.db.query(`select count(*)::int as n from events where resource_id = $1 and type = 'message.sent'`, [m.id]);
      expect(events.rows[0].n).toBe(1);
    });

    it('a delivery job enqueued before the delivery queue still drains, and running again sends nothing more', async () => {
      const m = await send('sms', { to: phone(), body: 'once' });
      await waitForStatus(m.id, 'delivered');
      const scope = systemScope(org.orgId, 'test', 'enterprise', 'req_test_redeliver');
      const jobId = await t.app.jobs.enqueue('messaging.deliver', { messageId: m.id }, { scope });
      expect(jobId).toBeTruthy();
      await eventually('second delivery job to complete', async () => {
        const job = await t.app.jobs.boss.getJobById('messaging.deliver', jobId!);
        return job?.state === 'completed' ? true : undefined;
      });
      const sends = await t.db.query('select provider_message_id from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(sends.rowCount).toBe(1);
      const got = await getMessage(m.id);
      expect(got.status).toBe('delivered');
      expect(got.status_history!.filter((h) => h.status === 'sent')).toHaveLength(1);
      const events = await t.db.query(`select count(*)::int as n from events where resource_id = $1 and type = 'message.sent'`, [m.id]);
      expect(events.rows[0].n).toBe(1);
    });

    it("the sandbox's reports are rows of its timeline, not jobs: scheduled once per message and status, deleted once applied", async () => {
      const m = await send('viber', { to: phone(), body: 'timeline' });
      await waitForStatus(m.id, 'read');
      // The applied rows go in the statement after the apply.
      await eventually('the applied reports to be deleted', async () => {
        const left = await t.db.query('select 1 from messaging_sandbox_reports where message_id = $1', [m.id]);
        return left.rowCount === 0 ? true : undefined;
      });
      const jobs = await t.db.query(`select count(*)::int as n from pgboss.job where name = 'messaging.status-report' and data->'data'->>'messageId' = $1`, [m.id]);
      expect(jobs.rows[0].n).toBe(0);
      // A report stored again (a delivery job that ran twice) and claimed by an instance that died:
      // due again once its lease lapses, and applying it changes nothing.
      const { rows: [sent] } = await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id]);
      await t.db.query(
        `insert into messaging_sandbox_reports (message_id, status, due_at, attempts, report)
         values ($1, 'delivered', now() + interval '1 second', 1, jsonb_build_object('messageId', $1::text, 'providerMessageId', $2::text, 'status', 'delivered'))`,
        [m.id, sent!.provider_message_id]);
      await eventually('the leased report to be applied and deleted', async () => {
        const left = await t.db.query('select 1 from messaging_sandbox_reports where message_id = $1', [m.id]);
        return left.rowCount === 0 ? true : undefined;
      });
      const got = await getMessage(m.id);
      expect(got.status).toBe('read');
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', 'delivered', 'read']);
      const events = await t.db.query(`select count(*)::int as n from events where resource_id = $1 and type = 'message.delivered'`, [m.id]);
      expect(events.rows[0].n).toBe(1);
    });

    it('a report that comes before the send is recorded stays on the timeline and applies once the send is', async () => {
      // The provider's send recorded, the worker's `sent` update not yet committed: the message still queued.
      const m = await send('sms', { to: MAGIC.noReports, body: 'early' });
      await waitForStatus(m.id, 'sent');
      const { rows: [sent] } = await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id]);
      await t.db.query(
        `update messages set status = 'queued', provider = null, provider_message_id = null, sent_at = null,
           status_history = jsonb_build_array(status_history->0) where id = $1`, [m.id]);
      await t.db.query(
        `insert into messaging_sandbox_reports (message_id, status, report)
         values ($1, 'delivered', jsonb_build_object('messageId', $1::text, 'providerMessageId', $2::text, 'status', 'delivered'))`,
        [m.id, sent!.provider_message_id]);
      await eventually('the early report to be tried and put back', async () => {
        const { rows } = await t.db.query<{ attempts: number }>('select attempts from messaging_sandbox_reports where message_id = $1', [m.id]);
        return rows[0] && rows[0].attempts >= 1 ? true : undefined;
      });
      expect((await getMessage(m.id)).status).toBe('queued');
      // The send is recorded now (the delivery's update commits): the report applies on its next turn.
      await t.db.query(`insert into messaging_deliveries (message_id, organization_id, mode, plan) values ($1, $2, 'test', 'enterprise')`, [m.id, org.orgId]);
      await waitForStatus(m.id, 'delivered');
      await eventually('the applied report to be deleted', async () => {
        const left = await t.db.query('select 1 from messaging_sandbox_reports where message_id = $1', [m.id]);
        return left.rowCount === 0 ? true : undefined;
      });
    });

    it('a send repeated after a lost acknowledgement reuses the provider id (message id is the idempotency key)', async () => {
      // Simulates a worker that crashed after the provider accepted the send but before recording it:
      // its claimed row (attempt 1) is due again once the lease lapses.
      const m = await send('sms', { to: MAGIC.noReports, body: 'crash' });
      await waitForStatus(m.id, 'sent');
      const first = await t.db.query<{ provider_message_id: string }>('select provider_message_id from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(first.rowCount).toBe(1);
      await t.db.query(
        `update messages set status = 'queued', provider = null, provider_message_id = null, sent_at = null,
           status_history = jsonb_build_array(status_history->0) where id = $1`, [m.id]);
      await t.db.query(
        `insert into messaging_deliveries (message_id, organization_id, mode, plan, attempts, due_at) values ($1, $2, 'test', 'enterprise', 1, now() + interval '1 second')`, [m.id, org.orgId]);
      await new Promise((r) => setTimeout(r, 500));
      expect((await getMessage(m.id)).status).toBe('queued');
      await waitForStatus(m.id, 'sent');
      const sends = await t.db.query<{ provider_message_id: string }>('select provider_message_id from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(sends.rows).toEqual(first.rows);
      const row = await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id]);
      expect(row.rows[0]!.provider_message_id).toBe(first.rows[0]!.provider_message_id);
    });

    it('events of a delivered message are queued, sent, delivered with increasing sequence', async () => {
      const m = await send('sms', { to: phone(), body: 'events' });
      await waitForStatus(m.id, 'delivered');
      const rows = await t.db.query<{ type: string; sequence: number; data: Record<string, unknown>; organization_id: string; mode: string }>(
        'select type, sequence, data, organization_id, mode from events where resource_id = $1 order by sequence, id', [m.id]);
      expect(rows.rows.map((r) => r.type)).toEqual(['message.queued', 'message.sent', 'message.delivered']);
      const seqs = rows.rows.map((r) => r.sequence);
      expect(seqs.every((s, i) => i === 0 || s > seqs[i - 1]!)).toBe(true);
      for (const r of rows.rows) {
        expect(r).toMatchObject({ organization_id: org.orgId, mode: 'test' });
        expect(r.data).toMatchObject({ message_id: m.id, channel: 'sms', direction: 'outbound' });
      }
      expect(rows.rows.map((r) => r.data.status)).toEqual(['queued', 'sent', 'delivered']);

      const failed = await send('sms', { to: MAGIC.invalidRecipient, body: 'x' });
      await waitForStatus(failed.id, 'failed');
      const f = await t.db.query<{ type: string; data: Record<string, unknown> }>('select type, data from events where resource_id = $1 order by sequence', [failed.id]);
      expect(f.rows.map((r) => r.type)).toEqual(['message.queued', 'message.failed']);
      expect(f.rows[1]!.data.error_code).toBe('INVALID_RECIPIENT');
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('provider callbacks', () => {
    const sign = (raw: string, secret = t.config.providerSecret('sandbox')) => `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;
    const callback = (payload: unknown, signature?: string, provider = 'sandbox') => {
      const raw = JSON.stringify(payload);
      return t.rest('POST', `/v1/providers/${provider}/callbacks`, {
        rawBody: raw, headers: { 'Content-Type': 'application/json', ...(signature === undefined ? { 'X-Provider-Signature': sign(raw) } : signature ? { 'X-Provider-Signature': signature } : {}) },
      });
    };

    it('status reports move a message forward, never backwards or out of delivered', async () => {
      const m = await send('sms', { to: MAGIC.noReports, body: 'callback' });
      await waitForStatus(m.id, 'sent');
      const row = await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id]);
      const pmid = row.rows[0]!.provider_message_id;
      expect(pmid).toMatch(/^SBX/);

      const delivered = await callback({ type: 'status', provider_message_id: pmid, status: 'delivered' });
      expect(delivered.status, delivered.text).toBe(200);
      expect(delivered.body.data).toEqual({ accepted: true, applied: true });
      const got = await getMessage(m.id);
      expect(got.status).toBe('delivered');
      expect(got.delivered_at).not.toBeNull();
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', 'delivered']);

      const late = await callback({ type: 'status', provider_message_id: pmid, status: 'sent' });
      expect(late.status).toBe(200);
      expect(late.body.data.applied).toBe(false);
      const failed = await callback({ type: 'status', provider_message_id: pmid, status: 'failed', error_code: 'CARRIER_REJECTED' });
      expect(failed.body.data.applied).toBe(false);
      const read = await callback({ type: 'status', provider_message_id: pmid, status: 'read' });
      expect(read.body.data.applied).toBe(false); // SMS has no reads

      const after = await getMessage(m.id);
      expect(after).toMatchObject({ status: 'delivered', error_code: null, failed_at: null });
      expect(after.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', 'delivered']);

      const unknown = await callback({ type: 'status', provider_message_id: 'SBX000000000000000000000000', status: 'delivered' });
      expect(unknown.status).toBe(200);
      expect(unknown.body.data.applied).toBe(false);
    });

    it('concurrent duplicate and racing reports apply once each, in order: one history entry and one event per status', async () => {
      const m = await send('sms', { to: MAGIC.noReports, body: 'racing reports' });
      await waitForStatus(m.id, 'sent');
      const pmid = (await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id])).rows[0]!.provider_message_id;
      const reports = await Promise.all([
        ...Array.from({ length: 6 }, () => callback({ type: 'status', provider_message_id: pmid, status: 'delivered' })),
        ...Array.from({ length: 3 }, () => callback({ type: 'status', provider_message_id: pmid, status: 'failed', error_code: 'CARRIER_REJECTED' })),
      ]);
      expect(reports.every((r) => r.status === 200)).toBe(true);
      // Exactly one report won: either delivered or failed, never both, never twice.
      expect(reports.filter((r) => r.body.data.applied === true)).toHaveLength(1);
      const got = await getMessage(m.id);
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', got.status]);
      const events = await t.db.query<{ type: string; sequence: number }>('select type, sequence from events where resource_id = $1 order by sequence', [m.id]);
      expect(events.rows).toEqual([{ type: 'message.queued', sequence: 1 }, { type: 'message.sent', sequence: 2 }, { type: `message.${got.status}`, sequence: 3 }]);
    });

    it('a failed report on a sent message fails it with the provider code', async () => {
      const m = await send('sms', { to: MAGIC.noReports, body: 'to fail' });
      await waitForStatus(m.id, 'sent');
      const pmid = (await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id])).rows[0]!.provider_message_id;
      const res = await callback({ type: 'status', provider_message_id: pmid, status: 'failed', error_code: 'CARRIER_REJECTED' });
      expect(res.body.data.applied).toBe(true);
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ status: 'failed', error_code: 'CARRIER_REJECTED' });
      // Out of failed: nothing moves it.
      expect((await callback({ type: 'status', provider_message_id: pmid, status: 'delivered' })).body.data.applied).toBe(false);
      expect((await getMessage(m.id)).status).toBe('failed');
    });

    it('rejects a missing or wrong signature with 401 UNAUTHORIZED', async () => {
      const m = await send('sms', { to: MAGIC.noReports, body: 'sig' });
      await waitForStatus(m.id, 'sent');
      const pmid = (await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id])).rows[0]!.provider_message_id;
      const payload = { type: 'status', provider_message_id: pmid, status: 'delivered' };
      expectError(await callback(payload, `sha256=${'0'.repeat(64)}`), 401, 'UNAUTHORIZED');
      expectError(await callback(payload, ''), 401, 'UNAUTHORIZED');
      expectError(await callback(payload, sign(JSON.stringify(payload), 'some-other-secret')), 401, 'UNAUTHORIZED');
      expectError(await callback(payload, sign(JSON.stringify({ ...payload, status: 'sent' }))), 401, 'UNAUTHORIZED');
      // Signed with the sandbox's secret but posted as another provider.
      expectError(await callback(payload, sign(JSON.stringify(payload)), 'othercarrier'), 401, 'UNAUTHORIZED');
      expect((await getMessage(m.id)).status).toBe('sent');
    });

    it('an inbound message goes to the organization that owns the receiving sender', async () => {
      const owner = await t.createOrg('enterprise', 'Inbound owner');
      const outsider = await t.createOrg('enterprise', 'Inbound outsider');
      const address = phone();
      expect((await t.rest('POST', '/v1/messages/senders', { key: owner.testKey, body: { channel: 'sms', address } })).status).toBe(201);
      const from = phone();
      const res = await callback({ type: 'inbound', channel: 'sms', from, to: address, body: 'STOP' });
      expect(res.status, res.text).toBe(200);
      const id = res.body.data.message_id as string;
      expect(id).toMatch(/^msg_/);

      const listed = await t.rest<{ data: MessageView[] }>('GET', '/v1/messages?direction=inbound', { key: owner.testKey });
      expect(listed.body.data.map((m) => m.id)).toEqual([id]);
      expect(listed.body.data[0]).toMatchObject({ direction: 'inbound', channel: 'sms', from, to: address, status: 'delivered' });
      expect((await getMessage(id, owner.testKey)).body).toBe('STOP');

      expect((await t.rest('GET', '/v1/messages?direction=inbound', { key: outsider.testKey })).body.data).toEqual([]);
      expect((await t.rest('GET', '/v1/messages?direction=inbound', { key: owner.liveKey })).body.data).toEqual([]);
      expectError(await t.rest('GET', `/v1/messages/${id}`, { key: outsider.testKey }), 404, 'NOT_FOUND');

      // No organization owns the address: 404, nothing stored.
      const before = await t.db.query('select count(*)::int as n from messages');
      expectError(await callback({ type: 'inbound', channel: 'sms', from, to: phone(), body: 'x' }), 404, 'NOT_FOUND');
      expect((await t.db.query('select count(*)::int as n from messages')).rows).toEqual(before.rows);
    });

    it('an inbound WhatsApp callback opens the session window', async () => {
      const owner = await t.createOrg('enterprise', 'WA inbound owner');
      const address = phone();
      expect((await t.rest('POST', '/v1/messages/senders', { key: owner.testKey, body: { channel: 'whatsapp', address } })).status).toBe(201);
      const customer = phone();
      expectError(await post('/v1/messages/whatsapp', { to: customer, text: { body: 'too early' } }, owner.testKey), 422, 'TEMPLATE_NOT_APPROVED');
      expect((await callback({ type: 'inbound', channel: 'whatsapp', from: customer, to: address, body: 'hi' })).status).toBe(200);
      const m = await send('whatsapp', { to: customer, text: { body: 'now allowed' } }, owner.testKey);
      expect(m.from).toBe(address);
    });
  });
});
