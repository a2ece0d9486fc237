/**
 * Verify end to end over HTTP, against the real database with pg-boss workers, the sandbox
 * providers and a manual clock: cross-tenant and live-mode rules of the sandbox code route
 * (live-mode email goes to a local SMTP server, so the live path delivers a real code too) and the
 * GraphQL twins. The other verify-*.test.ts files cover the rest; shared setup is in
 * helpers/verify.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { LIVE_SENDER, phone, email, expectError, eventually, wrong, startVerifyApp, verifyHelpers, type VerificationView, type VerifyApp } from './helpers/verify.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let received: VerifyApp['received'];
const app = useFileApp(startVerifyApp);
beforeAll(() => { ({ t, org, other, received } = app()); });

const { call, gql, send, check, get, sentPayload, codeOf } = verifyHelpers(() => t, () => org);

describe('tenancy and modes', () => {
  it('another organization gets 404 for get, check and the sandbox route, and never lists it', async () => {
    const v = await send({ to: phone(), channel: 'sms' });
    const code = await codeOf(v.id);
    for (const key of [other.testKey, other.liveKey, org.liveKey]) {
      expectError(await call('GET', `/v1/verify/${v.id}`, { key }), 404, 'NOT_FOUND');
      expectError(await check(v.id, code, key), 404, 'NOT_FOUND');
      expectError(await call('GET', `/v1/sandbox/verify/${v.id}/code`, { key }), 404, 'NOT_FOUND');
    }
    const list = await call('GET', '/v1/verify?limit=100', { key: other.testKey });
    expect(list.body.data.map((x: VerificationView) => x.id)).not.toContain(v.id);
    // Still pending and unattempted for its owner.
    expect(await get(v.id)).toMatchObject({ status: 'pending', attempts: 0 });
    const g = await gql('query($id: ID!) { verification(id: $id) { id } }', { id: v.id }, other.testKey);
    expect(g.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });

  it('live mode: the code goes out (real SMTP) but the sandbox route answers 403 FORBIDDEN', async () => {
    const sender = await call('POST', '/v1/messages/senders', { key: org.liveKey, body: { channel: 'email', address: LIVE_SENDER } });
    expect(sender.status, sender.text).toBe(201);
    const to = email('live');
    const v = await send({ to, channel: 'email' }, org.liveKey);
    expect(v).toMatchObject({ channel: 'email', to, status: 'pending' });
    const forbidden = expectError(await call('GET', `/v1/sandbox/verify/${v.id}/code`, { key: org.liveKey }), 403, 'FORBIDDEN');
    expect(forbidden.error.details).toMatchObject({ mode: 'live' });
    // A test key does not see live verifications at all.
    expectError(await call('GET', `/v1/sandbox/verify/${v.id}/code`, { key: org.testKey }), 404, 'NOT_FOUND');

    const mail = await eventually('the live email', async () => received.find((m) => m.rcptTo.includes(to)));
    const code = /Your verification code is: (\d{6})/.exec(mail.raw)?.[1];
    expect(code).toMatch(/^\d{6}$/);
    const msg = await call('GET', `/v1/messages/${v.message_id}`, { key: org.liveKey });
    expect(msg.text).not.toContain(code);
    expect((await check(v.id, code!, org.liveKey)).body.data.status).toBe('approved');
  });
});

describe('GraphQL twins', () => {
  const FIELDS = 'id channel to status valid locale codeLength maxAttempts attempts remainingAttempts expiresAt messageId expiryReason supersededBy approvedAt';

  it('sendVerification, sandboxVerificationCode, checkVerification, verification, node and verifications', async () => {
    const to = phone();
    const sent = await gql(`mutation($to: String!) { sendVerification(input: { to: $to, channel: sms, codeLength: 5, locale: "tr", maxAttempts: 4 }) { ${FIELDS} } }`, { to });
    expect(sent.body.errors, sent.text).toBeUndefined();
    const v = sent.body.data.sendVerification;
    expect(v).toMatchObject({ channel: 'sms', to, status: 'pending', valid: false, locale: 'tr', codeLength: 5, maxAttempts: 4, attempts: 0, remainingAttempts: 4 });
    expect(v.id).toMatch(/^ver_/);

    await sentPayload(v.id);
    const c = await gql('query($id: ID!) { sandboxVerificationCode(id: $id) }', { id: v.id });
    expect(c.body.errors, c.text).toBeUndefined();
    const code = c.body.data.sandboxVerificationCode as string;
    expect(code).toMatch(/^\d{5}$/);

    const rejected = await gql(`mutation($id: ID!, $code: String!) { checkVerification(input: { verificationId: $id, code: $code }) { ${FIELDS} } }`, { id: v.id, code: wrong(code) });
    expect(rejected.body.data.checkVerification).toMatchObject({ status: 'rejected', attempts: 1, remainingAttempts: 3 });
    const approved = await gql(`mutation($id: ID!, $code: String!) { checkVerification(input: { verificationId: $id, code: $code }) { ${FIELDS} } }`, { id: v.id, code });
    expect(approved.body.data.checkVerification).toMatchObject({ status: 'approved', valid: true, attempts: 2 });
    const again = await gql('mutation($id: ID!, $code: String!) { checkVerification(input: { verificationId: $id, code: $code }) { id } }', { id: v.id, code });
    expect(again.body.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', details: { status: 'approved' } });

    const one = await gql(`query($id: ID!) { verification(id: $id) { ${FIELDS} } node(id: $id) { id __typename ... on Verification { status } } }`, { id: v.id });
    expect(one.body.errors, one.text).toBeUndefined();
    expect(one.body.data.verification).toMatchObject({ id: v.id, status: 'approved' });
    expect(one.body.data.node).toEqual({ id: v.id, __typename: 'Verification', status: 'approved' });
    const rest = await get(v.id);
    expect(rest).toMatchObject({ id: v.id, status: 'approved', attempts: 2 });

    const list = await gql('query($to: String!) { verifications(first: 5, status: approved, channel: sms, to: $to) { edges { cursor node { id status } } pageInfo { hasNextPage } } }', { to });
    expect(list.body.errors, list.text).toBeUndefined();
    expect(list.body.data.verifications.edges.map((e: any) => e.node)).toEqual([{ id: v.id, status: 'approved' }]);
    expect(list.text).not.toContain(code);
  });

  it('verifySettings and updateVerifySettings (null resets), with the same validation as REST', async () => {
    const o = await t.createOrg('enterprise', 'GraphQL settings org');
    const read = await gql('{ verifySettings { codeTtlSeconds codeLength maxAttempts appName updatedAt } }', undefined, o.testKey);
    expect(read.body.data.verifySettings).toEqual({ codeTtlSeconds: 600, codeLength: 6, maxAttempts: 5, appName: null, updatedAt: null });
    const upd = await gql('mutation { updateVerifySettings(input: { codeTtlSeconds: 300, appName: "Shop" }) { codeTtlSeconds codeLength appName } }', undefined, o.testKey);
    expect(upd.body.errors, upd.text).toBeUndefined();
    expect(upd.body.data.updateVerifySettings).toEqual({ codeTtlSeconds: 300, codeLength: 6, appName: 'Shop' });
    const reset = await gql('mutation { updateVerifySettings(input: { appName: null }) { codeTtlSeconds appName } }', undefined, o.testKey);
    expect(reset.body.data.updateVerifySettings).toEqual({ codeTtlSeconds: 300, appName: null });
    const bad = await gql('mutation { updateVerifySettings(input: { codeTtlSeconds: 10 }) { codeTtlSeconds } }', undefined, o.testKey);
    expect(bad.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    const rest = await call('GET', '/v1/verify/settings', { key: o.testKey });
    expect(rest.body.data).toMatchObject({ code_ttl_seconds: 300, app_name: null });
  });
});
