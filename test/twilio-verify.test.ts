/**
 * Verify v2 through the official twilio SDK: the account's one service (its verify settings),
 * a verification started and checked (by SID and by To), a wrong code, another account's service.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { phone, startMessagingApp } from './helpers/messaging.ts';
import { restError, twilioClient } from './helpers/twilio.ts';
import { fromSid } from '../src/twilio/sids.ts';

describe('Twilio-compatible Verify v2 through the twilio SDK', () => {
  let t: TestApp;
  let org: TestOrg;
  const app = useFileApp(startMessagingApp);
  beforeAll(() => { ({ t, org } = app()); });

  const sandboxCode = async (sid: string): Promise<string> => {
    let res = await t.rest('GET', `/v1/sandbox/verify/${fromSid(sid, 'ver')}/code`, { key: org.testKey });
    // 409 while the code's message is still queued.
    for (let i = 0; i < 100 && res.status === 409; i++) {
      await new Promise((r) => setTimeout(r, 100));
      res = await t.rest('GET', `/v1/sandbox/verify/${fromSid(sid, 'ver')}/code`, { key: org.testKey });
    }
    expect(res.status, res.text).toBe(200);
    return res.body.data.code;
  };

  it('lists and fetches the account\'s service, and renames it', async () => {
    const { client, sid } = twilioClient(t, org);
    const services = await client.verify.v2.services.list();
    expect(services).toHaveLength(1);
    const service = services[0]!;
    expect(service.sid).toBe(`VA${sid.slice(2)}`);
    expect(service.accountSid).toBe(sid);
    const updated = await client.verify.v2.services(service.sid).update({ friendlyName: 'Acme', codeLength: 8 });
    expect(updated).toMatchObject({ friendlyName: 'Acme', codeLength: 8 });
    expect((await client.verify.v2.services(service.sid).fetch()).friendlyName).toBe('Acme');
    const other = await t.createOrg('enterprise', 'Other verify org');
    const theirs = `VA${twilioClient(t, other).sid.slice(2)}`;
    expect(await restError(() => client.verify.v2.services(theirs).fetch())).toMatchObject({ status: 404, code: 20404 });
  });

  it('starts a verification and checks it by To; a wrong code leaves it pending', async () => {
    const { client, sid } = twilioClient(t, org);
    const service = `VA${sid.slice(2)}`;
    const to = phone();
    const v = await client.verify.v2.services(service).verifications.create({ to, channel: 'sms' });
    expect(v).toMatchObject({ to, channel: 'sms', status: 'pending', valid: false, serviceSid: service, accountSid: sid });
    expect(v.sid).toMatch(/^VE[0-9a-f]{32}$/);
    const code = await sandboxCode(v.sid);
    const wrong = await client.verify.v2.services(service).verificationChecks.create({ to, code: code === '00000000' ? '11111111' : '00000000' });
    expect(wrong).toMatchObject({ status: 'pending', valid: false, sid: v.sid });
    const right = await client.verify.v2.services(service).verificationChecks.create({ to, code });
    expect(right).toMatchObject({ status: 'approved', valid: true, sid: v.sid });
    expect((await client.verify.v2.services(service).verifications(v.sid).fetch()).status).toBe('approved');
  });

  it('checks by VerificationSid, and answers bad input with Twilio codes', async () => {
    const { client, sid } = twilioClient(t, org);
    const service = `VA${sid.slice(2)}`;
    const v = await client.verify.v2.services(service).verifications.create({ to: phone(), channel: 'sms' });
    const ok = await client.verify.v2.services(service).verificationChecks.create({ verificationSid: v.sid, code: await sandboxCode(v.sid) });
    expect(ok.status).toBe('approved');
    expect(await restError(() => client.verify.v2.services(service).verifications.create({ to: phone(), channel: 'pigeon' }))).toMatchObject({ status: 400 });
    expect(await restError(() => client.verify.v2.services(service).verificationChecks.create({ to: phone(), code: '123456' }))).toMatchObject({ status: 404, code: 20404 });
    expect(await restError(() => client.verify.v2.services(service).verificationChecks.create({ code: '123456' }))).toMatchObject({ status: 400, code: 60200 });
  });
});
