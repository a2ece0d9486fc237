/**
 * Verify end to end over HTTP, against the real database with pg-boss workers, the sandbox
 * providers and a manual clock: every outcome of the check table (approved, rejected, expired,
 * maxed, approved again), two simultaneous correct checks, voiding on resend, the abuse limits,
 * code length and locale in what the sandbox sent, email and WhatsApp, settings per organization,
 * events, the sweeper, cross-tenant and live-mode rules of the sandbox code route, GraphQL twins,
 * and that no code can be read from the database (only the sandbox provider's record holds it).
 * Live-mode email goes to a local SMTP server, so the live path delivers a real code too.
 */
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../src/platform/clock.ts';
import { openSandboxPayload } from './helpers/sandbox.ts';
import { startTestApp, type CallOptions, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';

type ErrorBody = { error: { code: string; message: string; status: number; details: Record<string, any> } };
type VerificationView = {
  id: string; verification_id: string; channel: string; to: string; status: string; valid: boolean; locale: string;
  code_length: number; max_attempts: number; attempts: number; remaining_attempts: number; expires_at: string;
  message_id: string | null; expiry_reason: string | null; superseded_by: string | null; created_at: string; updated_at: string;
  approved_at: string | null; expired_at: string | null; maxed_at: string | null;
};
type SandboxPayload = { from: string; body: string | null; content: Record<string, any> };

const ENV = {
  SANDBOX_SEND_LATENCY_MS: '0',
  SANDBOX_DELIVERED_AFTER_MS: '50',
  SANDBOX_READ_AFTER_MS: '50',
  SANDBOX_TEMPLATE_REVIEW_MS: '50',
};
const LIVE_SENDER = 'noreply@acme.test';

let smtp: SMTPServer;
const received: { rcptTo: string[]; raw: string }[] = [];
let t: TestApp;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      let raw = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => { raw += chunk; });
      stream.on('end', () => {
        received.push({ rcptTo: session.envelope.rcptTo.map((r) => r.address), raw });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  const { port } = smtp.server.address() as AddressInfo;
  t = await startTestApp({ workers: true, env: { ...ENV, SMTP_URL: `smtp://127.0.0.1:${port}` } });
  org = await t.createOrg('enterprise', 'Verify org');
  other = await t.createOrg('enterprise', 'Other org');
});

afterAll(async () => {
  await t?.close();
  if (smtp) await new Promise<void>((resolve) => smtp.close(() => resolve()));
});

// ---------------------------------------------------------------------------------------------
// helpers

const clock = () => t.clock as ManualClock;
/**
 * The manual clock freezes the per-second burst window (enterprise: 100 requests/s per key): every
 * call moves it 20 ms on, so no key ever queues for a slot that would never come.
 */
async function call<T = any>(method: string, path: string, o: CallOptions = {}): Promise<HttpResponse<T>> {
  clock().advance(20);
  return t.rest<T>(method, path, { key: org.testKey, ...o });
}
async function gql(query: string, variables?: Record<string, unknown>, key = org.testKey) {
  clock().advance(20);
  return t.gql<any>(query, variables, { key });
}

let seq = 0;
const phone = () => `+1415555${String(2000 + ++seq).padStart(4, '0')}`;
const email = (name = 'user') => `${name}.${++seq}@example.com`;

function expectError(res: HttpResponse, status: number, code: string): ErrorBody {
  expect({ status: res.status, code: (res.body as ErrorBody | undefined)?.error?.code }, res.text).toEqual({ status, code });
  return res.body as ErrorBody;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Polls (real time, 50 ms steps, up to 10 s) until `probe` returns a value. */
async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function send(body: Record<string, unknown>, key = org.testKey): Promise<VerificationView> {
  const res = await call<{ data: VerificationView }>('POST', '/v1/verify/send', { key, body });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

async function check(id: string, code: string, key = org.testKey): Promise<HttpResponse<{ data: VerificationView }>> {
  return call('POST', '/v1/verify/check', { key, body: { verification_id: id, code } });
}

async function get(id: string, key = org.testKey): Promise<VerificationView> {
  const res = await call<{ data: VerificationView }>('GET', `/v1/verify/${id}`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

/** What the sandbox provider sent for a verification (waits on the database, not on HTTP). */
async function sentPayload(id: string): Promise<SandboxPayload> {
  return eventually(`the code of ${id} to be sent`, async () => {
    const r = await t.db.query<{ payload: SandboxPayload }>(
      'select s.payload from sandbox_sends s join verifications v on v.message_id = s.idempotency_key where v.id = $1', [id]);
    return r.rows[0] ? openSandboxPayload<SandboxPayload>(r.rows[0].payload) : undefined;
  });
}

/** The code, through the sandbox route, once the sandbox has sent it. */
async function codeOf(id: string, key = org.testKey): Promise<string> {
  await sentPayload(id);
  const res = await call<{ data: { code: string; verification_id: string } }>('GET', `/v1/sandbox/verify/${id}/code`, { key });
  expect(res.status, res.text).toBe(200);
  expect(res.body.data.verification_id).toBe(id);
  return res.body.data.code;
}

async function events(resourceId: string): Promise<{ type: string; sequence: number; data: Record<string, any> }[]> {
  const r = await t.db.query('select type, sequence, data from events where resource_id = $1 order by sequence, id', [resourceId]);
  return r.rows;
}

/** A wrong code of the same length (differs in the last digit). */
const wrong = (code: string) => code.slice(0, -1) + String((Number(code.slice(-1)) + 1) % 10);

// ---------------------------------------------------------------------------------------------

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

describe('check: the state table', () => {
  it('wrong code → rejected (attempts remain); right code → approved; again → 409 CONFLICT', async () => {
    const v = await send({ to: phone(), channel: 'sms' });
    const code = await codeOf(v.id);

    const rejected = await check(v.id, wrong(code));
    expect(rejected.status, rejected.text).toBe(200);
    expect(rejected.body.data).toMatchObject({ id: v.id, status: 'rejected', valid: false, attempts: 1, remaining_attempts: 4 });
    expect((await get(v.id)).status).toBe('rejected');

    const approved = await check(v.id, ` ${code} `);
    expect(approved.status, approved.text).toBe(200);
    expect(approved.body.data).toMatchObject({ id: v.id, status: 'approved', valid: true, attempts: 2, remaining_attempts: 0 });
    expect(approved.body.data.approved_at).not.toBeNull();

    const again = expectError(await check(v.id, code), 409, 'CONFLICT');
    expect(again.error.details).toMatchObject({ verification_id: v.id, status: 'approved' });
    expectError(await check(v.id, wrong(code)), 409, 'CONFLICT');
    expect(await get(v.id)).toMatchObject({ status: 'approved', attempts: 2 });

    const evs = await events(v.id);
    expect(evs.map((e) => e.type)).toEqual(['verification.approved']);
    expect(evs[0]!.data).toMatchObject({ verification_id: v.id, channel: 'sms', status: 'approved', attempts: 2, max_attempts: 5 });
  });

  it('the attempt limit: the last wrong code → maxed, the code is invalidated', async () => {
    const v = await send({ to: phone(), channel: 'sms', max_attempts: 2 });
    const code = await codeOf(v.id);
    expect((await check(v.id, wrong(code))).body.data).toMatchObject({ status: 'rejected', attempts: 1, remaining_attempts: 1 });
    const maxed = await check(v.id, wrong(code));
    expect(maxed.status).toBe(200);
    expect(maxed.body.data).toMatchObject({ status: 'maxed', valid: false, attempts: 2, remaining_attempts: 0 });
    expect(maxed.body.data.maxed_at).not.toBeNull();
    // Invalidated: the right code no longer approves, and nothing more is counted.
    expect((await check(v.id, code)).body.data).toMatchObject({ status: 'maxed', attempts: 2 });
    const row = await t.db.query('select status, code_hash from verifications where id = $1', [v.id]);
    expect(row.rows[0]).toEqual({ status: 'maxed', code_hash: null });
    expect((await events(v.id)).map((e) => e.type)).toEqual(['verification.maxed']);
  });

  it('past the expiry → expired (the right code does not help), once, with its event', async () => {
    const v = await send({ to: phone(), channel: 'sms' });
    const code = await codeOf(v.id);
    clock().set(Date.parse(v.expires_at));
    // Reads show it expired at once, before any check records it.
    expect(await get(v.id)).toMatchObject({ status: 'expired', expiry_reason: 'timeout', remaining_attempts: 0 });
    const expired = await check(v.id, code);
    expect(expired.status, expired.text).toBe(200);
    expect(expired.body.data).toMatchObject({ status: 'expired', valid: false, attempts: 0, expiry_reason: 'timeout' });
    expect((await check(v.id, code)).body.data).toMatchObject({ status: 'expired', attempts: 0 });
    const evs = await events(v.id);
    expect(evs.map((e) => e.type)).toEqual(['verification.expired']);
    expect(evs[0]!.data).toMatchObject({ verification_id: v.id, status: 'expired', expiry_reason: 'timeout' });
  });

  it('a rejected verification still expires', async () => {
    const v = await send({ to: phone(), channel: 'sms' });
    const code = await codeOf(v.id);
    expect((await check(v.id, wrong(code))).body.data.status).toBe('rejected');
    clock().advance(600_000);
    expect((await check(v.id, code)).body.data).toMatchObject({ status: 'expired', attempts: 1 });
  });

  it('two simultaneous correct checks approve once; the other gets 409 CONFLICT', async () => {
    for (let round = 0; round < 5; round++) {
      const v = await send({ to: phone(), channel: 'sms' });
      const code = await codeOf(v.id);
      clock().advance(20);
      const results = await Promise.all([1, 2, 3].map(() => t.rest('POST', '/v1/verify/check', { key: org.testKey, body: { verification_id: v.id, code } })));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses, results.map((r) => r.text).join('\n')).toEqual([200, 409, 409]);
      expect(results.find((r) => r.status === 200)!.body.data).toMatchObject({ status: 'approved', attempts: 1 });
      for (const r of results.filter((x) => x.status === 409)) expect(r.body.error.code).toBe('CONFLICT');
      expect((await events(v.id)).map((e) => e.type)).toEqual(['verification.approved']);
      expect(await get(v.id)).toMatchObject({ status: 'approved', attempts: 1 });
    }
  });

  it('a retried check with the same Idempotency-Key replays the approval instead of a conflict', async () => {
    const w = await send({ to: phone(), channel: 'sms' });
    const wCode = await codeOf(w.id);
    const headers = { 'Idempotency-Key': `check-${w.id}` };
    const a = await call('POST', '/v1/verify/check', { body: { verification_id: w.id, code: wCode }, headers });
    const b = await call('POST', '/v1/verify/check', { body: { verification_id: w.id, code: wCode }, headers });
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(b.body).toEqual(a.body);
  });

  it('validates its input; an unknown id is 404', async () => {
    expectError(await call('POST', '/v1/verify/check', { body: { code: '123456' } }), 422, 'MISSING_REQUIRED_FIELD');
    expectError(await call('POST', '/v1/verify/check', { body: { verification_id: 'ver_x' } }), 422, 'MISSING_REQUIRED_FIELD');
    const numeric = expectError(await call('POST', '/v1/verify/check', { body: { verification_id: 'ver_x', code: 123456 } }), 422, 'VALIDATION_ERROR');
    expect(numeric.error.details.field).toBe('code');
    expectError(await check('ver_01jd0000000000000000000000', '123456'), 404, 'NOT_FOUND');
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

describe('settings', () => {
  it('GET shows the defaults; PUT changes the expiry, length, attempts and app name of later sends; null resets', async () => {
    const o = await t.createOrg('enterprise', 'Settings org');
    const key = o.testKey;
    const initial = await call('GET', '/v1/verify/settings', { key });
    expect(initial.status, initial.text).toBe(200);
    expect(initial.body.data).toEqual({ mode: 'test', code_ttl_seconds: 600, code_length: 6, max_attempts: 5, app_name: null, updated_at: null });

    const put = await call('PUT', '/v1/verify/settings', { key, body: { code_ttl_seconds: 120, code_length: 7, max_attempts: 3, app_name: 'Acme' } });
    expect(put.status, put.text).toBe(200);
    expect(put.body.data).toMatchObject({ mode: 'test', code_ttl_seconds: 120, code_length: 7, max_attempts: 3, app_name: 'Acme' });
    expect(put.body.data.updated_at).not.toBeNull();
    // Per mode: live keeps its defaults.
    expect((await call('GET', '/v1/verify/settings', { key: o.liveKey })).body.data).toMatchObject({ mode: 'live', code_ttl_seconds: 600 });

    const v = await send({ to: phone(), channel: 'sms' }, key);
    expect(v).toMatchObject({ code_length: 7, max_attempts: 3 });
    expect(Date.parse(v.expires_at) - Date.parse(v.created_at)).toBe(120_000);
    expect((await sentPayload(v.id)).body).toMatch(/^Your Acme verification code is: \d{7}\n/);
    // A send's own values win over the settings.
    const w = await send({ to: phone(), channel: 'sms', code_length: 4, max_attempts: 9 }, key);
    expect(w).toMatchObject({ code_length: 4, max_attempts: 9 });

    const code = await codeOf(v.id, key);
    clock().advance(120_000);
    expect((await check(v.id, code, key)).body.data.status).toBe('expired');

    // Fields left out keep their value; null resets to the default.
    const partial = await call('PUT', '/v1/verify/settings', { key, body: { code_ttl_seconds: null, app_name: null } });
    expect(partial.body.data).toMatchObject({ code_ttl_seconds: 600, code_length: 7, max_attempts: 3, app_name: null });

    for (const body of [{ code_ttl_seconds: 59 }, { code_ttl_seconds: 86_401 }, { code_length: 3 }, { max_attempts: 11 }, { app_name: 'x'.repeat(31) }, { app_name: '<script>' }]) {
      expectError(await call('PUT', '/v1/verify/settings', { key, body }), 422, 'VALIDATION_ERROR');
    }
    const audit = await t.db.query(`select details from audit_log_entries where organization_id = $1 and action = 'verify.settings_updated' order by id`, [o.orgId]);
    expect(audit.rows.map((r) => r.details.changes)).toEqual([
      { code_ttl_seconds: 120, code_length: 7, max_attempts: 3, app_name: 'Acme' },
      { code_ttl_seconds: null, app_name: null },
    ]);
    // Only owners and admins change them.
    const dev = await t.createKey(o.orgId, 'developer');
    expectError(await call('PUT', '/v1/verify/settings', { key: dev, body: { code_length: 5 } }), 403, 'INSUFFICIENT_PERMISSIONS');
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

describe('no code is readable from the database', () => {
  it('verifications hold only an HMAC; no events, messages, usage or audit row holds a code; only the sandbox record does', async () => {
    const flows = [
      await send({ to: phone(), channel: 'sms', code_length: 10 }),
      await send({ to: email(), channel: 'email', code_length: 10 }),
      await send({ to: phone(), channel: 'sms', code_length: 10, max_attempts: 1 }),
    ];
    const codes: string[] = [];
    for (const v of flows) codes.push(await codeOf(v.id));
    await check(flows[0]!.id, codes[0]!); // approved
    await check(flows[2]!.id, wrong(codes[2]!)); // maxed
    // (the email one stays pending, so its hash is still there)
    const hashes = await t.db.query('select id, code_hash from verifications where id = any($1) order by id', [flows.map((v) => v.id)]);
    expect(hashes.rows.map((r) => r.code_hash === null)).toEqual([true, false, true]);
    expect(hashes.rows[1].code_hash).toMatch(/^[0-9a-f]{64}$/);

    for (const [i, code] of codes.entries()) {
      for (const table of ['verifications', 'events', 'messages', 'usage_entries', 'audit_log_entries', 'verify_settings', 'webhook_deliveries', 'idempotency_keys', 'pgboss.job']) {
        const r = await t.db.query(`select count(*)::int as n from ${table} x where row_to_json(x)::text like $1`, [`%${code}%`]);
        expect(r.rows[0].n, `${code} in ${table}`).toBe(0);
      }
      // The sandbox provider's record is the recipient's copy: it has it, sealed (so the search above can find codes).
      const sandbox = await t.db.query(`select payload, row_to_json(x)::text as text from sandbox_sends x join verifications v on v.message_id = x.idempotency_key where v.id = $1`, [flows[i]!.id]);
      expect(sandbox.rows[0].text).not.toContain(code);
      expect(JSON.stringify(openSandboxPayload(sandbox.rows[0].payload))).toContain(code);
    }
    // And no API read or list shows one.
    const list = await call('GET', '/v1/verify?limit=100');
    const messages = await call('GET', '/v1/messages?limit=100');
    for (const code of codes) {
      expect(list.text).not.toContain(code);
      expect(messages.text).not.toContain(code);
      for (const v of flows) expect((await call('GET', `/v1/messages/${v.message_id}`)).text).not.toContain(code);
    }
  });
});

describe('listing', () => {
  it('filters by status, channel and recipient and pages with cursors', async () => {
    const o = await t.createOrg('enterprise', 'List org');
    const key = o.testKey;
    const a = await send({ to: phone(), channel: 'sms' }, key);
    const b = await send({ to: email(), channel: 'email' }, key);
    const c = await send({ to: phone(), channel: 'sms', max_attempts: 1 }, key);
    const d = await send({ to: phone(), channel: 'sms', code_length: 4 }, key);
    expect((await check(a.id, await codeOf(a.id, key), key)).body.data.status).toBe('approved');
    expect((await check(c.id, wrong(await codeOf(c.id, key)), key)).body.data.status).toBe('maxed');
    expect((await check(d.id, wrong(await codeOf(d.id, key)), key)).body.data.status).toBe('rejected');

    const ids = async (query: string) => {
      const r = await call('GET', `/v1/verify${query}`, { key });
      expect(r.status, r.text).toBe(200);
      return r.body.data.map((v: VerificationView) => v.id);
    };
    expect(await ids('')).toEqual([d.id, c.id, b.id, a.id]);
    expect(await ids('?status=approved')).toEqual([a.id]);
    expect(await ids('?status=maxed')).toEqual([c.id]);
    expect(await ids('?status=rejected')).toEqual([d.id]);
    expect(await ids('?status=pending')).toEqual([b.id]);
    expect(await ids('?channel=email')).toEqual([b.id]);
    expect(await ids('?channel=sms&status=approved')).toEqual([a.id]);
    expect(await ids(`?to=${encodeURIComponent(b.to.toUpperCase())}`)).toEqual([b.id]);

    const page1 = await call('GET', '/v1/verify?limit=2', { key });
    expect(page1.body.meta.pagination.has_more).toBe(true);
    const page2 = await call('GET', `/v1/verify?limit=2&cursor=${encodeURIComponent(page1.body.meta.pagination.cursor)}`, { key });
    expect([...page1.body.data, ...page2.body.data].map((v: VerificationView) => v.id)).toEqual([d.id, c.id, b.id, a.id]);
    expect(page2.body.meta.pagination.has_more).toBe(false);
    // A cursor is bound to its filters.
    expectError(await call('GET', `/v1/verify?limit=2&status=pending&cursor=${encodeURIComponent(page1.body.meta.pagination.cursor)}`, { key }), 400, 'INVALID_CURSOR');
    expectError(await call('GET', '/v1/verify?status=canceled', { key }), 422, 'VALIDATION_ERROR');

    // As of now: the pending and rejected ones list as expired once their time is up.
    clock().advance(600_000);
    expect(await ids('?status=expired')).toEqual([d.id, b.id]);
    expect(await ids('?status=pending')).toEqual([]);
    expect(await ids('?status=rejected')).toEqual([]);
  });
});

describe('the sweeper', () => {
  it('records expired verifications with their event, once', async () => {
    const o = await t.createOrg('enterprise', 'Sweep org');
    const v = await send({ to: phone(), channel: 'sms' }, o.testKey);
    const code = await codeOf(v.id, o.testKey);
    clock().advance(600_000);
    await t.app.services.verify.expireDue();
    const row = await t.db.query('select status, expiry_reason, code_hash from verifications where id = $1', [v.id]);
    expect(row.rows[0]).toEqual({ status: 'expired', expiry_reason: 'timeout', code_hash: null });
    await t.app.services.verify.expireDue();
    expect((await check(v.id, code, o.testKey)).body.data.status).toBe('expired');
    expect((await events(v.id)).map((e) => e.type)).toEqual(['verification.expired']);
  });
});

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
