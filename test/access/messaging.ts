/** Access fixtures of the messaging module: messages, templates and senders (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

export default defineAccessFixtures(({ t, a, unique, phone }) => ({
  fixtures: {
    msg: async () => (await t.rest('POST', '/v1/messages/sms', { key: a.testKey, body: { to: '+14155550100', body: 'fixture' } })).body.data.message_id,
    tpl: async () => (await t.rest('POST', '/v1/messages/templates', { key: a.testKey, body: { channel: 'sms', name: `fixture_${unique()}`, content: 'Hi {{name}}', status: 'draft' } })).body.data.id,
    snd: async () => (await t.rest('POST', '/v1/messages/senders', { key: a.testKey, body: { channel: 'sms', address: phone() } })).body.data.id,
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
  },
}));
