/** Access fixtures of the webhooks module: webhook endpoints and their deliveries (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

export default defineAccessFixtures(({ t, a, tick, makeFixture }) => ({
  fixtures: {
    // Port 9 (discard) refuses at once: tests and deliveries to it fail fast.
    wh: async () => (await t.rest('POST', '/v1/webhooks', { key: a.testKey, body: { url: 'http://127.0.0.1:9/hook', events: ['message.*'] } })).body.data.id,
    dlv: async () => {
      const wh = await makeFixture('wh');
      tick();
      return (await t.rest('POST', `/v1/webhooks/${wh}/test`, { key: a.testKey })).body.data.delivery_id;
    },
    // Sending a message records its message.queued event in the same transaction.
    evt: async () => {
      tick();
      const sent = await t.rest('POST', '/v1/messages/sms', { key: a.testKey, body: { to: '+14155550123', body: 'matrix event' } });
      const events = await t.rest('GET', '/v1/events?type=message.queued&limit=1', { key: a.testKey });
      const event = (events.body.data as { id: string; resource_id: string }[] | undefined)?.find((e) => e.resource_id === sent.body.data.id);
      if (!event) throw new Error(`no message.queued event for ${sent.text}`);
      return event.id;
    },
  },
  restBodies: {
    'POST /v1/webhooks': { url: 'http://127.0.0.1:9/hook', events: ['message.*'] },
    'PUT /v1/webhooks/{id}': { description: 'matrix' },
    'POST /v1/webhooks/{id}/test': {},
    'POST /v1/webhooks/deliveries/{id}/replay': {},
  },
  gqlSamples: {
    'Query.eventHistory': { doc: '{ eventHistory(first: 1, types: ["message.*"]) { edges { cursor } } }' },
    'Query.event': { doc: 'query($id: ID!) { event(id: $id) { id } }', resource: 'evt' },
    'Query.webhooks': { doc: '{ webhooks(first: 1) { edges { cursor } } }' },
    'Query.webhook': { doc: 'query($id: ID!) { webhook(id: $id) { id } }', resource: 'wh' },
    'Query.webhookDeliveryLog': { doc: 'query($id: ID!) { webhookDeliveryLog(endpointId: $id, first: 1) { edges { cursor } } }', resource: 'wh' },
    'Query.webhookDeadLetters': { doc: '{ webhookDeadLetters(first: 1) { edges { cursor } } }' },
    'Query.webhookCallbackSecret': { doc: '{ webhookCallbackSecret }' },
    'Mutation.createWebhook': { doc: 'mutation { createWebhook(input: { url: "http://127.0.0.1:9/hook", events: ["message.*"] }) { signingSecret } }' },
    'Mutation.updateWebhook': { doc: 'mutation($id: ID!) { updateWebhook(id: $id, input: { description: "x" }) { id } }', resource: 'wh' },
    'Mutation.deleteWebhook': { doc: 'mutation($id: ID!) { deleteWebhook(id: $id) }', resource: 'wh' },
    'Mutation.testWebhook': { doc: 'mutation($id: ID!) { testWebhook(id: $id) { success } }', resource: 'wh' },
    'Mutation.replayWebhookDelivery': { doc: 'mutation($id: ID!) { replayWebhookDelivery(id: $id) { id } }', resource: 'dlv' },
  },
}));
