/**
 * The Twilio-compatible surface with the official twilio SDK as the client: Messages (create, list
 * with paging, fetch), Basic credentials (account SID + auth token, API key SID + secret), and bad
 * input answered with Twilio's codes. Sandbox providers, pg-boss workers, the real database.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import twilio from 'twilio';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { MAGIC, phone, startMessagingApp } from './helpers/messaging.ts';
import { RedirectingClient, restError, twilioClient } from './helpers/twilio.ts';
import { toSid } from '../src/twilio/sids.ts';

describe('Twilio-compatible Messages through the twilio SDK', () => {
  let t: TestApp;
  let org: TestOrg;
  const app = useFileApp(startMessagingApp);
  beforeAll(() => { ({ t, org } = app()); });

  it('creates a message and fetches it in Twilio\'s shape', async () => {
    const { client, sid } = twilioClient(t, org);
    const to = phone();
    const created = await client.messages.create({ to, from: MAGIC.sandboxSms, body: 'Hello from the SDK' });
    expect(created.sid).toMatch(/^SM[0-9a-f]{32}$/);
    expect(created).toMatchObject({ accountSid: sid, to, from: MAGIC.sandboxSms, body: 'Hello from the SDK', status: 'queued', direction: 'outbound-api', apiVersion: '2010-04-01', numSegments: '1' });
    expect(created.dateCreated).toBeInstanceOf(Date);
    expect(Number.isNaN(created.dateCreated.getTime())).toBe(false);
    expect(created.uri).toBe(`/2010-04-01/Accounts/${sid}/Messages/${created.sid}.json`);

    // The same message on the native surface: the SID is the native id's.
    const native = await t.rest('GET', '/v1/messages?limit=100&to=' + encodeURIComponent(to), { key: org.testKey });
    expect(native.body.data).toHaveLength(1);
    expect(toSid(native.body.data[0].id)).toBe(created.sid);

    let fetched = await client.messages(created.sid).fetch();
    for (let i = 0; i < 100 && fetched.status !== 'delivered'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      fetched = await client.messages(created.sid).fetch();
    }
    expect(fetched.status).toBe('delivered');
    expect(fetched.dateSent).toBeInstanceOf(Date);
  });

  it('lists with the To filter across pages (next_page_uri)', async () => {
    const { client } = twilioClient(t, org);
    const to = phone();
    const sids: string[] = [];
    for (let i = 0; i < 5; i++) sids.push((await client.messages.create({ to, body: `m${i}` })).sid);
    const page = await client.messages.page({ to, pageSize: 2 });
    expect(page.instances).toHaveLength(2);
    expect(page.nextPageUrl).toBeTruthy();
    const all = await client.messages.list({ to, pageSize: 2 });
    expect(all.map((m) => m.sid)).toEqual([...sids].reverse());
    const limited = await client.messages.list({ to, limit: 3 });
    expect(limited).toHaveLength(3);
  });

  it('authenticates an API key SID and secret with the account SID as an option', async () => {
    const key = await t.createKey(org.orgId, 'developer', 'test');
    const keys = await t.rest('GET', '/v1/settings/api-keys?limit=100', { key: org.testKey });
    const row = keys.body.data.find((k: { prefix?: string; key_prefix?: string; id: string }) => key.startsWith(String(k.prefix ?? k.key_prefix ?? '\u0000')));
    const { sid } = twilioClient(t, org);
    const keyId = row?.id as string;
    const client = twilio(toSid(keyId), key, { accountSid: sid, httpClient: new RedirectingClient(t.baseUrl) });
    const m = await client.messages.create({ to: phone(), body: 'with an API key' });
    expect(m.accountSid).toBe(sid);
    // The key's SID with another key's secret is refused.
    const other = twilio(toSid(keyId), org.testKey, { accountSid: sid, httpClient: new RedirectingClient(t.baseUrl) });
    expect(await restError(() => other.messages.list({ limit: 1 }))).toMatchObject({ status: 401, code: 20003 });
  });

  it('refuses wrong credentials with 20003 and another account\'s SID with 404', async () => {
    const { sid } = twilioClient(t, org);
    const wrong = twilio(sid, 'svc_test_sk_' + 'x'.repeat(40), { httpClient: new RedirectingClient(t.baseUrl) });
    expect(await restError(() => wrong.messages.list({ limit: 1 }))).toMatchObject({ status: 401, code: 20003 });
    // The live key under the test account SID: the SID names another account than the key's.
    const crossed = twilio(sid, org.liveKey, { httpClient: new RedirectingClient(t.baseUrl) });
    expect(await restError(() => crossed.messages.list({ limit: 1 }))).toMatchObject({ status: 401, code: 20003 });

    const other = await t.createOrg('enterprise', 'Other org');
    const theirs = await twilioClient(t, other).client.messages.create({ to: phone(), body: 'theirs' });
    const { client } = twilioClient(t, org);
    expect(await restError(() => client.messages(theirs.sid).fetch())).toMatchObject({ status: 404, code: 20404 });
    // Their account SID in the path with our credentials.
    const res = await fetch(`${t.baseUrl}/2010-04-01/Accounts/${twilioClient(t, other).sid}/Messages.json`, {
      headers: { Authorization: `Basic ${Buffer.from(`${sid}:${org.testKey}`).toString('base64')}` },
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: 20404, status: 404 });
  });

  it('answers bad input with Twilio\'s codes and sends nothing', async () => {
    const { client, sid } = twilioClient(t, org);
    const count = async () => Number((await t.db.query('select count(*) from messages where organization_id = $1', [org.orgId])).rows[0].count);
    const before = await count();
    expect(await restError(() => client.messages.create({ to: 'not a number', body: 'x' }))).toMatchObject({ status: 400, code: 21211 });
    expect(await restError(() => client.messages.create({ to: phone() } as never))).toMatchObject({ status: 400, code: 21602 });
    expect(await restError(() => client.messages.create({ to: phone(), body: 'x', from: phone() }))).toMatchObject({ status: 400, code: 21606 });
    const auth = { Authorization: `Basic ${Buffer.from(`${sid}:${org.testKey}`).toString('base64')}` };
    const url = `${t.baseUrl}/2010-04-01/Accounts/${sid}/Messages.json`;
    const json = await fetch(url, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ To: phone(), Body: 'x' }) });
    expect(json.status).toBe(400);
    expect(await json.json()).toMatchObject({ code: 20001, status: 400, more_info: 'https://www.twilio.com/docs/errors/20001' });
    const unknown = await fetch(url, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ To: phone(), Body: 'x', Colour: 'blue' }).toString() });
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ code: 20001, message: 'Unknown parameter: Colour' });
    // A malformed percent-encoding in the path (found by the fuzz harness) is 20001, not 500.
    const malformed = await fetch(`${t.baseUrl}/2010-04-01/Accounts/${sid}/Messages/%ED%A0%80.json`, { headers: auth });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ code: 20001, status: 400 });
    expect(await count()).toBe(before);
  });

  it('refuses an opted-out recipient with 21610', async () => {
    const { client } = twilioClient(t, org);
    const to = phone();
    const inbound = await t.rest('POST', '/v1/sandbox/inbound', { key: org.testKey, body: { channel: 'sms', from: to, to: MAGIC.sandboxSms, body: 'STOP' } });
    expect(inbound.status, inbound.text).toBe(201);
    let err;
    for (let i = 0; i < 50; i++) {
      err = await restError(() => client.messages.create({ to, body: 'after stop' })).catch(() => undefined);
      if (err) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(err).toMatchObject({ status: 400, code: 21610 });
  });
});
