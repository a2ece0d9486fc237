/**
 * The relay's consumers answer their per-batch lookups (webhook endpoints, event-triggered flows)
 * from a per-instance cache while `relay_lookup_versions` says nothing they read changed; any write
 * to the tables they read (the API's or a direct one) bumps the version in its transaction, and the
 * next batch reads again. With a bump switched off, a change is not seen: the cache answered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { newId } from '../src/platform/ids.ts';
import { createLogger } from '../src/platform/logger.ts';
import { EventRelay } from '../src/platform/events/relay.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { createEndpoint } from './helpers/webhooks.ts';

let t: TestApp;
let org: TestOrg;
let relay: EventRelay;
beforeAll(async () => {
  // No workers: the app runs no relay of its own; this file's relay has the app's consumers.
  t = await startTestApp({ workers: false, clock: systemClock });
  org = await t.createOrg('enterprise', 'Relay lookups');
  relay = new EventRelay({ orm: t.app.orm, url: t.databaseUrl, log: createLogger('silent') });
  relay.addConsumer((tx, event) => t.app.services.webhooks.fanOut(tx, event));
  relay.addConsumer((tx, event) => t.app.services.flowTriggers.consume(tx, event));
});
afterAll(async () => { await t?.close(); });

/** Inserts one event of the organization and dispatches everything on the outbox. */
async function dispatchEvent(type = 'message.sent'): Promise<string> {
  const id = newId('evt', Date.now());
  await t.db.query(
    `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
     values ($1, $2, 'test', $3, 'message', $1, 1, '{}', now())`, [id, org.orgId, type]);
  while ((await relay.drainOnce()) > 0) { /* next batch */ }
  return id;
}

const deliveredTo = async (eventId: string) =>
  (await t.db.query<{ url: string }>('select url from webhook_deliveries where event_id = $1 order by url', [eventId])).rows.map((r) => r.url);
const version = async (name: string) =>
  Number((await t.db.query<{ version: string }>('select version from relay_lookup_versions where name = $1', [name])).rows[0]?.version ?? 0);

/** Runs `write` with the lookup's bump switched off (a write the cache cannot know of). */
async function unannounced(table: string, trigger: string, write: () => Promise<unknown>): Promise<void> {
  await t.db.query(`alter table ${table} disable trigger ${trigger}`);
  try {
    await write();
  } finally {
    await t.db.query(`alter table ${table} enable trigger ${trigger}`);
  }
}

describe('webhook endpoints', () => {
  it('are read once while unchanged; any write makes the next batch read them again', async () => {
    const before = await version('webhook_endpoints');
    const ep = await createEndpoint(t, org.testKey, { url: 'https://hooks.example.com/a', events: ['message.*'] });
    expect(await version('webhook_endpoints')).toBeGreaterThan(before);
    expect(await deliveredTo(await dispatchEvent())).toEqual(['https://hooks.example.com/a']);

    // Unannounced: the cache answers with the endpoint as it was.
    await unannounced('webhook_endpoints', 'webhook_endpoints_relay_lookup',
      () => t.db.query(`update webhook_endpoints set url = 'https://hooks.example.com/b' where id = $1`, [ep.id]));
    expect(await deliveredTo(await dispatchEvent())).toEqual(['https://hooks.example.com/a']);

    // A direct write, announced: read again.
    await t.db.query(`update webhook_endpoints set url = 'https://hooks.example.com/c' where id = $1`, [ep.id]);
    expect(await deliveredTo(await dispatchEvent())).toEqual(['https://hooks.example.com/c']);

    // Through the API: a new endpoint is seen by the next batch, a disabled one is not.
    await createEndpoint(t, org.testKey, { url: 'https://hooks.example.com/d', events: ['message.sent'] });
    expect(await deliveredTo(await dispatchEvent())).toEqual(['https://hooks.example.com/c', 'https://hooks.example.com/d']);
    await t.db.query('update webhook_endpoints set active = false where id = $1', [ep.id]);
    expect(await deliveredTo(await dispatchEvent())).toEqual(['https://hooks.example.com/d']);
  });
});

describe('event-triggered flows', () => {
  it('are read once while unchanged; a flow, flow-version or plan write makes the next batch read them again', async () => {
    const created = await t.rest('POST', '/v1/flows', {
      key: org.testKey,
      body: {
        name: 'On message.delivered', trigger: { type: 'event', event: 'message.delivered' },
        definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 'done', type: 'end' }], edges: [{ from: 't', to: 'done' }] },
      },
    });
    expect(created.status, created.text).toBe(201);
    const flowId: string = created.body.data.id;
    const started = async () => (await t.db.query<{ n: number }>('select count(*)::int as n from flow_executions where flow_id = $1', [flowId])).rows[0]!.n;
    await dispatchEvent('message.delivered');
    expect(await started()).toBe(1);

    // Unannounced delete: the cache still answers with the flow.
    await unannounced('flows', 'flows_relay_lookup', () => t.db.query('update flows set deleted_at = now() where id = $1', [flowId]));
    await dispatchEvent('message.delivered');
    expect(await started()).toBe(2);

    // Any announced write to flows: read again, the deleted flow starts nothing.
    await t.db.query('update flows set updated_at = now() where id = $1', [flowId]);
    await dispatchEvent('message.delivered');
    expect(await started()).toBe(2);

    // Flow versions and the organization's plan bump the same lookup.
    const flows = await version('flows');
    await t.db.query('update flow_versions set name = name where flow_id = $1', [flowId]);
    expect(await version('flows')).toBe(flows + 1);
    await t.db.query('update organizations set plan = plan where id = $1', [org.orgId]);
    expect(await version('flows')).toBe(flows + 2);
    await t.db.query('update organizations set name = name where id = $1', [org.orgId]);
    expect(await version('flows')).toBe(flows + 2);
  });
});
