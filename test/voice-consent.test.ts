/**
 * Voice consent: a number whose contact opted out of voice calls is never dialled (calls and
 * conference legs answer 422 RECIPIENT_OPTED_OUT, nothing stored); other channels' opt-outs do not
 * stop a call, and opting back in does.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, expectError, VOICE_ENV } from './helpers/voice.ts';

let t: TestApp;
let a: TestOrg;
let from: string;

beforeAll(async () => {
  t = await startTestApp({ clock: systemClock, env: VOICE_ENV });
  a = await t.createOrg('enterprise', 'Consent');
  from = await buyVoiceNumber(t, a.testKey);
});
afterAll(async () => { await t?.close(); });

async function contactWith(phone: string, preferences: Record<string, string>): Promise<string> {
  const c = await t.rest('POST', '/v1/contacts', { key: a.testKey, body: { phone } });
  expect(c.status, c.text).toBe(201);
  const p = await t.rest('PUT', `/v1/contacts/${c.body.data.id}/preferences`, { key: a.testKey, body: preferences });
  expect(p.status, p.text).toBe(200);
  return c.body.data.id;
}
const callsTo = async (to: string) => (await t.db.query(`select count(*)::int as n from calls where organization_id = $1 and "to" = $2`, [a.orgId, to])).rows[0].n;

describe('voice consent', () => {
  it('refuses to call a contact opted out of voice, over REST and GraphQL, storing nothing', async () => {
    const to = '+14155550171';
    const contactId = await contactWith(to, { voice: 'opted_out' });
    const r = await t.rest('POST', '/v1/voice/calls', { key: a.testKey, body: { from, to } });
    expectError(r, 422, 'RECIPIENT_OPTED_OUT', 'to');
    expect(r.body.error.details).toMatchObject({ channel: 'voice', contact_id: contactId });
    const g = await t.gql('mutation($to: String!, $from: String!) { createCall(input: { to: $to, from: $from }) { id } }', { to, from }, { key: a.testKey });
    expect(g.body.errors?.[0]?.extensions?.code).toBe('RECIPIENT_OPTED_OUT');
    expect(await callsTo(to)).toBe(0);
  });

  it('does not dial an opted-out number into a conference either', async () => {
    const to = '+14155550172';
    await contactWith(to, { voice: 'opted_out' });
    const conf = await t.rest('POST', '/v1/voice/conferences', { key: a.testKey, body: { name: 'weekly' } });
    expect(conf.status, conf.text).toBe(201);
    expectError(await t.rest('POST', `/v1/voice/conferences/${conf.body.data.id}/participants`, { key: a.testKey, body: { number: to } }), 422, 'RECIPIENT_OPTED_OUT');
    expect(await callsTo(to)).toBe(0);
  });

  it('concurrent placements read the consent of `to` and the voice numbers in one statement per batch, each caller getting its own answer', async () => {
    const opted = '+14155550174';
    await contactWith(opted, { voice: 'opted_out' });
    const texts: string[] = [];
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const config = args[0] as string | { text?: string };
      texts.push(typeof config === 'string' ? config : config?.text ?? '');
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
    let replies;
    try {
      replies = await Promise.all(['+14155550175', opted, '+14155550176', '+14155550177'].map((to) => t.rest('POST', '/v1/voice/calls', { key: a.testKey, body: { from, to } })));
    } finally {
      pg.Client.prototype.query = query;
    }
    expect(replies.map((r) => r.status)).toEqual([201, 422, 201, 201]);
    expect(replies[1]!.body.error.code).toBe('RECIPIENT_OPTED_OUT');
    const consent = texts.filter((x) => x.includes('from contacts x'));
    const numbers = texts.filter((x) => x.includes('from phone_numbers p'));
    expect(consent.length).toBeGreaterThan(0);
    expect(numbers).toEqual(consent); // the same statements: each reads both
  });

  it('an SMS opt-out does not stop a call; opting back in to voice lets it through', async () => {
    const to = '+14155550173';
    const id = await contactWith(to, { sms: 'opted_out', voice: 'opted_out' });
    expectError(await t.rest('POST', '/v1/voice/calls', { key: a.testKey, body: { from, to } }), 422, 'RECIPIENT_OPTED_OUT');
    const back = await t.rest('PUT', `/v1/contacts/${id}/preferences`, { key: a.testKey, body: { voice: 'opted_in' } });
    expect(back.status, back.text).toBe(200);
    const ok = await t.rest('POST', '/v1/voice/calls', { key: a.testKey, body: { from, to } });
    expect(ok.status, ok.text).toBe(201);
    expect(await callsTo(to)).toBe(1);
  });
});
