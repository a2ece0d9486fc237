/**
 * Generated access tests: the role matrix for every REST route and GraphQL root field, and
 * cross-tenant access to every id-taking operation. The lists come from the route table and the
 * schema registry, so a new route or field without a sample input or fixture fails here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getNamedType, isNonNullType, type GraphQLField } from 'graphql';
import { schema } from '../src/graphql/schema.ts';
import { FIELD_ROLES } from '../src/graphql/operationField.ts';
import { ROLES, type Role } from '../src/platform/auth/roles.ts';
import type { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let a: TestOrg;
let b: TestOrg;
const keys = new Map<Role, string>();

beforeAll(async () => {
  t = await startTestApp({ env: { WEBHOOKS_ALLOW_LOOPBACK: '1', SANDBOX_LLM_FIRST_TOKEN_MS: '0', SANDBOX_LLM_CHUNK_MS: '0' } });
  // Enterprise: 100 requests/s burst, so the matrix never queues on the manual clock.
  a = await t.createOrg('enterprise', 'Tenant A');
  b = await t.createOrg('enterprise', 'Tenant B');
  for (const role of ROLES) keys.set(role, await t.createKey(a.orgId, role));
});
afterAll(async () => { await t?.close(); });

/** A voice number of tenant A: calls and their fixtures place calls from it. */
let voiceFrom = '';
beforeAll(async () => {
  voiceFrom = (await t.rest('POST', '/v1/numbers', { key: a.testKey, body: { number: buyable() } })).body.data.number;
});
const ivrBody = () => ({ name: 'fixture', greeting: 'Hello', menu: { options: [{ key: '1', action: 'hangup' }] } });
/** The matrices walk every route and field for every role: minutes on a loaded machine, not the default 30 s. */
const MATRIX_TIMEOUT_MS = 180_000;

/** Moves the manual clock a second on, so no key ever waits in the burst queue. */
const tick = () => (t.clock as ManualClock).advance(1000);
let seq = 0;
const unique = () => ++seq;
const phone = () => `+1415555${String(1000 + unique()).padStart(4, '0')}`;
/** Sandbox-inventory numbers nobody holds yet: one range to buy, one to port in. */
const buyable = () => `+1646555${String(1000 + unique()).padStart(4, '0')}`;
const portable = () => `+1917555${String(1000 + unique()).padStart(4, '0')}`;
const flowBody = () => ({
  name: 'matrix', trigger: { type: 'api' },
  definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 'e', type: 'end' }], edges: [{ from: 't', to: 'e' }] },
});
/** Fills a route's path parameters in order from a fixture (several ids are space-separated). */
const fillPath = (path: string, ids: string) => ids.split(' ').reduce((p, id) => p.replace(/\{\w+\}/, id), path);
const portBody = () => ({ numbers: [portable()], current_carrier: 'AT&T', authorization_name: 'Jane Doe' });

const AGENT = { name: 'fixture', type: 'task', model: 'sandbox-1', system_prompt: 'Be brief.' };
const brandBody = {
  company_name: 'Acme', ein: '12-3456789', country: 'US', entity_type: 'private_profit', vertical: 'retail', contact_email: 'ops@acme.test', contact_phone: '+14155550100',
};
const tenDlcBody = {
  use_case: 'marketing', description: 'Weekly offers for members of the Acme loyalty club (fixture).', sample_messages: ['Acme: 20% off today. Reply STOP to opt out.'],
  message_flow: 'Members opt in on the web form when they join the loyalty club.', opt_in_type: 'web_form',
};

/** Makes a resource of the given id prefix in tenant A and returns its id. */
const fixtures: Record<string, () => Promise<string>> = {
  key: async () => (await t.rest('POST', '/v1/settings/api-keys', { key: a.testKey, body: { role: 'viewer', name: 'fixture' } })).body.data.id,
  mem: async () => (await t.rest('GET', '/v1/settings/team', { key: a.testKey })).body.data[0].id,
  aud: async () => (await t.rest('GET', '/v1/settings/audit-logs', { key: a.testKey })).body.data[0].id,
  msg: async () => (await t.rest('POST', '/v1/messages/sms', { key: a.testKey, body: { to: '+14155550100', body: 'fixture' } })).body.data.message_id,
  tpl: async () => (await t.rest('POST', '/v1/messages/templates', { key: a.testKey, body: { channel: 'sms', name: `fixture_${unique()}`, content: 'Hi {{name}}', status: 'draft' } })).body.data.id,
  snd: async () => (await t.rest('POST', '/v1/messages/senders', { key: a.testKey, body: { channel: 'sms', address: phone() } })).body.data.id,
  // Port 9 (discard) refuses at once: tests and deliveries to it fail fast.
  wh: async () => (await t.rest('POST', '/v1/webhooks', { key: a.testKey, body: { url: 'http://127.0.0.1:9/hook', events: ['message.*'] } })).body.data.id,
  num: async () => (await t.rest('POST', '/v1/numbers', { key: a.testKey, body: { number: buyable() } })).body.data.id,
  port: async () => (await t.rest('POST', '/v1/numbers/port', { key: a.testKey, body: portBody() })).body.data.id,
  ver: async () => (await t.rest('POST', '/v1/verify/send', { key: a.testKey, body: { to: phone(), channel: 'sms' } })).body.data.verification_id,
  con: async () => (await t.rest('POST', '/v1/contacts', { key: a.testKey, body: { phone: phone() } })).body.data.id,
  lst: async () => (await t.rest('POST', '/v1/contacts/lists', { key: a.testKey, body: { name: 'fixture' } })).body.data.id,
  seg: async () => (await t.rest('POST', '/v1/contacts/segments', { key: a.testKey, body: { name: 'fixture', rules: { all: [] } } })).body.data.id,
  imp: async () => (await t.rest('POST', '/v1/contacts/imports', { key: a.testKey, body: { csv: `phone\n${phone()}\n` } })).body.data.id,
  call: async () => (await t.rest('POST', '/v1/voice/calls', { key: a.testKey, body: { to: phone(), from: voiceFrom } })).body.data.id,
  trunk: async () => (await t.rest('POST', '/v1/voice/sip-trunks', { key: a.testKey, body: { name: 'fixture', termination_uri: 'sip:trunk.example.com' } })).body.data.id,
  ivr: async () => (await t.rest('POST', '/v1/voice/ivr', { key: a.testKey, body: ivrBody() })).body.data.id,
  conf: async () => (await t.rest('POST', '/v1/voice/conferences', { key: a.testKey, body: { name: 'fixture' } })).body.data.id,
  vmail: async () => (await t.rest('POST', '/v1/voice/voicemail', { key: a.testKey, body: { name: 'fixture' } })).body.data.id,
  // A recording link (`<call id>?expires=…&signature=…`) of a finished, recorded call of tenant A.
  rec: async () => {
    const id = await makeFixture('call');
    await t.db.query(`update calls set status = 'completed', record = true, recording_seconds = 3, duration_seconds = 3 where id = $1`, [id]);
    const url = new URL((await t.rest('GET', `/v1/voice/calls/${id}`, { key: a.testKey })).body.data.recording_url);
    return `${id}${url.search}`;
  },
  agt: async () => (await t.rest('POST', '/v1/agents', { key: a.testKey, body: AGENT })).body.data.id,
  // A listing pending review: installable by nobody yet (409 for its owner, 404 for others).
  mkt: async () => {
    const agent = await makeFixture('agt');
    tick();
    return (await t.rest('POST', '/v1/marketplace/agents', { key: a.testKey, body: { agent_id: agent, listing: { title: 'x', description: 'x', category: 'x' } } })).body.data.id;
  },
  flw: async () => (await t.rest('POST', '/v1/flows', { key: a.testKey, body: flowBody() })).body.data.id,
  fex: async () => (await t.rest('POST', `/v1/flows/${await makeFixture('flw')}/executions`, { key: a.testKey, body: { input: {} } })).body.data.id,
  // Routes with two path parameters: the fixture gives both, space-separated (see fillPath).
  'flw+fex': async () => {
    const flow = await makeFixture('flw');
    tick();
    return `${flow} ${(await t.rest('POST', `/v1/flows/${flow}/executions`, { key: a.testKey, body: { input: {} } })).body.data.id}`;
  },
  'flw+version': async () => `${await makeFixture('flw')} 1`,
  cmp: async () => {
    const list = await makeFixture('lst');
    tick();
    return (await t.rest('POST', '/v1/campaigns', { key: a.testKey, body: { name: 'fixture', channel: 'sms', list_id: list, body: 'Hi. Reply STOP' } })).body.data.id;
  },
  brand: async () => (await t.rest('POST', '/v1/compliance/brands', { key: a.testKey, body: brandBody })).body.data.id,
  dlc: async () => {
    const [brand, num] = [await makeFixture('brand'), await makeFixture('num')];
    tick();
    return (await t.rest('POST', '/v1/compliance/campaigns', { key: a.testKey, body: { ...tenDlcBody, brand_id: brand, number_ids: [num] } })).body.data.id;
  },
  inv: async () => {
    // Closes tenant A's current billing period: one invoice.
    const period = (await t.rest('GET', '/v1/billing/plan', { key: a.testKey })).body.data;
    return (await t.app.services.invoices.closePeriod({ organizationId: a.orgId, mode: 'test' }, new Date(period.current_period_start), new Date(period.current_period_end)))!;
  },
  dlv: async () => {
    const wh = await makeFixture('wh');
    tick();
    return (await t.rest('POST', `/v1/webhooks/${wh}/test`, { key: a.testKey })).body.data.delivery_id;
  },
};
const makeFixture = async (prefix: string) => {
  tick();
  const id = await fixtures[prefix]!();
  if (typeof id !== 'string') throw new Error(`fixture ${prefix} failed`);
  return id;
};

/** Bodies for routes that take one (keyed by the operation endpoint); functions give a fresh one each call. */
const restBodies: Record<string, unknown> = {
  'POST /v1/settings/api-keys': { role: 'viewer', name: 'matrix' },
  'PUT /v1/settings/ip-allowlist': { entries: [] },
  'PUT /v1/settings/hipaa': { retention_days: 365 },
  'PUT /v1/settings/hipaa/baa': { status: 'not_signed' },
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
  'POST /v1/webhooks': { url: 'http://127.0.0.1:9/hook', events: ['message.*'] },
  'PUT /v1/webhooks/{id}': { description: 'matrix' },
  'POST /v1/webhooks/{id}/test': {},
  'POST /v1/webhooks/deliveries/{id}/replay': {},
  'POST /v1/verify/send': () => ({ to: phone(), channel: 'sms' }),
  'POST /v1/verify/check': { verification_id: 'ver_01jd0000000000000000000000', code: '000000' },
  'PUT /v1/verify/settings': { code_ttl_seconds: 600 },
  'POST /v1/numbers': () => ({ number: buyable() }),
  'PATCH /v1/numbers/{id}': { friendly_name: 'matrix' },
  'POST /v1/numbers/port': portBody,
  'POST /v1/contacts': () => ({ phone: phone() }),
  'PUT /v1/contacts/{id}': { first_name: 'Matrix' },
  'POST /v1/contacts/{id}/tags': { tags: ['matrix'] },
  'PUT /v1/contacts/{id}/preferences': { email: 'opted_in' },
  'POST /v1/contacts/lists': { name: 'matrix' },
  'PUT /v1/contacts/lists/{id}': { name: 'matrix' },
  // An id that is no contact of the account: 422 for the owner, 404 (the list) for another tenant.
  'POST /v1/contacts/lists/{id}/members': { contact_ids: ['con_01jd0000000000000000000000'] },
  'POST /v1/contacts/segments': { name: 'matrix', rules: { all: [] } },
  'POST /v1/contacts/segments/preview': { rules: { all: [] } },
  'PUT /v1/contacts/segments/{id}': { name: 'matrix' },
  'POST /v1/contacts/imports': () => ({ csv: `phone\n${phone()}\n` }),
  'POST /v1/voice/calls': () => ({ to: phone(), from: voiceFrom }),
  'POST /v1/voice/calls/{id}/hangup': {},
  'POST /v1/sandbox/voice/calls/{id}/dtmf': { digits: '1' },
  'POST /v1/voice/sip-trunks': { name: 'matrix', termination_uri: 'sip:trunk.example.com' },
  'PUT /v1/voice/sip-trunks/{id}': { name: 'matrix' },
  'POST /v1/voice/ivr': ivrBody,
  'PUT /v1/voice/ivr/{id}': { name: 'matrix' },
  'POST /v1/voice/conferences': { name: 'matrix' },
  'POST /v1/voice/conferences/{id}/participants': () => ({ number: phone() }),
  'POST /v1/voice/conferences/{id}/end': {},
  'POST /v1/voice/voicemail': { name: 'matrix' },
  'PUT /v1/voice/voicemail/{id}/messages/{messageId}': { listened: true },
  'POST /v1/agents': AGENT,
  'PUT /v1/agents/{id}': { name: 'matrix' },
  'PATCH /v1/agents/{id}': { description: 'matrix' },
  'POST /v1/agents/{id}/deploy': { channels: ['web'] },
  'POST /v1/agents/{id}/pause': {},
  'POST /v1/agents/{id}/resume': {},
  'POST /v1/agents/{id}/chat': { message: 'hi' },
  'POST /v1/agents/{id}/tools': () => ({ name: `t${unique()}`, endpoint: 'http://127.0.0.1:9/tool' }),
  'POST /v1/agents/{id}/knowledge': { type: 'txt', content: 'hello world' },
  'PATCH /v1/agents/{id}/guardrails': { content_filter: true },
  'POST /v1/agents/{id}/test': { message: 'hi' },
  'POST /v1/marketplace/agents/{templateId}/install': {},
  'POST /v1/marketplace/agents': { agent_id: 'agt_01jd0000000000000000000000', listing: { title: 'x', description: 'x', category: 'x' } },
  'POST /v1/flows': flowBody,
  'PUT /v1/flows/{id}': { name: 'matrix' },
  'POST /v1/flows/{id}/executions': { input: {} },
  'POST /v1/flows/{id}/executions/{executionId}/cancel': {},
  // A list that does not exist: 404 for the allowed roles (the matrix only tells 403 apart).
  'POST /v1/campaigns': { name: 'matrix', channel: 'sms', list_id: 'lst_01jd0000000000000000000000', body: 'hi' },
  'PUT /v1/campaigns/{id}': { name: 'matrix' },
  'POST /v1/campaigns/{id}/send': {},
  'POST /v1/campaigns/{id}/pause': {},
  'POST /v1/campaigns/{id}/resume': {},
  'POST /v1/campaigns/{id}/cancel': {},
  'POST /v1/compliance/brands': brandBody,
  'POST /v1/compliance/campaigns': { ...tenDlcBody, brand_id: 'brand_01jd0000000000000000000000', number_ids: ['num_01jd0000000000000000000000'] },
  'POST /v1/billing/checkout': { priceId: 'price_growth_monthly', successUrl: 'https://example.com/ok', cancelUrl: 'https://example.com/no' },
  'POST /v1/billing/credits/topup': { amount: 1000 },
  'PUT /v1/billing/credits/auto-reload': { enabled: false },
};

/** Routes with a second path parameter: makes the sub-resource of the given (tenant A) parent id. */
const subFixtures: Record<string, (parent: string) => Promise<string>> = {
  'DELETE /v1/voice/conferences/{id}/participants/{participantId}': async (conf) =>
    (await t.rest('POST', `/v1/voice/conferences/${conf}/participants`, { key: a.testKey, body: { number: phone() } })).body.data.id,
  'PUT /v1/voice/voicemail/{id}/messages/{messageId}': async (box) => {
    const id = `vmsg_01jd${String(unique()).padStart(22, '0')}`;
    await t.db.query(`insert into voicemail_messages (id, organization_id, mode, voicemail_id, caller, duration_seconds, listened, created_at)
      values ($1, $2, 'test', $3, '+14155550100', 3, false, now())`, [id, a.orgId, box]);
    return id;
  },
};
const bodyFor = (endpoint: string): unknown => {
  const b = restBodies[endpoint];
  return typeof b === 'function' ? (b as () => unknown)() : b;
};

/** A valid document for each root field; `id` is a tenant-A resource of the field's id type. */
const gqlSamples: Record<string, { doc: string; resource?: string; vars?: () => Record<string, unknown> }> = {
  'Query.viewer': { doc: '{ viewer { role } }' },
  'Query.teamMembers': { doc: '{ teamMembers(first: 1) { edges { cursor } } }' },
  'Query.apiKeys': { doc: '{ apiKeys(first: 1) { edges { cursor } } }' },
  'Query.ipAllowlist': { doc: '{ ipAllowlist }' },
  'Query.hipaaSettings': { doc: '{ hipaaSettings { enabled } }' },
  'Query.phiAccessLog': { doc: '{ phiAccessLog(first: 1) { edges { cursor } } }' },
  'Mutation.updateHipaaSettings': { doc: 'mutation { updateHipaaSettings(retentionDays: 365) { retentionDays } }' },
  'Mutation.updateHipaaBaa': { doc: 'mutation { updateHipaaBaa(status: not_signed) { baaStatus } }' },
  'Query.auditLogs': { doc: '{ auditLogs(first: 1) { edges { cursor } } }' },
  'Query.auditLogExport': { doc: '{ auditLogExport(format: json) { count } }' },
  'Mutation.createApiKey': { doc: 'mutation { createApiKey(input: { role: viewer }) { key } }' },
  'Mutation.revokeApiKey': { doc: 'mutation($id: ID!) { revokeApiKey(id: $id) { id } }', resource: 'key' },
  'Mutation.setIpAllowlist': { doc: 'mutation { setIpAllowlist(entries: []) }' },
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
  'Query.verifications': { doc: '{ verifications(first: 1) { edges { cursor } } }' },
  'Query.verification': { doc: 'query($id: ID!) { verification(id: $id) { id } }', resource: 'ver' },
  'Query.verifySettings': { doc: '{ verifySettings { codeTtlSeconds } }' },
  'Query.sandboxVerificationCode': { doc: 'query($id: ID!) { sandboxVerificationCode(id: $id) }', resource: 'ver' },
  'Mutation.sendVerification': { doc: 'mutation($to: String!) { sendVerification(input: { to: $to, channel: sms }) { id } }', vars: () => ({ to: phone() }) },
  'Mutation.checkVerification': { doc: 'mutation { checkVerification(input: { verificationId: "ver_01jd0000000000000000000000", code: "000000" }) { id } }' },
  'Mutation.updateVerifySettings': { doc: 'mutation { updateVerifySettings(input: { codeTtlSeconds: 600 }) { codeTtlSeconds } }' },
  'Query.availableNumbers': { doc: '{ availableNumbers(country: "US", limit: 1) { number } }' },
  'Query.phoneNumbers': { doc: '{ phoneNumbers(first: 1) { edges { cursor } } }' },
  'Query.phoneNumber': { doc: 'query($id: ID!) { phoneNumber(id: $id) { id } }', resource: 'num' },
  'Query.portRequests': { doc: '{ portRequests(first: 1) { edges { cursor } } }' },
  'Query.portRequest': { doc: 'query($id: ID!) { portRequest(id: $id) { id } }', resource: 'port' },
  'Mutation.buyNumber': { doc: 'mutation($number: String!) { buyNumber(input: { number: $number }) { id } }', vars: () => ({ number: buyable() }) },
  'Mutation.updateNumber': { doc: 'mutation($id: ID!) { updateNumber(id: $id, input: { friendlyName: "x" }) { id } }', resource: 'num' },
  'Mutation.releaseNumber': { doc: 'mutation($id: ID!) { releaseNumber(id: $id) }', resource: 'num' },
  'Mutation.createPortRequest': {
    doc: 'mutation($n: String!) { createPortRequest(input: { numbers: [$n], currentCarrier: "AT&T", authorizationName: "Jane Doe" }) { id } }',
    vars: () => ({ n: portable() }),
  },
  'Query.contacts': { doc: '{ contacts(first: 1, search: "jane") { edges { cursor } } }' },
  'Query.contact': { doc: 'query($id: ID!) { contact(id: $id) { id consent { sms { status } } } }', resource: 'con' },
  'Query.contactActivity': { doc: 'query($id: ID!) { contactActivity(id: $id, first: 1) { edges { cursor } } }', resource: 'con' },
  'Query.contactConsentHistory': { doc: 'query($id: ID!) { contactConsentHistory(id: $id, first: 1) { edges { cursor } } }', resource: 'con' },
  'Query.contactOptOuts': { doc: '{ contactOptOuts(first: 1, channel: sms) { edges { cursor } } }' },
  'Query.contactLists': { doc: '{ contactLists(first: 1) { edges { cursor } } }' },
  'Query.contactList': { doc: 'query($id: ID!) { contactList(id: $id) { id } }', resource: 'lst' },
  'Query.contactListMembers': { doc: 'query($id: ID!) { contactListMembers(id: $id, first: 1) { edges { cursor } } }', resource: 'lst' },
  'Query.segments': { doc: '{ segments(first: 1) { edges { cursor } } }' },
  'Query.segment': { doc: 'query($id: ID!) { segment(id: $id) { id } }', resource: 'seg' },
  'Query.segmentPreview': { doc: 'query($id: ID!) { segmentPreview(id: $id) { count } }', resource: 'seg' },
  'Query.segmentRulesPreview': { doc: '{ segmentRulesPreview(rules: { all: [] }) { count } }' },
  'Query.contactImport': { doc: 'query($id: ID!) { contactImport(id: $id) { id } }', resource: 'imp' },
  'Mutation.createContact': { doc: 'mutation($phone: String!) { createContact(input: { phone: $phone }) { id } }', vars: () => ({ phone: phone() }) },
  'Mutation.updateContact': { doc: 'mutation($id: ID!) { updateContact(id: $id, input: { firstName: "x" }) { id } }', resource: 'con' },
  'Mutation.deleteContact': { doc: 'mutation($id: ID!) { deleteContact(id: $id) }', resource: 'con' },
  'Mutation.addContactTags': { doc: 'mutation($id: ID!) { addContactTags(id: $id, tags: ["x"]) { id } }', resource: 'con' },
  'Mutation.removeContactTag': { doc: 'mutation($id: ID!) { removeContactTag(id: $id, tag: "x") { id } }', resource: 'con' },
  'Mutation.setContactPreferences': { doc: 'mutation($id: ID!) { setContactPreferences(id: $id, preferences: { email: opted_in }) { id } }', resource: 'con' },
  'Mutation.createContactList': { doc: 'mutation { createContactList(input: { name: "x" }) { id } }' },
  'Mutation.updateContactList': { doc: 'mutation($id: ID!) { updateContactList(id: $id, input: { name: "x" }) { id } }', resource: 'lst' },
  'Mutation.deleteContactList': { doc: 'mutation($id: ID!) { deleteContactList(id: $id) }', resource: 'lst' },
  'Mutation.addContactListMembers': { doc: 'mutation($id: ID!) { addContactListMembers(id: $id, contactIds: ["con_01jd0000000000000000000000"]) { id } }', resource: 'lst' },
  'Mutation.removeContactListMember': { doc: 'mutation($id: ID!) { removeContactListMember(id: $id, contactId: "con_01jd0000000000000000000000") }', resource: 'lst' },
  'Mutation.createSegment': { doc: 'mutation { createSegment(input: { name: "x", rules: { all: [] } }) { id } }' },
  'Mutation.updateSegment': { doc: 'mutation($id: ID!) { updateSegment(id: $id, input: { name: "x" }) { id } }', resource: 'seg' },
  'Mutation.deleteSegment': { doc: 'mutation($id: ID!) { deleteSegment(id: $id) }', resource: 'seg' },
  'Query.flows': { doc: '{ flows(first: 1) { edges { cursor } } }' },
  'Query.flow': { doc: 'query($id: ID!) { flow(id: $id) { id version } }', resource: 'flw' },
  'Query.flowVersions': { doc: 'query($id: ID!) { flowVersions(flowId: $id, first: 1) { edges { cursor } } }', resource: 'flw' },
  'Query.flowVersion': { doc: 'query($id: ID!) { flowVersion(flowId: $id, version: 1) { version } }', resource: 'flw' },
  'Query.flowExecutions': { doc: '{ flowExecutions(first: 1) { edges { cursor } } }' },
  'Query.flowExecution': { doc: 'query($id: ID!) { flowExecution(id: $id) { id status } }', resource: 'fex' },
  'Mutation.createFlow': { doc: 'mutation($input: CreateFlowInput!) { createFlow(input: $input) { id } }', vars: () => ({ input: flowBody() }) },
  'Mutation.updateFlow': { doc: 'mutation($id: ID!) { updateFlow(id: $id, input: { name: "x" }) { version } }', resource: 'flw' },
  'Mutation.deleteFlow': { doc: 'mutation($id: ID!) { deleteFlow(id: $id) }', resource: 'flw' },
  'Mutation.startFlowExecution': { doc: 'mutation($id: ID!) { startFlowExecution(flowId: $id, input: {}) { id } }', resource: 'flw' },
  'Mutation.cancelFlowExecution': { doc: 'mutation($id: ID!) { cancelFlowExecution(id: $id) { status } }', resource: 'fex' },
  'Query.campaigns': { doc: '{ campaigns(first: 1, search: "x") { edges { cursor } } }' },
  'Query.campaign': { doc: 'query($id: ID!) { campaign(id: $id) { id stats { sent } } }', resource: 'cmp' },
  'Query.campaignStats': { doc: '{ campaignStats { campaigns sent } }' },
  'Mutation.createCampaign': { doc: 'mutation { createCampaign(input: { name: "x", channel: sms, listId: "lst_01jd0000000000000000000000", body: "hi" }) { id } }' },
  'Mutation.updateCampaign': { doc: 'mutation($id: ID!) { updateCampaign(id: $id, input: { name: "x" }) { id } }', resource: 'cmp' },
  'Mutation.deleteCampaign': { doc: 'mutation($id: ID!) { deleteCampaign(id: $id) }', resource: 'cmp' },
  'Mutation.sendCampaign': { doc: 'mutation($id: ID!) { sendCampaign(id: $id) { id } }', resource: 'cmp' },
  'Mutation.pauseCampaign': { doc: 'mutation($id: ID!) { pauseCampaign(id: $id) { id } }', resource: 'cmp' },
  'Mutation.resumeCampaign': { doc: 'mutation($id: ID!) { resumeCampaign(id: $id) { id } }', resource: 'cmp' },
  'Mutation.cancelCampaign': { doc: 'mutation($id: ID!) { cancelCampaign(id: $id) { id } }', resource: 'cmp' },
  'Query.complianceBrands': { doc: '{ complianceBrands(first: 1) { edges { cursor } } }' },
  'Query.complianceBrand': { doc: 'query($id: ID!) { complianceBrand(id: $id) { id } }', resource: 'brand' },
  'Query.tenDlcCampaigns': { doc: '{ tenDlcCampaigns(first: 1) { edges { cursor } } }' },
  'Query.tenDlcCampaign': { doc: 'query($id: ID!) { tenDlcCampaign(id: $id) { id } }', resource: 'dlc' },
  'Mutation.createComplianceBrand': {
    doc: 'mutation { createComplianceBrand(input: { companyName: "Acme", ein: "12-3456789", country: "US", entityType: private_profit, vertical: retail, contactEmail: "a@acme.test", contactPhone: "+14155550100" }) { id } }',
  },
  'Mutation.createTenDlcCampaign': {
    doc: `mutation { createTenDlcCampaign(input: { brandId: "brand_01jd0000000000000000000000", useCase: marketing, description: "${tenDlcBody.description}", sampleMessages: ["${tenDlcBody.sample_messages[0]}"], messageFlow: "${tenDlcBody.message_flow}", optInType: web_form, numberIds: ["num_01jd0000000000000000000000"] }) { id } }`,
  },
  'Mutation.importContacts': { doc: 'mutation($csv: String!) { importContacts(csv: $csv) { id } }', vars: () => ({ csv: `phone\n${phone()}\n` }) },
  'Query.calls': { doc: '{ calls(first: 1, status: busy) { edges { cursor } } }' },
  'Query.call': { doc: 'query($id: ID!) { call(id: $id) { id steps { type } } }', resource: 'call' },
  'Query.sipTrunks': { doc: '{ sipTrunks(first: 1) { edges { cursor } } }' },
  'Query.sipTrunk': { doc: 'query($id: ID!) { sipTrunk(id: $id) { id } }', resource: 'trunk' },
  'Query.ivrFlows': { doc: '{ ivrFlows(first: 1) { edges { cursor } } }' },
  'Query.ivrFlow': { doc: 'query($id: ID!) { ivrFlow(id: $id) { id optionsCount } }', resource: 'ivr' },
  'Query.conferences': { doc: '{ conferences(first: 1) { edges { cursor } } }' },
  'Query.conference': { doc: 'query($id: ID!) { conference(id: $id) { id pin } }', resource: 'conf' },
  'Query.conferenceParticipants': { doc: 'query($id: ID!) { conferenceParticipants(id: $id, first: 1) { edges { cursor } } }', resource: 'conf' },
  'Query.voicemailBoxes': { doc: '{ voicemailBoxes(first: 1) { edges { cursor } } }' },
  'Query.voicemailBox': { doc: 'query($id: ID!) { voicemailBox(id: $id) { id } }', resource: 'vmail' },
  'Query.voicemailMessages': { doc: 'query($id: ID!) { voicemailMessages(id: $id, first: 1) { edges { cursor } } }', resource: 'vmail' },
  'Mutation.createCall': { doc: 'mutation($to: String!, $from: String!) { createCall(input: { to: $to, from: $from }) { id } }', vars: () => ({ to: phone(), from: voiceFrom }) },
  'Mutation.hangupCall': { doc: 'mutation($id: ID!) { hangupCall(id: $id) { id } }', resource: 'call' },
  'Mutation.sandboxCallDtmf': { doc: 'mutation($id: ID!) { sandboxCallDtmf(id: $id, digits: "1") { id } }', resource: 'call' },
  'Mutation.createSipTrunk': { doc: 'mutation { createSipTrunk(input: { name: "x", terminationUri: "sip:trunk.example.com" }) { id } }' },
  'Mutation.updateSipTrunk': { doc: 'mutation($id: ID!) { updateSipTrunk(id: $id, input: { name: "x" }) { id } }', resource: 'trunk' },
  'Mutation.deleteSipTrunk': { doc: 'mutation($id: ID!) { deleteSipTrunk(id: $id) }', resource: 'trunk' },
  'Mutation.createIvrFlow': { doc: 'mutation { createIvrFlow(input: { name: "x", greeting: "Hi", menu: { options: [{ key: "1", action: "hangup" }] } }) { id } }' },
  'Mutation.updateIvrFlow': { doc: 'mutation($id: ID!) { updateIvrFlow(id: $id, input: { name: "x" }) { id } }', resource: 'ivr' },
  'Mutation.deleteIvrFlow': { doc: 'mutation($id: ID!) { deleteIvrFlow(id: $id) }', resource: 'ivr' },
  'Mutation.createConference': { doc: 'mutation { createConference(input: { name: "x" }) { id } }' },
  'Mutation.addConferenceParticipant': { doc: 'mutation($id: ID!, $n: String!) { addConferenceParticipant(id: $id, number: $n) { id } }', resource: 'conf', vars: () => ({ n: phone() }) },
  'Mutation.removeConferenceParticipant': { doc: 'mutation($id: ID!) { removeConferenceParticipant(id: $id, participantId: "cpt_01jd0000000000000000000000") }', resource: 'conf' },
  'Mutation.endConference': { doc: 'mutation($id: ID!) { endConference(id: $id) { id } }', resource: 'conf' },
  'Mutation.createVoicemailBox': { doc: 'mutation { createVoicemailBox(input: { name: "x" }) { id } }' },
  'Mutation.markVoicemailMessage': { doc: 'mutation($id: ID!) { markVoicemailMessage(id: $id, messageId: "vmsg_01jd0000000000000000000000") { id } }', resource: 'vmail' },
  'Query.agents': { doc: '{ agents(first: 1) { edges { cursor } } }' },
  'Query.agent': { doc: 'query($id: ID!) { agent(id: $id) { id } }', resource: 'agt' },
  'Query.agentConversations': { doc: 'query($id: ID!) { agentConversations(agentId: $id, first: 1) { edges { cursor } } }', resource: 'agt' },
  'Query.agentConversationMessages': { doc: 'query($id: ID!) { agentConversationMessages(agentId: $id, conversationId: "conv_01jd0000000000000000000000", first: 1) { edges { cursor } } }', resource: 'agt' },
  'Query.marketplaceAgents': { doc: '{ marketplaceAgents }' },
  'Mutation.createAgent': { doc: 'mutation { createAgent(input: { name: "x", type: task, model: "sandbox-1", systemPrompt: "Be brief." }) { agent { id } } }' },
  'Mutation.replaceAgent': { doc: 'mutation($id: ID!) { replaceAgent(id: $id, input: { name: "x" }) { id } }', resource: 'agt' },
  'Mutation.updateAgent': { doc: 'mutation($id: ID!) { updateAgent(id: $id, input: { description: "x" }) { id } }', resource: 'agt' },
  'Mutation.deleteAgent': { doc: 'mutation($id: ID!) { deleteAgent(id: $id) }', resource: 'agt' },
  'Mutation.deployAgent': { doc: 'mutation($id: ID!) { deployAgent(id: $id, channels: ["web"]) { id } }', resource: 'agt' },
  'Mutation.pauseAgent': { doc: 'mutation($id: ID!) { pauseAgent(id: $id) { id } }', resource: 'agt' },
  'Mutation.resumeAgent': { doc: 'mutation($id: ID!) { resumeAgent(id: $id) { id } }', resource: 'agt' },
  'Mutation.addAgentTool': { doc: 'mutation($id: ID!) { addAgentTool(id: $id, tool: { name: "human_handoff" }) { id } }', resource: 'agt' },
  'Mutation.updateAgentGuardrails': { doc: 'mutation($id: ID!) { updateAgentGuardrails(id: $id, guardrails: { content_filter: true }) { id } }', resource: 'agt' },
  'Mutation.uploadAgentKnowledge': { doc: 'mutation($id: ID!) { uploadAgentKnowledge(id: $id, type: "txt", content: "hello world") { id } }', resource: 'agt' },
  'Mutation.chatWithAgent': { doc: 'mutation($id: ID!) { chatWithAgent(agentId: $id, message: "hi") { content } }', resource: 'agt' },
  'Mutation.testAgent': { doc: 'mutation($id: ID!) { testAgent(id: $id, message: "hi") }', resource: 'agt' },
  'Mutation.installMarketplaceAgent': { doc: 'mutation { installMarketplaceAgent(templateId: "customer-survey") { agent { id } } }' },
  'Mutation.submitMarketplaceAgent': { doc: 'mutation($id: ID!) { submitMarketplaceAgent(agentId: $id, listing: { title: "x", description: "x", category: "x" }) { id } }', resource: 'agt' },
  'Query.billingPlans': { doc: '{ billingPlans { id } }' },
  'Query.billingPlan': { doc: '{ billingPlan { planId status } }' },
  'Query.credits': { doc: '{ credits { balance } }' },
  'Query.billingUsage': { doc: '{ billingUsage { voiceMinutesUsed } }' },
  'Query.billingUsageHistory': { doc: '{ billingUsageHistory(startDate: "2026-01-01", endDate: "2026-01-02") { messagesTotal } }' },
  'Query.invoices': { doc: '{ invoices(first: 1) { edges { cursor } } }' },
  'Mutation.createCheckout': { doc: 'mutation { createCheckout(input: { priceId: "price_growth_monthly", successUrl: "https://example.com/ok", cancelUrl: "https://example.com/no" }) { checkoutUrl } }' },
  'Mutation.topUpCredits': { doc: 'mutation { topUpCredits(amount: 1000) { balance } }' },
  'Mutation.setAutoReload': { doc: 'mutation { setAutoReload(input: { enabled: false }) { balance } }' },
};

async function sampleVars(sample: { resource?: string; vars?: () => Record<string, unknown> }): Promise<Record<string, unknown>> {
  tick();
  const vars = sample.vars?.() ?? {};
  if (!sample.resource) return vars;
  if (!fixtures[sample.resource]) throw new Error(`no fixture for resource ${sample.resource}`);
  return { ...vars, id: await makeFixture(sample.resource) };
}

// Every module adds routes and fields: the matrix grows with the service (and the machine may be busy).
describe('role matrix', { timeout: 180_000 }, () => {
  it('every REST route allows exactly the roles its operation declares', async () => {
    const failures: string[] = [];
    for (const route of t.app.rest.routes) {
      const endpoint = route.operation.endpoint;
      if (['POST', 'PUT', 'PATCH'].includes(route.method) && !(endpoint in restBodies)) failures.push(`${endpoint}: add a sample body`);
      for (const role of ROLES) {
        let path = route.path;
        if (route.path.includes('{')) {
          if (!route.resource || !fixtures[route.resource]) { failures.push(`${endpoint}: no fixture for its {id}`); break; }
          path = fillPath(path, await makeFixture(route.resource));
        }
        tick();
        const r = await t.rest(route.method, path, { key: keys.get(role)!, body: bodyFor(endpoint) });
        const denied = r.status === 403 && r.body?.error?.code === 'INSUFFICIENT_PERMISSIONS';
        const allowed = route.operation.roles.includes(role);
        if (allowed === denied) failures.push(`${endpoint} as ${role}: expected ${allowed ? 'allowed' : 'denied'}, got ${r.status} ${r.text.slice(0, 120)}`);
      }
    }
    expect(failures).toEqual([]);
  }, MATRIX_TIMEOUT_MS);

  it('every GraphQL root field declares roles and allows exactly them', async () => {
    const failures: string[] = [];
    for (const type of [schema.getQueryType()!, schema.getMutationType()!]) {
      for (const field of Object.values(type.getFields())) {
        const key = `${type.name}.${field.name}`;
        if (field.name === 'node' || field.name === 'nodes') continue; // checked through each type's get operation
        const roles = FIELD_ROLES.get(key);
        const sample = gqlSamples[key];
        if (!roles) { failures.push(`${key}: no roles registered (use guard())`); continue; }
        if (!sample) { failures.push(`${key}: add a sample document`); continue; }
        for (const role of ROLES) {
          const r = await t.gql(sample.doc, await sampleVars(sample), { key: keys.get(role)! });
          const denied = (r.body.errors ?? []).some((e: any) => e.extensions?.code === 'INSUFFICIENT_PERMISSIONS');
          const allowed = roles.includes(role);
          if (allowed === denied) failures.push(`${key} as ${role}: expected ${allowed ? 'allowed' : 'denied'}, got ${r.text.slice(0, 160)}`);
        }
      }
    }
    expect(failures).toEqual([]);
  }, MATRIX_TIMEOUT_MS);
});

/** NOT_FOUND, or a resource's own not-found code (CALL_NOT_FOUND). */
const isNotFound = (code: unknown) => code === 'NOT_FOUND' || code === 'CALL_NOT_FOUND';

describe('cross-tenant access', () => {
  it('every REST route that takes an id answers 404 for another tenant\'s resource', async () => {
    const failures: string[] = [];
    const idRoutes = t.app.rest.routes.filter((r) => r.path.includes('{'));
    expect(idRoutes.length).toBeGreaterThan(0);
    for (const route of idRoutes) {
      if (!route.resource || !fixtures[route.resource]) { failures.push(`${route.operation.endpoint}: declare resource and a fixture`); continue; }
      const id = await makeFixture(route.resource);
      for (const key of [b.testKey, b.liveKey]) {
        tick();
        const r = await t.rest(route.method, fillPath(route.path, id), { key, body: bodyFor(route.operation.endpoint) });
        if (r.status !== 404 || !isNotFound(r.body?.error?.code)) failures.push(`${route.operation.endpoint}: ${r.status} ${r.text.slice(0, 120)}`);
      }
      // The owner still reaches it: the 404 above is tenancy, not a bad id (a 409 for a state rule is fine).
      tick();
      const sub = subFixtures[route.operation.endpoint];
      const ownPath = sub ? route.path.replace(/\{\w+\}/, id).replace(/\{\w+\}/, await sub(id)) : fillPath(route.path, id);
      const own = await t.rest(route.method, ownPath, { key: a.testKey, body: bodyFor(route.operation.endpoint) });
      if (own.status === 404 || own.status >= 500) failures.push(`${route.operation.endpoint}: owner got ${own.status} ${own.text.slice(0, 120)}`);
    }
    expect(failures).toEqual([]);
  }, MATRIX_TIMEOUT_MS);

  it('every GraphQL root field with an ID argument, and node(id), hide other tenants\' resources', async () => {
    const failures: string[] = [];
    const takesId = (f: GraphQLField<unknown, unknown>) => f.args.some((arg) => getNamedType(arg.type).name === 'ID' && isNonNullType(arg.type));
    for (const type of [schema.getQueryType()!, schema.getMutationType()!]) {
      for (const field of Object.values(type.getFields()).filter(takesId)) {
        if (field.name === 'node' || field.name === 'nodes') continue;
        const key = `${type.name}.${field.name}`;
        const sample = gqlSamples[key];
        if (!sample?.resource) { failures.push(`${key}: add a sample with a resource`); continue; }
        const r = await t.gql(sample.doc, await sampleVars(sample), { key: b.testKey });
        if (!isNotFound(r.body.errors?.[0]?.extensions?.code)) failures.push(`${key}: ${r.text.slice(0, 160)}`);
      }
    }
    // `rec` is a recording link of a call and `a+b` fixtures are id pairs, not node ids.
    for (const prefix of Object.keys(fixtures).filter((p) => p !== 'rec' && !p.includes('+'))) {
      const id = await makeFixture(prefix);
      const other = await t.gql('query($id: ID!) { node(id: $id) { id } }', { id }, { key: b.testKey });
      if (!isNotFound(other.body.errors?.[0]?.extensions?.code)) failures.push(`node(${prefix}): ${other.text.slice(0, 160)}`);
      const own = await t.gql('query($id: ID!) { node(id: $id) { id } }', { id }, { key: a.testKey });
      if (own.body.data?.node?.id !== id) failures.push(`node(${prefix}) as owner: ${own.text.slice(0, 160)}`);
    }
    const org = await t.gql('query($id: ID!) { node(id: $id) { id } }', { id: a.orgId }, { key: b.testKey });
    if (org.body.errors?.[0]?.extensions?.code !== 'NOT_FOUND') failures.push(`node(org): ${org.text.slice(0, 160)}`);
    expect(failures).toEqual([]);
  }, MATRIX_TIMEOUT_MS);

  it('the same id string is the REST id and the Relay global id', async () => {
    const id = await makeFixture('key');
    const rest = await t.rest('GET', `/v1/settings/api-keys/${id}`, { key: a.testKey });
    const gql = await t.gql('query($id: ID!) { node(id: $id) { id __typename ... on ApiKey { last4 } } }', { id }, { key: a.testKey });
    expect(gql.body.data.node).toEqual({ id, __typename: 'ApiKey', last4: rest.body.data.last4 });
  });
});
