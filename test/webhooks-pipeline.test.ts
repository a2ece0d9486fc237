/**
 * Webhooks' delivery pipeline: batches, cached secrets, concurrent relays, the hand-off to the local
 * worker, and a slow endpoint that never delays the others (test/helpers/webhooks.ts for the receiver).
 */

import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/platform/logger.ts';
import type { ClaimedDelivery, LocalDeliveryWorker } from '../src/modules/webhooks/webhooks.service.ts';
import { Sealer } from '../src/platform/crypto/seal.ts';
import { EventRelay } from '../src/platform/events/relay.ts';
import { newId } from '../src/platform/ids.ts';
import type { TestApp } from './helpers/testApp.ts';
import { createEndpoint, expectSigned, hmacHex, type Receiver, sendSms, subscribed, uniq, useWebhookApps, waitFor, wsClient } from './helpers/webhooks.ts';

const apps = useWebhookApps({ rt: true, strict: true });
let rt: TestApp;
let strict: TestApp;
let recv: Receiver;
beforeAll(() => { ({ rt, strict, recv } = apps); });
const clients = apps.clients;

// ---------------------------------------------------------------------------------------------

describe('the delivery pipeline: batches, cached secrets, concurrent relays', () => {
  it('signs the next delivery with a changed signing secret at once (the decrypted-secret cache never serves a stale one)', async () => {
    const org = await rt.createOrg('enterprise', 'Secret change org');
    const key = org.testKey;
    const path = `/secret/${uniq()}`;
    const ep = await createEndpoint(rt, key, { url: recv.url(path), events: ['message.queued'] });
    const m1 = await sendSms(rt, key);
    const first = await waitFor('the first delivery', () => recv.hitsAt(path).find((h) => h.json.data.message_id === m1.id));
    expectSigned(first, ep.signing_secret);
    // A new secret, sealed the way the service seals it (what a rotation writes).
    const rotated = `whsec_${randomBytes(32).toString('base64')}`;
    await rt.db.query('update webhook_endpoints set signing_secret_sealed = $1 where id = $2',
      [new Sealer(rt.config.appSecret, 'webhook-signing-secret-v1').seal(rotated), ep.id]);
    const m2 = await sendSms(rt, key);
    const second = await waitFor('the next delivery', () => recv.hitsAt(path).find((h) => h.json.data.message_id === m2.id));
    expectSigned(second, rotated);
    expect(second.headers['x-service-signature']).not.toBe(hmacHex(ep.signing_secret, second.body));
    const test = await rt.rest('POST', `/v1/webhooks/${ep.id}/test`, { key });
    expect(test.body.data.success).toBe(true);
    expectSigned(recv.hitsAt(path).find((h) => h.json.type === 'webhook.test')!, rotated);
  });

  it('records every outcome of a burst (delivery, attempt log and live notice each), one delivery per event', async () => {
    const org = await rt.createOrg('enterprise', 'Burst org');
    const client = wsClient(rt.baseUrl, org.testKey);
    clients.push(client);
    const path = `/burst/${uniq()}`;
    const ep = await createEndpoint(rt, org.testKey, { url: recv.url(path), events: ['message.*'] });
    const sub = await subscribed(rt.app, client, 'subscription($id: ID!) { webhookDeliveries(endpointId: $id) { id status attempt httpStatus } }', { id: ep.id });
    const n = 60;
    const ids = Array.from({ length: n }, () => newId('evt', Date.now()));
    await rt.db.query(
      `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
       select id, $2, 'test', 'message.delivered', 'message', id, 1, '{}', now() from unnest($1::text[]) as id`, [ids, org.orgId]);
    await waitFor('every event at the receiver', () => recv.hitsAt(path).length >= n);
    await waitFor('every outcome published', () => sub.items.length >= n);
    sub.dispose();
    expect(new Set(recv.hitsAt(path).map((h) => h.json.id))).toEqual(new Set(ids));
    for (const h of recv.hitsAt(path)) expectSigned(h, ep.signing_secret);
    const { rows } = await rt.db.query(
      `select d.id, d.event_id, d.status, d.attempt, d.http_status, d.locked_until, d.delivered_at, count(a.id)::int as attempts, min(a.status) as attempt_status
         from webhook_deliveries d left join webhook_attempts a on a.delivery_id = d.id where d.endpoint_id = $1 group by d.id`, [ep.id]);
    expect(rows).toHaveLength(n);
    expect(new Set(rows.map((r) => r.event_id)).size).toBe(n);
    for (const r of rows) {
      expect(r).toMatchObject({ status: 'success', attempt: 1, http_status: 200, locked_until: null, attempts: 1, attempt_status: 'success' });
      expect(r.delivered_at).not.toBeNull();
    }
    expect(new Set(sub.items.map((i) => i.webhookDeliveries.id))).toEqual(new Set(rows.map((r) => r.id)));
    expect(sub.items.every((i) => i.webhookDeliveries.status === 'success' && i.webhookDeliveries.attempt === 1)).toBe(true);
  });

  it('dispatches each event exactly once while several relays drain the same outbox', async () => {
    const org = await rt.createOrg('enterprise', 'Concurrent relays org');
    const path = `/relays/${uniq()}`;
    const ep = await createEndpoint(rt, org.testKey, { url: recv.url(path), events: ['message.*'] });
    const relays = Array.from({ length: 3 }, () => {
      const r = new EventRelay({ orm: rt.app.orm, url: rt.databaseUrl, log: createLogger('silent') });
      r.addConsumer((tx, event) => rt.app.services.webhooks.fanOut(tx, event));
      return r;
    });
    const n = 1200;
    const ids = Array.from({ length: n }, () => newId('evt', Date.now()));
    await rt.db.query(
      `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
       select id, $2, 'test', 'message.sent', 'message', id, 1, '{}', now() from unnest($1::text[]) as id`, [ids, org.orgId]);
    // Alongside the app's own relay, woken by the same insert.
    const drain = async (r: EventRelay) => { while ((await r.drainOnce()) > 0) { /* next batch */ } };
    await Promise.all(relays.map(drain));
    await waitFor('every event dispatched', async () => (await rt.db.query('select count(*)::int as n from events_outbox where id = any($1)', [ids])).rows[0].n === 0);
    const { rows } = await rt.db.query('select event_id, count(*)::int as n from webhook_deliveries where endpoint_id = $1 group by event_id', [ep.id]);
    expect(rows).toHaveLength(n);
    expect(rows.every((r) => r.n === 1)).toBe(true);
    await waitFor('every delivery at the receiver', () => recv.hitsAt(path).length >= n, 30_000);
    expect(new Set(recv.hitsAt(path).map((h) => h.json.id)).size).toBe(n);
    expect(recv.hitsAt(path)).toHaveLength(n);
  }, 60_000);

  it('hands fresh deliveries to the local worker already claimed, as many as it has room for; a failed commit hands nothing', async () => {
    // The strict app runs no worker of its own: this one stands in, with room for two.
    const org = await strict.createOrg('enterprise', 'Hand-off org');
    const ep = await createEndpoint(strict, org.testKey, { url: 'https://hooks.example.com/handoff', events: ['message.*'] });
    const handed: ClaimedDelivery[][] = [];
    let released = 0;
    const local: LocalDeliveryWorker = { reserve: (n) => Math.min(n, 2), release: (n) => { released += n; }, run: (d) => { handed.push(d); } };
    const relay = new EventRelay({ orm: strict.app.orm, url: strict.databaseUrl, log: createLogger('silent') });
    relay.addConsumer((tx, event) => strict.app.services.webhooks.fanOut(tx, event));
    const failing = new EventRelay({ orm: strict.app.orm, url: strict.databaseUrl, log: createLogger('silent') });
    failing.addConsumer((tx, event) => strict.app.services.webhooks.fanOut(tx, event));
    // Fails after the deliveries were inserted (its hook runs after fan-out's).
    failing.addConsumer(async (tx) => tx.beforeCommit(failing, async () => { throw new Error('commit refused'); }));
    const insertEvents = async (n: number) => {
      const ids = Array.from({ length: n }, () => newId('evt', Date.now()));
      await strict.db.query(
        `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
         select id, $2, 'test', 'message.sent', 'message', id, 1, '{}', now() from unnest($1::text[]) as id`, [ids, org.orgId]);
      return ids;
    };
    strict.app.services.webhooks.attachLocalWorker(local);
    try {
      await insertEvents(3);
      await relay.drainOnce();
      expect(handed).toHaveLength(1);
      expect(handed[0]).toHaveLength(2);
      const now = strict.clock.now().getTime();
      const { rows } = await strict.db.query('select id, locked_until from webhook_deliveries where endpoint_id = $1 order by id', [ep.id]);
      expect(rows).toHaveLength(3);
      const locked = rows.filter((r) => r.locked_until !== null);
      expect(locked.map((r) => r.id).sort()).toEqual(handed[0]!.map((d) => d.id).sort());
      for (const r of locked) expect(r.locked_until.getTime()).toBe(now + 60_000);
      for (const d of handed[0]!) {
        expect(d).toMatchObject({ endpointId: ep.id, attempt: 0, url: 'https://hooks.example.com/handoff', tenant: { organizationId: org.orgId, mode: 'test' } });
        expect(d.endpoint).toMatchObject({ active: true });
        expect(JSON.parse(d.payload)).toMatchObject({ type: 'message.sent' });
      }
      expect(released).toBe(0);

      const later = await insertEvents(2);
      await expect(failing.drainOnce()).rejects.toThrow('commit refused');
      expect(released).toBe(2);
      expect(handed).toHaveLength(1);
      expect((await strict.db.query('select count(*)::int as n from webhook_deliveries where event_id = any($1)', [later])).rows[0].n).toBe(0);
      await relay.drainOnce();
      expect(handed).toHaveLength(2);
      expect(handed[1]!.map((d) => JSON.parse(d.payload).id).sort()).toEqual([...later].sort());
    } finally {
      strict.app.services.webhooks.detachLocalWorker(local);
    }
  });

  it('a failed attempt of a delivery whose endpoint was deleted while it was in flight leaves it cancelled (no retry)', async () => {
    const org = await rt.createOrg('enterprise', 'Deleted in flight org');
    const key = org.testKey;
    const path = `/inflight/${uniq()}`;
    recv.reply(path, 'hang');
    const ep = await createEndpoint(rt, key, { url: recv.url(path), events: ['message.queued'] });
    await sendSms(rt, key);
    await waitFor('the request to be in flight', () => recv.held(path).length === 1);
    const { rows: [d] } = await rt.db.query('select id from webhook_deliveries where endpoint_id = $1', [ep.id]);
    expect((await rt.rest('DELETE', `/v1/webhooks/${ep.id}`, { key })).status).toBe(204);
    recv.release(path, 500);
    const attempt = await waitFor('the attempt to be logged', async () => (await rt.db.query('select status, http_status from webhook_attempts where delivery_id = $1', [d.id])).rows[0]);
    expect(attempt).toEqual({ status: 'failed', http_status: 500 });
    const { rows: [after] } = await rt.db.query('select status, next_attempt_at, locked_until, attempt from webhook_deliveries where id = $1', [d.id]);
    expect(after).toEqual({ status: 'cancelled', next_attempt_at: null, locked_until: null, attempt: 1 });
  });
});

// ---------------------------------------------------------------------------------------------

describe('one slow endpoint never delays the others', () => {
  it('delivers to a fast endpoint while a slow one is still in flight', async () => {
    const org = await rt.createOrg('enterprise', 'Slow org');
    const key = org.testKey;
    const u = uniq();
    recv.reply(`/s/${u}/slow`, 'hang');
    const slow = await createEndpoint(rt, key, { url: recv.url(`/s/${u}/slow`), events: ['message.queued'] });
    const fast = await createEndpoint(rt, key, { url: recv.url(`/s/${u}/fast`), events: ['message.queued'] });
    await sendSms(rt, key);
    await waitFor('the slow endpoint to be called', () => recv.held(`/s/${u}/slow`).length === 1);
    const fastLog = await waitFor('the fast delivery to succeed', async () => {
      const r = await rt.rest('GET', `/v1/webhooks/${fast.id}/deliveries`, { key });
      return r.body.data[0]?.status === 'success' ? r.body.data[0] : undefined;
    });
    expect(fastLog.delivered_at).not.toBeNull();
    // The slow request is still open and its delivery still in progress.
    expect(recv.held(`/s/${u}/slow`)).toHaveLength(1);
    const slowLog = await rt.rest('GET', `/v1/webhooks/${slow.id}/deliveries`, { key });
    expect(slowLog.body.data[0]).toMatchObject({ status: 'pending', attempt: 0 });

    recv.release(`/s/${u}/slow`, 200);
    await waitFor('the slow delivery to succeed', async () => (await rt.rest('GET', `/v1/webhooks/${slow.id}/deliveries`, { key })).body.data[0]?.status === 'success');
  });
});

// ---------------------------------------------------------------------------------------------
