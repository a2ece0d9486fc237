/**
 * Verify end to end over HTTP, against the real database with pg-boss workers, the sandbox
 * providers and a manual clock: sending (code length and locale in what the sandbox sent, email,
 * validation), voiding on resend, the abuse limits and WhatsApp. The other verify-*.test.ts files
 * cover the rest; shared setup is in helpers/verify.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { phone, email, expectError, eventually, wrong, startVerifyApp, verifyHelpers, type VerificationView } from './helpers/verify.ts';

let t: TestApp;
let org: TestOrg;
const app = useFileApp(startVerifyApp);
beforeAll(() => { ({ t, org } = app()); });

const { clock, call, send, check, get, sentPayload, codeOf, events } = verifyHelpers(() => t, () => org);

describe('send', () => {
  it('answers 201 with the verification (pending, default length, attempts, 10-minute expiry) and sends an English SMS', async () => {
    const to = phone();
    const v = await send({ to: `${to.slice(0, 2)} ${to.slice(2, 5)} ${to.slice(5)}`, channel: 'sms' });
    expect(v).toMatchObject({
      channel: 'sms', to, status: 'pending', valid: false, locale: 'en', code_length: 6, max_attempts: 5, attempts: 0,
      remaining_attempts: 5, expiry_reason: null, approved_at: null,
    });
    expect(v.id).toMatch(/^ver_/);
    expect(v.verification_id).toBe(v.id);
    expect(v.message_id).toMatch(/^msg_/);
    expect(Date.parse(v.expires_at) - Date.parse(v.created_at)).toBe(600_000);
    expect(JSON.stringify(v)).not.toMatch(/code_hash|"code"/);

    const payload = await sentPayload(v.id);
    expect(payload.body).toMatch(/^Your verification code is: \d{6}\nDo not share this code with anyone\.$/);
    const code = await codeOf(v.id);
    expect(payload.body).toContain(code);

    // The message is messaging's, with usage; its stored body shows the code masked.
    const msg = await call('GET', `/v1/messages/${v.message_id}`);
    expect(msg.status, msg.text).toBe(200);
    expect(msg.body.data).toMatchObject({ channel: 'sms', to, metadata: { verification_id: v.id }, encoding: 'GSM-7', segments: 1 });
    expect(msg.body.data.body).toBe('Your verification code is: ******\nDo not share this code with anyone.');
    expect(msg.text).not.toContain(code);
    const usage = await t.db.query('select context, kind, quantity from usage_entries where resource_id in ($1, $2) order by context', [v.id, v.message_id]);
    expect(usage.rows).toEqual([{ context: 'messaging', kind: 'sms.segment', quantity: 1 }, { context: 'verify', kind: 'verify.verification', quantity: 1 }]);
  });

  it('code length and locale reach the sent text; a region tag is accepted', async () => {
    const v = await send({ to: phone(), channel: 'sms', code_length: 8, locale: 'es-MX', max_attempts: 3 });
    expect(v).toMatchObject({ code_length: 8, locale: 'es', max_attempts: 3, remaining_attempts: 3 });
    const payload = await sentPayload(v.id);
    expect(payload.body).toMatch(/^Tu código de verificación es: \d{8}\nNo compartas este código con nadie\.$/);
    expect(await codeOf(v.id)).toMatch(/^\d{8}$/);

    for (const [locale, pattern] of [['fr', /^Votre code de vérification est : \d{4}\n/], ['de', /^Ihr Bestätigungscode lautet: \d{4}\n/], ['tr', /^Doğrulama kodunuz: \d{4}\n/], ['ar', /^رمز التحقق الخاص بك هو: \d{4}\n/]] as const) {
      const x = await send({ to: phone(), channel: 'sms', code_length: 4, locale });
      expect((await sentPayload(x.id)).body).toMatch(pattern);
    }
  });

  it('validates its input', async () => {
    const cases: [Record<string, unknown>, number, string, string?][] = [
      [{ to: '4155550100', channel: 'sms' }, 422, 'INVALID_PHONE_NUMBER', 'to'],
      [{ to: '+1415', channel: 'whatsapp' }, 422, 'INVALID_PHONE_NUMBER', 'to'],
      [{ to: '+14155550100', channel: 'email' }, 422, 'INVALID_EMAIL', 'to'],
      [{ to: '+14155550100' }, 422, 'MISSING_REQUIRED_FIELD', 'channel'],
      [{ channel: 'sms' }, 422, 'MISSING_REQUIRED_FIELD', 'to'],
      [{ to: '+14155550100', channel: 'voice' }, 422, 'VALIDATION_ERROR', 'channel'],
      [{ to: '+14155550100', channel: 'sms', code_length: 3 }, 422, 'VALIDATION_ERROR', 'code_length'],
      [{ to: '+14155550100', channel: 'sms', code_length: 11 }, 422, 'VALIDATION_ERROR', 'code_length'],
      [{ to: '+14155550100', channel: 'sms', max_attempts: 0 }, 422, 'VALIDATION_ERROR', 'max_attempts'],
      [{ to: '+14155550100', channel: 'sms', max_attempts: 11 }, 422, 'VALIDATION_ERROR', 'max_attempts'],
      [{ to: '+14155550100', channel: 'sms', locale: 'pt' }, 422, 'VALIDATION_ERROR', 'locale'],
    ];
    for (const [body, status, code, field] of cases) {
      const res = await call('POST', '/v1/verify/send', { body });
      const err = expectError(res, status, code);
      if (field) expect(err.error.details.field, JSON.stringify(body)).toBe(field);
    }
    const { rows } = await t.db.query(`select count(*)::int as n from verifications where "to" = '+14155550100'`);
    expect(rows[0].n).toBe(0);
  });

  it('email: a lower-cased address, localized subject, the code in text and html', async () => {
    const to = email('Mixed').toLowerCase();
    const v = await send({ to: to.toUpperCase(), channel: 'email', locale: 'de' });
    expect(v).toMatchObject({ channel: 'email', to, locale: 'de' });
    const payload = await sentPayload(v.id);
    const code = await codeOf(v.id);
    expect(payload.content.subject).toBe('Ihr Bestätigungscode');
    expect(payload.content.text).toContain(code);
    expect(payload.content.html).toContain(code);
    expect(payload.content.subject).not.toContain(code);
    const msg = await call('GET', `/v1/messages/${v.message_id}`);
    expect(msg.body.data).toMatchObject({ channel: 'email', subject: 'Ihr Bestätigungscode' });
    expect(msg.text).not.toContain(code);
    const ok = await check(v.id, code);
    expect(ok.body.data).toMatchObject({ status: 'approved', valid: true });
  });

  it('a magic undeliverable recipient: the verification exists, the sandbox route has no code to show (409)', async () => {
    const v = await send({ to: '+15005550001', channel: 'sms' });
    await eventually('the message to fail', async () => {
      const r = await t.db.query('select status from messages where id = $1', [v.message_id]);
      return r.rows[0]?.status === 'failed' ? true : undefined;
    });
    expectError(await call('GET', `/v1/sandbox/verify/${v.id}/code`), 409, 'CONFLICT');
  });
});

describe('resend voids the previous code', () => {
  it('a new send to the same recipient expires the pending one (reason superseded), whatever the channel', async () => {
    const to = phone();
    const a = await send({ to, channel: 'sms' });
    const aCode = await codeOf(a.id);
    expect((await check(a.id, wrong(aCode))).body.data.status).toBe('rejected');
    const b = await send({ to, channel: 'sms' });
    expect(await get(a.id)).toMatchObject({ status: 'expired', expiry_reason: 'superseded', superseded_by: b.id });
    expect((await check(a.id, aCode)).body.data).toMatchObject({ status: 'expired' });
    const evs = await events(a.id);
    expect(evs.map((e) => e.type)).toEqual(['verification.expired']);
    expect(evs[0]!.data).toMatchObject({ expiry_reason: 'superseded', superseded_by: b.id });

    const bCode = await codeOf(b.id);
    expect((await check(b.id, bCode)).body.data.status).toBe('approved');
    // An approved verification is final: a later send leaves it as it is.
    const c = await send({ to, channel: 'sms' });
    expect(await get(b.id)).toMatchObject({ status: 'approved' });
    expect(await get(c.id)).toMatchObject({ status: 'pending' });
    // Other recipients are untouched.
    const d = await send({ to: phone(), channel: 'sms' });
    expect(await get(c.id)).toMatchObject({ status: 'pending' });
    expect(await get(d.id)).toMatchObject({ status: 'pending' });
  });
});

describe('abuse limits', () => {
  it('the 6th send to one recipient within 10 minutes → 429 with retry_after; after that time it works', async () => {
    const to = phone();
    const sent: VerificationView[] = [];
    for (let i = 0; i < 5; i++) sent.push(await send({ to, channel: 'sms' }));
    const res = await call('POST', '/v1/verify/send', { body: { to, channel: 'sms' } });
    const err = expectError(res, 429, 'RATE_LIMIT_EXCEEDED');
    expect(err.error.details).toMatchObject({ limit: 5, window: '600s', scope: 'recipient' });
    // Until the oldest of the five leaves the 10-minute window.
    expect(err.error.details.retry_after).toBe(Math.ceil((Date.parse(sent[0]!.created_at) + 600_000 - clock().now().getTime()) / 1000));
    expect(res.headers.get('retry-after')).toBe(String(err.error.details.retry_after));
    // Other recipients are not limited by it.
    await send({ to: phone(), channel: 'sms' });
    // The rejected send voided nothing: the last pending code still stands.
    expect(await get(sent[4]!.id)).toMatchObject({ status: 'pending' });

    // Per recipient, whatever the channel; a second before the window frees up it still refuses.
    clock().advance(err.error.details.retry_after * 1000 - 1000);
    expectError(await call('POST', '/v1/verify/send', { body: { to, channel: 'whatsapp' } }), 429, 'RATE_LIMIT_EXCEEDED');
    clock().advance(1000);
    await send({ to, channel: 'sms' });
  });

  it('per organization: over VERIFY_ORGANIZATION_SENDS in the window → 429 (scope organization); other organizations go on', async () => {
    const small = await startTestApp({ env: { VERIFY_ORGANIZATION_SENDS: '3', VERIFY_ORGANIZATION_WINDOW_SECONDS: '3600' } });
    try {
      const [o1, o2] = [await small.createOrg('enterprise'), await small.createOrg('enterprise')];
      const tick = () => (small.clock as ManualClock).advance(1000);
      for (let i = 0; i < 3; i++) {
        tick();
        const r = await small.rest('POST', '/v1/verify/send', { key: o1.testKey, body: { to: phone(), channel: 'sms' } });
        expect(r.status, r.text).toBe(201);
      }
      tick();
      const over = await small.rest('POST', '/v1/verify/send', { key: o1.testKey, body: { to: phone(), channel: 'sms' } });
      const err = expectError(over, 429, 'RATE_LIMIT_EXCEEDED');
      expect(err.error.details).toMatchObject({ limit: 3, window: '3600s', scope: 'organization' });
      expect(err.error.details.retry_after).toBe(3600 - 3);
      // Other organizations go on.
      tick();
      expect((await small.rest('POST', '/v1/verify/send', { key: o2.testKey, body: { to: phone(), channel: 'sms' } })).status).toBe(201);
      (small.clock as ManualClock).advance((3600 - 3) * 1000);
      const later = await small.rest('POST', '/v1/verify/send', { key: o1.testKey, body: { to: phone(), channel: 'sms' } });
      expect(later.status, later.text).toBe(201);
    } finally {
      await small.close();
    }
  });
});

describe('WhatsApp', () => {
  it('without an approved verify_code template and outside a session → 422 TEMPLATE_NOT_APPROVED; inside a session free-form; with the template, the template', async () => {
    const o = await t.createOrg('enterprise', 'WhatsApp org');
    const key = o.testKey;
    const to = phone();
    const refused = expectError(await call('POST', '/v1/verify/send', { key, body: { to, channel: 'whatsapp' } }), 422, 'TEMPLATE_NOT_APPROVED');
    expect(refused.error.details).toMatchObject({ template: 'verify_code', session_open: false });
    expect((await t.db.query('select count(*)::int as n from verifications where organization_id = $1', [o.orgId])).rows[0].n).toBe(0);

    // The recipient wrote: the session is open, the built-in text goes out free-form.
    expect((await call('POST', '/v1/sandbox/inbound', { key, body: { channel: 'whatsapp', from: to, body: 'hi' } })).status).toBe(201);
    const free = await send({ to, channel: 'whatsapp', locale: 'fr' }, key);
    const freePayload = await sentPayload(free.id);
    expect(freePayload.content.type).toBe('text');
    expect(freePayload.body).toMatch(/^Votre code de vérification est : \d{6}\n/);
    const freeCode = await codeOf(free.id, key);
    expect((await check(free.id, freeCode, key)).body.data.status).toBe('approved');

    // The organization's approved verify_code template: used for anyone, session or not.
    const tpl = await call('POST', '/v1/messages/templates', { key, body: { channel: 'whatsapp', name: 'verify_code', content: '{{1}} is your verification code.', language: 'en', category: 'authentication' } });
    expect(tpl.status, tpl.text).toBe(201);
    await eventually('verify_code approved', async () => {
      const r = await t.db.query('select status from message_templates where id = $1', [tpl.body.data.id]);
      return r.rows[0]?.status === 'approved' ? true : undefined;
    });
    const stranger = phone();
    const v = await send({ to: stranger, channel: 'whatsapp' }, key);
    const payload = await sentPayload(v.id);
    const code = await codeOf(v.id, key);
    expect(payload.content.type).toBe('template');
    expect(payload.body).toBe(`${code} is your verification code.`);
    expect(payload.content.template.components[0].parameters[0].text).toBe(code);
    const msg = await call('GET', `/v1/messages/${v.message_id}`, { key });
    expect(msg.body.data).toMatchObject({ type: 'template', body: '****** is your verification code.', template_id: tpl.body.data.id });
    expect(msg.text).not.toContain(code);
    expect((await check(v.id, code, key)).body.data.status).toBe('approved');
  });
});
