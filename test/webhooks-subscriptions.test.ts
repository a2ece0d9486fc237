/**
 * Live subscriptions (graphql-ws and SSE, tenant and mode scoping, two instances on one database),
 * against the real service and workers (test/helpers/webhooks.ts).
 */

import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../src/app.ts';
import { systemClock } from '../src/platform/clock.ts';
import { createLogger } from '../src/platform/logger.ts';
import { SUBSCRIBER_BACKLOG } from '../src/platform/events/bus.ts';
import type { TestApp, TestOrg } from './helpers/testApp.ts';
import { busSubscriptions, createEndpoint, EVENTS_SUB, type Receiver, sendSms, type Sub, subscribe, subscribed, uniq, useWebhookApps, waitFor, wsClient } from './helpers/webhooks.ts';

const apps = useWebhookApps({ rt: true });
let rt: TestApp;
let recv: Receiver;
beforeAll(() => { ({ rt, recv } = apps); });
const clients = apps.clients;
let second: App | undefined;
afterAll(async () => { await second?.stop(); });

// ---------------------------------------------------------------------------------------------

describe('subscriptions', () => {
  let orgA: TestOrg;
  let orgB: TestOrg;
  let a: Client;
  let b: Client;
  beforeAll(async () => {
    orgA = await rt.createOrg('enterprise', 'Subscriber A');
    orgB = await rt.createOrg('enterprise', 'Subscriber B');
    a = wsClient(rt.baseUrl, orgA.testKey);
    b = wsClient(rt.baseUrl, orgB.testKey);
    clients.push(a, b);
  });

  it('events(types) over graphql-ws receives the message events of a message sent after subscribing', async () => {
    const idle = rt.app.services.bus.subscriberCount;
    const sub = await subscribed(rt.app, a, EVENTS_SUB, { types: ['message.*'] });
    const m = await sendSms(rt, orgA.testKey);
    await waitFor('message.delivered', () => sub.items.some((i) => i.events.type === 'message.delivered' && i.events.data.message_id === m.id));
    sub.dispose();
    // Unsubscribing releases the live subscription at once, not at the next matching event.
    await waitFor('the subscription to be released', () => rt.app.services.bus.subscriberCount === idle);
    const mine = sub.items.map((i) => i.events).filter((e) => e.resourceId === m.id).sort((x, y) => x.sequence - y.sequence);
    expect(mine.map((e) => [e.type, e.sequence])).toEqual([['message.queued', 1], ['message.sent', 2], ['message.delivered', 3]]);
    for (const e of mine) {
      expect(e.id).toMatch(/^evt_/);
      expect(e.data).toMatchObject({ message_id: m.id, channel: 'sms', to: m.to, status: e.type.slice('message.'.length) });
    }
    expect(sub.errors).toEqual([]);
  });

  it('messageStatus(id) yields queued, then sent, then delivered', async () => {
    // Hold the sandbox provider's send (its insert waits on this lock) so the subscription starts
    // while the message is still queued.
    const lock = await rt.db.connect();
    let sub: Sub;
    let m: { id: string };
    try {
      await lock.query('begin');
      await lock.query('lock table sandbox_sends in share mode');
      // A recipient whose delivery report the sandbox holds back (it is stored below, once `sent`
      // was seen: its report would otherwise follow the send within 50 ms, before the subscriber
      // could read `sent`).
      m = await sendSms(rt, orgA.testKey, { to: '+15005550004' });
      sub = await subscribed(rt.app, a, 'subscription($id: ID!) { messageStatus(id: $id) { id status } }', { id: m.id });
      await waitFor('the current status', () => sub.items.length >= 1);
      expect(sub.items[0].messageStatus).toEqual({ id: m.id, status: 'queued' });
    } finally {
      await lock.query('commit');
      lock.release();
    }
    await waitFor('sent', () => sub.items.some((i) => i.messageStatus.status === 'sent'));
    await rt.db.query(
      `insert into messaging_sandbox_reports (message_id, status, report)
       select id, 'delivered', jsonb_build_object('messageId', id, 'providerMessageId', provider_message_id, 'status', 'delivered') from messages where id = $1`, [m.id]);
    await waitFor('delivered', () => sub.items.some((i) => i.messageStatus.status === 'delivered'));
    sub.dispose();
    const statuses = sub.items.map((i) => i.messageStatus.status).filter((s, i, all) => i === 0 || s !== all[i - 1]);
    expect(statuses).toEqual(['queued', 'sent', 'delivered']);

    // Another tenant cannot watch this message.
    const foreign = subscribe(b, 'subscription($id: ID!) { messageStatus(id: $id) { id status } }', { id: m.id });
    await waitFor('the refusal', () => foreign.errors.length > 0 || foreign.items.length > 0);
    foreign.dispose();
    expect(foreign.items).toEqual([]);
    expect((foreign.errors[0] as { extensions?: { code?: string } }).extensions?.code).toBe('NOT_FOUND');
  });

  it('webhookDeliveries(endpointId) yields each delivery outcome of the endpoint', async () => {
    const ep = await createEndpoint(rt, orgA.testKey, { url: recv.url(`/sub/${uniq()}`), events: ['message.delivered'] });
    const sub = await subscribed(rt.app, a, 'subscription($id: ID!) { webhookDeliveries(endpointId: $id) { id endpointId status eventType httpStatus attempt deliveredAt } }', { id: ep.id });
    const res = await rt.rest('POST', `/v1/webhooks/${ep.id}/test`, { key: orgA.testKey });
    expect(res.body.data.success).toBe(true);
    const item = await waitFor('the delivery outcome', () => sub.items[0]?.webhookDeliveries);
    sub.dispose();
    expect(item).toMatchObject({ id: res.body.data.delivery_id, endpointId: ep.id, status: 'success', eventType: 'webhook.test', httpStatus: 200, attempt: 1 });
    expect(item.deliveredAt).not.toBeNull();

    const foreign = subscribe(b, 'subscription($id: ID!) { webhookDeliveries(endpointId: $id) { id } }', { id: ep.id });
    await waitFor('the refusal', () => foreign.errors.length > 0 || foreign.items.length > 0);
    foreign.dispose();
    expect((foreign.errors[0] as { extensions?: { code?: string } }).extensions?.code).toBe('NOT_FOUND');
  });

  it('streams events over SSE', async () => {
    const controller = new AbortController();
    const opened = busSubscriptions(rt.app);
    const before = rt.app.services.bus.subscriberCount;
    const res = await fetch(`${rt.baseUrl}/graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', 'X-API-Key': orgA.testKey },
      body: JSON.stringify({ query: 'subscription { events(types: ["message.*"]) { type resourceId sequence data } }' }),
      signal: controller.signal,
    });
    try {
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/event-stream');
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      const read = (async () => {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          text += decoder.decode(value, { stream: true });
        }
      })().catch(() => {});
      await waitFor('the SSE subscription to register', () => busSubscriptions(rt.app) > opened);
      const m = await sendSms(rt, orgA.testKey);
      const events = () => text.split('\n').filter((l) => l.startsWith('data:')).map((l) => JSON.parse(l.slice(5))?.data?.events).filter((e) => e?.resourceId === m.id);
      await waitFor('message.delivered over SSE', () => events().some((e) => e.type === 'message.delivered'));
      expect(events().map((e) => e.type).sort()).toEqual(['message.delivered', 'message.queued', 'message.sent']);
      for (const e of events()) expect(e.data.message_id).toBe(m.id);
      controller.abort();
      await read;
      // Closing the stream releases the live subscription.
      await waitFor('the SSE subscription to be released', () => rt.app.services.bus.subscriberCount === before);
    } finally {
      controller.abort();
    }
  });

  it('a subscriber never sees another organization\'s events', async () => {
    const subA = await subscribed(rt.app, a, EVENTS_SUB, {});
    const subB = await subscribed(rt.app, b, EVENTS_SUB, {});
    const mA = await sendSms(rt, orgA.testKey);
    // A's own subscriber sees it, so it has been published to every subscriber of this instance.
    await waitFor('A to see its message', () => subA.items.some((i) => i.events.resourceId === mA.id));
    const mB = await sendSms(rt, orgB.testKey);
    await waitFor('B to see its message', () => subB.items.length > 0);
    expect(subB.items[0].events).toMatchObject({ type: 'message.queued', resourceId: mB.id });
    await waitFor('A\'s message to be delivered', () => subA.items.some((i) => i.events.resourceId === mA.id && i.events.type === 'message.delivered'));
    subA.dispose();
    subB.dispose();
    expect(subB.items.filter((i) => i.events.resourceId === mA.id)).toEqual([]);
    expect(subA.items.filter((i) => i.events.resourceId === mB.id)).toEqual([]);
  });

  it('a subscriber sees only its own mode', async () => {
    const live = wsClient(rt.baseUrl, orgA.liveKey);
    clients.push(live);
    const types = { types: ['template.*', 'message.*'] };
    const subLive = await subscribed(rt.app, live, EVENTS_SUB, types);
    const subTest = await subscribed(rt.app, a, EVENTS_SUB, types);
    const tpl = await rt.rest('POST', '/v1/messages/templates', { key: orgA.liveKey, body: { channel: 'sms', name: `live_${uniq()}`, content: 'Hello {{name}}' } });
    expect(tpl.status, tpl.text).toBe(201);
    await waitFor('the live template decision', () => subLive.items.some((i) => i.events.resourceId === tpl.body.data.id));
    const m = await sendSms(rt, orgA.testKey);
    await waitFor('the test message event', () => subTest.items.length > 0);
    expect(subTest.items[0].events).toMatchObject({ type: 'message.queued', resourceId: m.id });
    await waitFor('delivered', () => subTest.items.some((i) => i.events.type === 'message.delivered' && i.events.resourceId === m.id));
    subLive.dispose();
    subTest.dispose();
    expect(subLive.items.map((i) => i.events.resourceId)).toEqual([tpl.body.data.id]);
    expect(subTest.items.filter((i) => i.events.resourceId === tpl.body.data.id)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('a burst of events', () => {
  /** `count` committed events of `org` (not queued for the relay), and their notices handed to the bus at once. */
  async function burst(org: TestOrg, count: number, opts: { stored?: boolean } = {}): Promise<string[]> {
    const tag = uniq();
    const ids = Array.from({ length: count }, (_, i) => `evt_burst${tag}${String(i).padStart(6, '0')}`);
    if (opts.stored !== false) {
      await rt.db.query(
        `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at, dispatched_at)
         select id, $2, 'test', 'message.queued', 'message', 'msg_' || id, 1, jsonb_build_object('message_id', 'msg_' || id), now(), now()
         from unnest($1::text[]) as id`, [ids, org.orgId]);
    }
    rt.app.services.bus.deliverLocal(ids.map((id) => ({ kind: 'event', id, organizationId: org.orgId, mode: 'test', type: 'message.queued', resourceId: `msg_${id}` })));
    return ids;
  }

  it('a subscriber sees every event of a burst larger than it can read one by one, in order', async () => {
    const org = await rt.createOrg('enterprise', 'Burst');
    const client = wsClient(rt.baseUrl, org.testKey);
    clients.push(client);
    const sub = await subscribed(rt.app, client, EVENTS_SUB, { types: ['message.queued'] });
    // All notices arrive in one go (as a relay batch of another instance's sends does), far more
    // than a consumer reading each event with its own query keeps up with.
    const ids = await burst(org, 3000);
    await waitFor('every event of the burst', () => sub.items.length >= ids.length || sub.errors.length > 0, 20_000);
    sub.dispose();
    expect(sub.errors).toEqual([]);
    expect(sub.items.map((i) => i.events.id)).toEqual(ids);
  });

  it('a subscriber that falls more than the backlog behind gets the events it holds, then SERVICE_UNAVAILABLE, then the end', async () => {
    const org = await rt.createOrg('enterprise', 'Burst past the backlog');
    const client = wsClient(rt.baseUrl, org.testKey);
    clients.push(client);
    const before = rt.app.services.bus.subscriberCount;
    let completed = false;
    const sub: Sub = { items: [], errors: [], dispose: () => {} };
    sub.dispose = client.subscribe({ query: EVENTS_SUB, variables: { types: ['message.queued'] } }, {
      next: (v) => { if (v.errors?.length) sub.errors.push(...v.errors); else sub.items.push(v.data); },
      error: (e) => { sub.errors.push(e); }, complete: () => { completed = true; },
    });
    await waitFor('the subscription to register', () => rt.app.services.bus.subscriberCount > before);
    // Stored events first (the subscriber gets them), then notices of events it cannot find
    // (skipped), past SUBSCRIBER_BACKLOG in one synchronous go.
    const stored = await burst(org, 50);
    await burst(org, SUBSCRIBER_BACKLOG + 10, { stored: false });
    await waitFor('the end of the subscription', () => completed, 20_000);
    expect(sub.items.map((i) => i.events.id)).toEqual(stored);
    expect(sub.errors).toHaveLength(1);
    expect(sub.errors[0]).toMatchObject({ extensions: { code: 'SERVICE_UNAVAILABLE', details: { reason: 'subscriber_backlog', backlog: SUBSCRIBER_BACKLOG } } });
    expect(rt.app.services.bus.subscriberCount).toBe(before);
  });
});

// ---------------------------------------------------------------------------------------------

describe('two instances on one database', () => {
  it('a subscriber on the second instance receives events of a message sent through the first', async () => {
    second = await createApp({ config: rt.config, databaseUrl: rt.databaseUrl, clock: systemClock, log: createLogger('silent') });
    await second.start({ workers: false });
    const { port } = await second.http.listen(0, '127.0.0.1');
    // What an instance's own followers hold (the GraphQL response cache follows the bus), before any client.
    const idle = second.services.bus.subscriberCount;
    const org = await rt.createOrg('enterprise', 'Two instances org');
    const client = wsClient(`http://127.0.0.1:${port}`, org.testKey);
    clients.push(client);
    const sub = await subscribed(second, client, EVENTS_SUB, { types: ['message.*'] });
    // The first instance has no live subscriber left: what arrives crossed instances.
    await waitFor('the first instance to have no client subscribers', () => rt.app.services.bus.subscriberCount === idle);
    const m = await sendSms(rt, org.testKey);
    await waitFor('the delivered event on the second instance', () => sub.items.some((i) => i.events.resourceId === m.id && i.events.type === 'message.delivered'));
    sub.dispose();
    expect(sub.items.map((i) => i.events).filter((e) => e.resourceId === m.id).map((e) => e.sequence).sort()).toEqual([1, 2, 3]);
  });
});
