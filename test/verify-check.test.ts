/**
 * Verify end to end over HTTP, against the real database with pg-boss workers, the sandbox
 * providers and a manual clock: every outcome of the check table (approved, rejected, expired,
 * maxed, approved again), two simultaneous correct checks, the sweeper and its events, and that no
 * code can be read from the database (only the sandbox provider's record holds it). The other
 * verify-*.test.ts files cover the rest; shared setup is in helpers/verify.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { openSandboxPayload } from './helpers/sandbox.ts';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { phone, email, expectError, wrong, startVerifyApp, verifyHelpers } from './helpers/verify.ts';

let t: TestApp;
let org: TestOrg;
const app = useFileApp(startVerifyApp);
beforeAll(() => { ({ t, org } = app()); });

const { clock, call, send, check, get, codeOf, events } = verifyHelpers(() => t, () => org);

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
