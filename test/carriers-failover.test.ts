/**
 * Failover between two SMSCs under load (README "Carriers"): routes to a Net::SMPP SMSC first and a
 * `smpp`-package SMSC second, live messages sent through the API, the first SMSC killed (SIGKILL)
 * while messages are in its window. Every message is accepted by exactly one SMSC, never by both
 * nor twice by one; the message records the connector that carried it; everything the second one
 * took is delivered by its receipts.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { decodeText, readSegment } from '../src/providers/messaging/smpp/encoding.ts';
import { eventually } from './helpers/assertions.ts';
import { startSmsc, type Smsc, type Submit } from './helpers/smsc.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

const SENDER = '+447911123900';
const MESSAGES = 80;
let t: TestApp;
let org: TestOrg;
let first: Smsc;
let second: Smsc;

beforeAll(async () => {
  [first, second] = await Promise.all([startSmsc('net-smpp'), startSmsc('node-smpp')]);
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: { MESSAGING_CARRIER_SEND_TIMEOUT_MS: '1500', MESSAGING_CARRIER_RECONNECT_MAX_MS: '500', MESSAGING_DELIVERY_CONCURRENCY: '16', MESSAGING_RETRY_DELAY_SECONDS: '1' },
  });
  org = await t.createOrg('enterprise', 'Failover');
  expect((await t.rest('POST', '/v1/messages/senders', { key: org.liveKey, body: { channel: 'sms', address: SENDER } })).status).toBe(201);
});

afterAll(async () => {
  await t?.close();
  await Promise.all([first?.close(), second?.close()]);
});

const textOf = (s: Submit) => decodeText(s.data_coding, readSegment(s.esm_class, Buffer.from(s.short_message, 'hex')).payload);

async function connector(name: string, smsc: Smsc, priority: number): Promise<string> {
  const c = await t.rest('POST', '/v1/messages/connectors', {
    key: org.liveKey, body: { name, kind: 'smpp', smpp: { host: '127.0.0.1', port: smsc.port, system_id: smsc.systemId, password: smsc.password, window: 8 } },
  });
  expect(c.status, c.text).toBe(201);
  const id = c.body.data.id as string;
  await eventually(`${name} connected`, async () => ((await t.rest('GET', `/v1/messages/connectors/${id}`, { key: org.liveKey })).body.data.status.state === 'connected' ? true : undefined));
  expect((await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: id, prefix: '+44', priority } })).status).toBe(201);
  return id;
}

it('moves every message to the second SMSC once the first dies, none lost and none sent twice', { timeout: 120_000 }, async () => {
  const viaFirst = await connector('first', first, 1);
  const viaSecond = await connector('second', second, 2);

  const sent: { id: string; body: string }[] = [];
  const sending = (async () => {
    for (let batch = 0; batch < MESSAGES / 10; batch++) {
      const results = await Promise.all(Array.from({ length: 10 }, async (_, i) => {
        const n = batch * 10 + i;
        const body = `failover message ${n}`;
        const r = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: `+4479111240${String(n).padStart(2, '0')}`, body } });
        expect(r.status, r.text).toBe(201);
        return { id: r.body.data.id as string, body };
      }));
      sent.push(...results);
    }
  })();
  // Under load: once the first SMSC took a share of the messages, it dies with its connections.
  await first.waitFor('20 submits on the first SMSC', (e) => (e.filter((x) => x.event === 'submit').length >= 20 ? true : undefined), 60_000);
  await first.kill();
  await sending;

  const finals = await eventually('every message sent or delivered', async () => {
    const views = await Promise.all(sent.map(async (m) => (await t.rest('GET', `/v1/messages/${m.id}`, { key: org.liveKey })).body.data));
    return views.every((v) => v.status === 'delivered' || (v.status === 'sent' && v.connector_id === viaFirst)) ? views : undefined;
  }, 60_000);

  const byFirst = first.submits().map(textOf);
  const bySecond = second.submits().map(textOf);
  expect(new Set(byFirst).size).toBe(byFirst.length);
  expect(new Set(bySecond).size).toBe(bySecond.length);
  expect(byFirst.filter((b) => bySecond.includes(b))).toEqual([]);
  expect([...byFirst, ...bySecond].sort()).toEqual(sent.map((m) => m.body).sort());
  expect(bySecond.length).toBeGreaterThan(0);
  expect(byFirst.length).toBeGreaterThanOrEqual(20);

  // Each message names the connector of the SMSC that took it; the second one's are all delivered.
  const bodyOf = new Map(sent.map((m) => [m.id, m.body]));
  for (const v of finals) {
    const body = bodyOf.get(v.id)!;
    expect(v.connector_id, body).toBe(byFirst.includes(body) ? viaFirst : viaSecond);
    if (v.connector_id === viaSecond) expect(v.status, body).toBe('delivered');
  }
  const { rows } = await t.db.query(`select connector_id, state, count(*)::int as n from carrier_sends where message_id = any($1) group by 1, 2 order by 1`, [sent.map((m) => m.id)]);
  expect(rows).toEqual([
    { connector_id: viaFirst, state: 'sent', n: byFirst.length },
    { connector_id: viaSecond, state: 'sent', n: bySecond.length },
  ].sort((a, b) => a.connector_id.localeCompare(b.connector_id)));
  const down = await t.rest('GET', `/v1/messages/connectors/${viaFirst}`, { key: org.liveKey });
  expect(down.body.data.status.state).toBe('down');
});
