/**
 * Messaging end to end over HTTP, against the real database with real pg-boss workers and the
 * sandbox providers: senders, and listing with filters and pagination. The other
 * messaging-*.test.ts files cover the rest; shared setup is in helpers/messaging.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { expectError, expectGqlError } from './helpers/assertions.ts';
import { MAGIC, phone, email, messagingHelpers, type MessageView, startMessagingApp } from './helpers/messaging.ts';

describe('messaging (system clock, pg-boss workers, sandbox providers)', () => {
  let t: TestApp;
  let org: TestOrg;
  const app = useFileApp(startMessagingApp);
  beforeAll(() => { ({ t, org } = app()); });

  const { post, gql, send, waitForStatus, counts } = messagingHelpers(() => t, () => org);

  // -------------------------------------------------------------------------------------------
  describe('senders', () => {
    it('live mode: SMS has no provider (503) and email has no SMTP (503)', async () => {
      const before = await counts(org.orgId);
      const s = expectError(await post('/v1/messages/sms', { to: phone(), body: 'live' }, org.liveKey), 503, 'CHANNEL_UNAVAILABLE');
      expect(s.error.details.channel).toBe('sms');
      expectError(await post('/v1/messages/email', { to: email(), subject: 's', text: 'live' }, org.liveKey), 503, 'CHANNEL_UNAVAILABLE');
      expectError(await post('/v1/messages/whatsapp', { to: phone(), text: { body: 'live' } }, org.liveKey), 503, 'CHANNEL_UNAVAILABLE');
      expectGqlError(await gql('mutation { sendSms(input: { to: "+14155550100", body: "live" }) { id } }', undefined, org.liveKey), 'CHANNEL_UNAVAILABLE');
      expect(await counts(org.orgId)).toEqual(before);
    });

    it('from must be an owned sender; added senders are used, the default when from is omitted', async () => {
      const s = await t.createOrg('enterprise', 'Senders org');
      const k = s.testKey;
      // Fresh test org: the sandbox sender is the default.
      expect((await send('sms', { to: phone(), body: 'x' }, k)).from).toBe(MAGIC.sandboxSms);
      expect((await send('sms', { to: phone(), body: 'x', from: MAGIC.sandboxSms }, k)).from).toBe(MAGIC.sandboxSms);

      const before = await counts(s.orgId);
      const notOwned = phone();
      const e = expectError(await post('/v1/messages/sms', { to: phone(), body: 'x', from: notOwned }, k), 422, 'SENDER_NOT_CONFIGURED');
      expect(e.error.details.field).toBe('from');
      expectError(await post('/v1/messages/email', { to: email(), subject: 's', text: 'x', from: 'someone@example.com' }, k), 422, 'SENDER_NOT_CONFIGURED');
      expect(await counts(s.orgId)).toEqual(before);

      const address = phone();
      const added = await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'sms', address } });
      expect(added.status, added.text).toBe(201);
      expect(added.body.data).toMatchObject({ channel: 'sms', address, is_default: true, mode: 'test' });

      const fromIt = await send('sms', { to: phone(), body: 'x', from: address }, k);
      expect(fromIt.from).toBe(address);
      await waitForStatus(fromIt.id, 'delivered');
      // The added sender is now the default.
      expect((await send('sms', { to: phone(), body: 'x' }, k)).from).toBe(address);
      // A second, explicitly non-default sender does not change that; a new default does.
      const second = phone();
      expect((await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'sms', address: second, is_default: false } })).status).toBe(201);
      expect((await send('sms', { to: phone(), body: 'x' }, k)).from).toBe(address);
      const third = phone();
      expect((await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'sms', address: third, is_default: true } })).status).toBe(201);
      expect((await send('sms', { to: phone(), body: 'x' }, k)).from).toBe(third);

      // Email sender, addressed case-insensitively.
      const mailFrom = email('noreply');
      expect((await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'email', address: mailFrom.toUpperCase() } })).body.data.address).toBe(mailFrom);
      expect((await send('email', { to: email(), subject: 's', text: 'x', from: mailFrom.toUpperCase() }, k)).from).toBe(mailFrom);

      // Duplicates are 409, also through GraphQL.
      expectError(await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'sms', address } }), 409, 'ALREADY_EXISTS');
      expectGqlError(await gql('mutation($a: String!) { addMessageSender(channel: sms, address: $a) { id } }', { a: address }, k), 'ALREADY_EXISTS');
      expectError(await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'sms', address: 'not a phone' } }), 422, 'INVALID_PHONE_NUMBER');

      const list = await t.rest('GET', '/v1/messages/senders?channel=sms', { key: k });
      expect(list.status).toBe(200);
      expect((list.body.data as { address: string; is_default: boolean }[]).map((x) => [x.address, x.is_default])).toEqual([[address, false], [second, false], [third, true]]);

      // Another organization cannot send from these senders.
      expectError(await post('/v1/messages/sms', { to: phone(), body: 'x', from: address }), 422, 'SENDER_NOT_CONFIGURED');

      // Removing a sender: it can no longer be used.
      const removed = await t.rest('DELETE', `/v1/messages/senders/${added.body.data.id}`, { key: k });
      expect(removed.status).toBe(204);
      expectError(await post('/v1/messages/sms', { to: phone(), body: 'x', from: address }, k), 422, 'SENDER_NOT_CONFIGURED');
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('listing', () => {
    let l: TestOrg;
    const a = phone();
    const b = phone();
    const [x, y] = [email('x'), email('y')];
    const ids: Record<string, string> = {};

    beforeAll(async () => {
      l = await t.createOrg('enterprise', 'Listing org');
      const k = l.testKey;
      ids.sms1 = (await send('sms', { to: a, body: 'one' }, k)).id;
      ids.sms2 = (await send('sms', { to: a, body: 'two' }, k)).id;
      ids.sms3 = (await send('sms', { to: b, body: 'three' }, k)).id;
      ids.smsFailed = (await send('sms', { to: MAGIC.invalidRecipient, body: 'bad' }, k)).id;
      ids.email = (await send('email', { to: [x, y], subject: 's', text: 'mail' }, k)).id;
      const inbound = await t.rest('POST', '/v1/sandbox/inbound', { key: k, body: { channel: 'whatsapp', from: a, body: 'hi there' } });
      expect(inbound.status).toBe(201);
      ids.inbound = inbound.body.data.id;
      ids.wa = (await send('whatsapp', { to: a, text: { body: 'reply' } }, k)).id;
      ids.viber = (await send('viber', { to: b, body: 'vb' }, k)).id;
      await waitForStatus(ids.sms1, 'delivered');
      await waitForStatus(ids.sms2, 'delivered');
      await waitForStatus(ids.sms3, 'delivered');
      await waitForStatus(ids.smsFailed, 'failed');
      await waitForStatus(ids.email, 'delivered');
      await waitForStatus(ids.wa, 'read');
      await waitForStatus(ids.viber, 'read');
    });

    const list = async (query: string) => {
      const res = await t.rest<{ data: MessageView[]; meta: { pagination: { cursor: string | null; has_more: boolean } } }>('GET', `/v1/messages${query}`, { key: l.testKey });
      expect(res.status, res.text).toBe(200);
      return res.body;
    };
    const listIds = async (query: string) => (await list(query)).data.map((m) => m.id);
    const sorted = (...names: string[]) => names.map((n) => ids[n]!).sort().reverse();

    it('lists newest first, summaries without body', async () => {
      const page = await list('?limit=100');
      expect(page.data.map((m) => m.id)).toEqual(Object.values(ids).sort().reverse());
      expect(page.meta.pagination.has_more).toBe(false);
      for (const m of page.data) {
        expect(m).not.toHaveProperty('body');
        expect(m).not.toHaveProperty('status_history');
        expect(m).not.toHaveProperty('metadata');
        expect(m.message_id).toBe(m.id);
      }
      const sms1 = page.data.find((m) => m.id === ids.sms1)!;
      expect(sms1).toMatchObject({ channel: 'sms', direction: 'outbound', to: a, status: 'delivered', encoding: 'GSM-7', segments: 1 });
      expect(page.data.find((m) => m.id === ids.email)!.to).toEqual([x, y]);
    });

    it('filters by channel, status, exact recipient and direction', async () => {
      expect(await listIds('?channel=sms')).toEqual(sorted('sms1', 'sms2', 'sms3', 'smsFailed'));
      expect(await listIds('?channel=whatsapp')).toEqual(sorted('inbound', 'wa'));
      expect(await listIds('?status=failed')).toEqual(sorted('smsFailed'));
      expect(await listIds('?status=read')).toEqual(sorted('wa', 'viber'));
      expect(await listIds('?status=delivered&direction=outbound')).toEqual(sorted('sms1', 'sms2', 'sms3', 'email'));
      expect(await listIds('?direction=inbound')).toEqual(sorted('inbound'));
      expect(await listIds(`?to=${encodeURIComponent(a)}`)).toEqual(sorted('sms1', 'sms2', 'wa'));
      // A '+' sent unencoded arrives as a space; it is still the same number.
      expect(await listIds(`?to=${a}`)).toEqual(sorted('sms1', 'sms2', 'wa'));
      expect(await listIds(`?to=${encodeURIComponent(a)}&channel=sms`)).toEqual(sorted('sms1', 'sms2'));
      expect(await listIds(`?to=${encodeURIComponent(b)}`)).toEqual(sorted('sms3', 'viber'));
      expect(await listIds(`?to=${encodeURIComponent(y.toUpperCase())}`)).toEqual(sorted('email'));
      expect(await listIds(`?to=${encodeURIComponent(a.slice(0, -1))}`)).toEqual([]);
      expect(await listIds('?channel=rcs')).toEqual([]);
      expectError(await t.rest('GET', '/v1/messages?channel=fax', { key: l.testKey }), 422, 'VALIDATION_ERROR');
      expectError(await t.rest('GET', '/v1/messages?colour=red', { key: l.testKey }), 400, 'VALIDATION_ERROR');
    });

    it('pages with a cursor, also under a filter', async () => {
      const all = Object.values(ids).sort().reverse();
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let i = 0; i < 10; i++) {
        const page: Awaited<ReturnType<typeof list>> = await list(`?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(page.data.length).toBeLessThanOrEqual(3);
        seen.push(...page.data.map((m) => m.id));
        if (!page.meta.pagination.has_more) break;
        cursor = page.meta.pagination.cursor;
        expect(cursor).toBeTruthy();
      }
      expect(seen).toEqual(all);

      const first = await list('?channel=sms&limit=2');
      expect(first.data.map((m) => m.id)).toEqual(sorted('sms1', 'sms2', 'sms3', 'smsFailed').slice(0, 2));
      expect(first.meta.pagination.has_more).toBe(true);
      const second = await list(`?channel=sms&limit=2&cursor=${encodeURIComponent(first.meta.pagination.cursor!)}`);
      expect(second.data.map((m) => m.id)).toEqual(sorted('sms1', 'sms2', 'sms3', 'smsFailed').slice(2));
      expect(second.meta.pagination.has_more).toBe(false);
      // The cursor is bound to its filters.
      expectError(await t.rest('GET', `/v1/messages?channel=email&limit=2&cursor=${encodeURIComponent(first.meta.pagination.cursor!)}`, { key: l.testKey }), 400, 'INVALID_CURSOR');
    });

    it('GraphQL messages(...) returns the same results', async () => {
      const q = `query($channel: Channel, $status: MessageStatus, $to: String, $direction: MessageDirection, $first: Int, $after: String) {
        messages(channel: $channel, status: $status, to: $to, direction: $direction, first: $first, after: $after) {
          edges { node { id channel status to direction } } pageInfo { hasNextPage endCursor }
        }
      }`;
      const gIds = async (vars: Record<string, unknown>) => {
        const r = await gql(q, { first: 50, ...vars }, l.testKey);
        expect(r.body.errors, r.text).toBeUndefined();
        return (r.body.data.messages.edges as { node: { id: string } }[]).map((e) => e.node.id);
      };
      expect(await gIds({})).toEqual(await listIds('?limit=50'));
      expect(await gIds({ channel: 'sms' })).toEqual(sorted('sms1', 'sms2', 'sms3', 'smsFailed'));
      expect(await gIds({ status: 'failed' })).toEqual(sorted('smsFailed'));
      expect(await gIds({ to: a })).toEqual(sorted('sms1', 'sms2', 'wa'));
      expect(await gIds({ direction: 'inbound' })).toEqual(sorted('inbound'));
      expect(await gIds({ status: 'delivered', direction: 'outbound' })).toEqual(sorted('sms1', 'sms2', 'sms3', 'email'));

      const p1 = await gql(q, { channel: 'sms', first: 2 }, l.testKey);
      expect(p1.body.data.messages.pageInfo.hasNextPage).toBe(true);
      const p2 = await gql(q, { channel: 'sms', first: 2, after: p1.body.data.messages.pageInfo.endCursor }, l.testKey);
      expect([...p1.body.data.messages.edges, ...p2.body.data.messages.edges].map((e: { node: { id: string } }) => e.node.id)).toEqual(sorted('sms1', 'sms2', 'sms3', 'smsFailed'));
      expect(p2.body.data.messages.pageInfo.hasNextPage).toBe(false);
    });

    it('other organizations see none of these messages', async () => {
      const res = await t.rest('GET', `/v1/messages?to=${encodeURIComponent(a)}`, { key: org.testKey });
      expect(res.body.data).toEqual([]);
      expectError(await t.rest('GET', `/v1/messages/${ids.sms1}`, { key: org.testKey }), 404, 'NOT_FOUND');
      expectError(await t.rest('POST', `/v1/messages/${ids.smsFailed}/retry`, { key: org.testKey }), 404, 'NOT_FOUND');
      // Nor does the same organization's live mode.
      const live = await t.rest('GET', '/v1/messages', { key: l.liveKey });
      expect(live.body.data).toEqual([]);
    });
  });
});
