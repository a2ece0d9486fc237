/** Access fixtures of the messaging module: messages, templates, senders, connectors and routes (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

/** A connector to an SMSC nobody runs (the API side only: nothing binds without workers). */
const connector = (n: number) => ({ name: `fixture_${n}`, kind: 'smpp', smpp: { host: '127.0.0.1', port: 9, system_id: 'esme', password: 'secret' } });

export default defineAccessFixtures(({ t, a, unique, phone }) => {
  /** A connector of tenant A that sample routes use. */
  let routed = '';
  return {
    beforeAll: async () => {
      routed = (await t.rest('POST', '/v1/messages/connectors', { key: a.testKey, body: connector(unique()) })).body.data.id;
    },
    fixtures: {
      msg: async () => (await t.rest('POST', '/v1/messages/sms', { key: a.testKey, body: { to: '+14155550100', body: 'fixture' } })).body.data.message_id,
      tpl: async () => (await t.rest('POST', '/v1/messages/templates', { key: a.testKey, body: { channel: 'sms', name: `fixture_${unique()}`, content: 'Hi {{name}}', status: 'draft' } })).body.data.id,
      snd: async () => (await t.rest('POST', '/v1/messages/senders', { key: a.testKey, body: { channel: 'sms', address: phone() } })).body.data.id,
      conn: async () => (await t.rest('POST', '/v1/messages/connectors', { key: a.testKey, body: connector(unique()) })).body.data.id,
      route: async () => {
        const conn = (await t.rest('POST', '/v1/messages/connectors', { key: a.testKey, body: connector(unique()) })).body.data.id;
        return (await t.rest('POST', '/v1/messages/routes', { key: a.testKey, body: { connector_id: conn, prefix: '+44' } })).body.data.id;
      },
    },
    restBodies: {
      'POST /v1/messages/sms': { to: '+14155550100', body: 'hi' },
      'POST /v1/messages/whatsapp': { to: '+14155550100', text: { body: 'hi' } },
      'POST /v1/messages/email': { to: 'a@example.com', subject: 'Hi', text: 'hi' },
      'POST /v1/messages/rcs': { to: '+14155550100', body: 'hi' },
      'POST /v1/messages/viber': { to: '+14155550100', body: 'hi' },
      'POST /v1/messages/{id}/retry': {},
      'POST /v1/messages/templates': () => ({ channel: 'sms', name: `matrix_${unique()}`, content: 'Hi {{name}}' }),
      'PATCH /v1/messages/templates/{id}': { content: 'Hey {{name}}' },
      'POST /v1/messages/senders': () => ({ channel: 'sms', address: phone() }),
      'POST /v1/sandbox/inbound': { channel: 'sms', from: '+14155550123', body: 'hi' },
      'POST /v1/messages/connectors': () => connector(unique()),
      'PATCH /v1/messages/connectors/{id}': { enabled: false },
      'POST /v1/messages/routes': () => ({ connector_id: routed, prefix: '+44' }),
      'PATCH /v1/messages/routes/{id}': { priority: 5 },
    },
    gqlSamples: {
      'Query.messages': { doc: '{ messages(first: 1) { edges { cursor } } }' },
      'Query.message': { doc: 'query($id: ID!) { message(id: $id) { id } }', resource: 'msg' },
      'Query.messageTemplates': { doc: '{ messageTemplates(first: 1) { edges { cursor } } }' },
      'Query.whatsappTemplates': { doc: '{ whatsappTemplates(first: 1) { edges { cursor } } }' },
      'Query.messageTemplate': { doc: 'query($id: ID!) { messageTemplate(id: $id) { id } }', resource: 'tpl' },
      'Query.messageSenders': { doc: '{ messageSenders { id } }' },
      'Mutation.sendSms': { doc: 'mutation { sendSms(input: { to: "+14155550100", body: "hi" }) { id } }' },
      'Mutation.sendWhatsApp': { doc: 'mutation { sendWhatsApp(input: { to: "+14155550100", text: { body: "hi" } }) { id } }' },
      'Mutation.sendEmail': { doc: 'mutation { sendEmail(input: { to: ["a@example.com"], subject: "Hi", text: "hi" }) { id } }' },
      'Mutation.sendRcs': { doc: 'mutation { sendRcs(input: { to: "+14155550100", body: "hi" }) { id } }' },
      'Mutation.sendViber': { doc: 'mutation { sendViber(input: { to: "+14155550100", body: "hi" }) { id } }' },
      'Mutation.retryMessage': { doc: 'mutation($id: ID!) { retryMessage(id: $id) { id } }', resource: 'msg' },
      'Mutation.createMessageTemplate': { doc: 'mutation($name: String!) { createMessageTemplate(input: { channel: sms, name: $name, content: "Hi {{name}}" }) { id } }', vars: () => ({ name: `gql_${unique()}` }) },
      'Mutation.updateMessageTemplate': { doc: 'mutation($id: ID!) { updateMessageTemplate(id: $id, input: { content: "Hey {{name}}" }) { id } }', resource: 'tpl' },
      'Mutation.deleteMessageTemplate': { doc: 'mutation($id: ID!) { deleteMessageTemplate(id: $id) }', resource: 'tpl' },
      'Mutation.addMessageSender': { doc: 'mutation($address: String!) { addMessageSender(channel: sms, address: $address) { id } }', vars: () => ({ address: phone() }) },
      'Mutation.removeMessageSender': { doc: 'mutation($id: ID!) { removeMessageSender(id: $id) }', resource: 'snd' },
      'Mutation.simulateInboundMessage': { doc: 'mutation { simulateInboundMessage(channel: sms, from: "+14155550123", body: "hi") { id } }' },
      'Query.messagingConnectors': { doc: '{ messagingConnectors(first: 1) { edges { cursor } } }' },
      'Query.messagingConnector': { doc: 'query($id: ID!) { messagingConnector(id: $id) { id } }', resource: 'conn' },
      'Query.messagingRoutes': { doc: '{ messagingRoutes(first: 1) { edges { cursor } } }' },
      'Query.messagingRoute': { doc: 'query($id: ID!) { messagingRoute(id: $id) { id } }', resource: 'route' },
      'Mutation.createMessagingConnector': {
        doc: 'mutation($name: String!) { createMessagingConnector(input: { name: $name, kind: smpp, smpp: { host: "127.0.0.1", port: 2775, systemId: "esme", password: "secret" } }) { id } }',
        vars: () => ({ name: `gql_${unique()}` }),
      },
      'Mutation.updateMessagingConnector': { doc: 'mutation($id: ID!) { updateMessagingConnector(id: $id, input: { enabled: false }) { id } }', resource: 'conn' },
      'Mutation.deleteMessagingConnector': { doc: 'mutation($id: ID!) { deleteMessagingConnector(id: $id) }', resource: 'conn' },
      'Mutation.createMessagingRoute': { doc: 'mutation($id: String!) { createMessagingRoute(input: { connectorId: $id, prefix: "+44" }) { id } }', resource: 'conn' },
      'Mutation.updateMessagingRoute': { doc: 'mutation($id: ID!) { updateMessagingRoute(id: $id, input: { priority: 5 }) { id } }', resource: 'route' },
      'Mutation.deleteMessagingRoute': { doc: 'mutation($id: ID!) { deleteMessagingRoute(id: $id) }', resource: 'route' },
    },
  };
});
