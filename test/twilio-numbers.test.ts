/**
 * AvailablePhoneNumbers and IncomingPhoneNumbers through the official twilio SDK: search, buy,
 * configure SmsUrl/VoiceUrl, list, release; and another account's number SID answered 404.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { startMessagingApp } from './helpers/messaging.ts';
import { restError, twilioClient } from './helpers/twilio.ts';

describe('Twilio-compatible phone numbers through the twilio SDK', () => {
  let t: TestApp;
  let org: TestOrg;
  const app = useFileApp(startMessagingApp);
  beforeAll(() => { ({ t, org } = app()); });

  it('searches, buys, configures, lists and releases a number', async () => {
    const { client, sid } = twilioClient(t, org);
    const available = await client.availablePhoneNumbers('US').local.list({ areaCode: 415, smsEnabled: true, limit: 3 });
    expect(available.length).toBeGreaterThan(0);
    expect(available[0]).toMatchObject({ isoCountry: 'US', capabilities: { SMS: true } });
    const bought = await client.incomingPhoneNumbers.create({ phoneNumber: available[0]!.phoneNumber, smsUrl: 'https://hooks.example.com/sms' });
    expect(bought.sid).toMatch(/^PN[0-9a-f]{32}$/);
    expect(bought).toMatchObject({ accountSid: sid, phoneNumber: available[0]!.phoneNumber, smsUrl: 'https://hooks.example.com/sms', smsMethod: 'POST', voiceUrl: '' });
    const updated = await client.incomingPhoneNumbers(bought.sid).update({ voiceUrl: 'https://hooks.example.com/voice', smsUrl: '' });
    expect(updated).toMatchObject({ voiceUrl: 'https://hooks.example.com/voice', smsUrl: '' });
    const native = await t.rest('GET', '/v1/numbers?limit=100', { key: org.testKey });
    expect(native.body.data.find((n: { number: string }) => n.number === bought.phoneNumber)).toMatchObject({ voice_webhook_url: 'https://hooks.example.com/voice', sms_webhook_url: null });
    expect((await client.incomingPhoneNumbers.list()).map((n) => n.sid)).toContain(bought.sid);
    expect(await restError(() => client.incomingPhoneNumbers(bought.sid).update({ smsMethod: 'GET' }))).toMatchObject({ status: 400, code: 20001 });
    expect(await client.incomingPhoneNumbers(bought.sid).remove()).toBe(true);
    const after = await t.rest('GET', '/v1/numbers?limit=100', { key: org.testKey });
    expect(after.body.data.find((n: { number: string }) => n.number === bought.phoneNumber)).toBeUndefined();
  });

  it('answers another account\'s number with 404', async () => {
    const other = await t.createOrg('enterprise', 'Other numbers org');
    const theirs = twilioClient(t, other).client;
    const [listing] = await theirs.availablePhoneNumbers('US').local.list({ limit: 1 });
    const bought = await theirs.incomingPhoneNumbers.create({ phoneNumber: listing!.phoneNumber });
    const { client } = twilioClient(t, org);
    expect(await restError(() => client.incomingPhoneNumbers(bought.sid).fetch())).toMatchObject({ status: 404, code: 20404 });
    expect(await restError(() => client.incomingPhoneNumbers(bought.sid).remove())).toMatchObject({ status: 404, code: 20404 });
    expect((await theirs.incomingPhoneNumbers(bought.sid).fetch()).phoneNumber).toBe(listing!.phoneNumber);
  });
});
