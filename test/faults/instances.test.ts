/**
 * Fault scenario 5 (quick form): two instances of the service over one database. Plan rate limits
 * hold across both (twice the limit offered, split between them: exactly the limit accepted), and a
 * subscription on one instance sees events caused through the other (LISTEN/NOTIFY fan-out).
 * Both run on the real clock: windows and burst slots are shared wall-clock state.
 */
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from '../helpers/testApp.ts';

let a: TestApp;
let b: TestApp;
let org: TestOrg;
beforeAll(async () => {
  // A runs the workers (outbox relay); B serves only.
  a = await startTestApp({ clock: systemClock, workers: true });
  b = await startTestApp({ clock: systemClock, sameDatabaseAs: a });
  org = await a.createOrg('starter');
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

describe('two instances over one database', () => {
  it('a plan window holds globally: 2x the limit offered across both instances, exactly the limit accepted', async () => {
    // POST /v1/webhooks allows 10 per minute on starter; admission counts before validation, so an
    // invalid body still takes a slot (422) and the rest are refused (429). Windows are aligned to
    // the minute: start early in one so all 20 requests (burst 5/s) fall into it.
    const second = new Date().getSeconds();
    if (second > 40) await new Promise((r) => setTimeout(r, (61 - second) * 1000));
    const calls = Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).rest('POST', '/v1/webhooks', { key: org.testKey, body: { url: 'not a url' } }));
    const statuses = (await Promise.all(calls)).map((r) => r.status);
    expect(statuses.filter((s) => s === 429)).toHaveLength(10);
    expect(statuses.filter((s) => s === 422)).toHaveLength(10);
  });

  it('a subscription on one instance sees an event caused on the other', async () => {
    const client = createClient({ url: `${b.baseUrl.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: org.testKey }, retryAttempts: 0 });
    try {
      const received = new Promise<any>((resolve, reject) => {
        const dispose = client.subscribe({ query: 'subscription { events(types: ["contact.created"]) { type data } }' }, {
          next: (v) => { dispose(); resolve(v); }, error: reject, complete: () => {},
        });
      });
      // Let the subscription register on B before the change happens on A.
      await new Promise((r) => setTimeout(r, 300));
      const created = await a.rest('POST', '/v1/contacts', { key: org.testKey, body: { phone: '+15005550101', first_name: 'Cross' } });
      expect(created.status).toBe(201);
      const event = await Promise.race([received, new Promise((_, reject) => setTimeout(() => reject(new Error('no event on instance B within 10 s')), 10_000))]);
      expect(event.data.events.type).toBe('contact.created');
      expect(event.data.events.data.id ?? event.data.events.data.contact_id).toBe(created.body.data.id);
    } finally {
      await client.dispose();
    }
  });
});
