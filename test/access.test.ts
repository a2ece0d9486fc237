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
  t = await startTestApp({ env: { WEBHOOKS_ALLOW_LOOPBACK: '1' } });
  // Enterprise: 100 requests/s burst, so the matrix never queues on the manual clock.
  a = await t.createOrg('enterprise', 'Tenant A');
  b = await t.createOrg('enterprise', 'Tenant B');
  for (const role of ROLES) keys.set(role, await t.createKey(a.orgId, role));
});
afterAll(async () => { await t?.close(); });

/** Moves the manual clock a second on, so no key ever waits in the burst queue. */
const tick = () => (t.clock as ManualClock).advance(1000);
let seq = 0;
const unique = () => ++seq;
const phone = () => `+1415555${String(1000 + unique()).padStart(4, '0')}`;
/** Sandbox-inventory numbers nobody holds yet: one range to buy, one to port in. */
const buyable = () => `+1646555${String(1000 + unique()).padStart(4, '0')}`;
const portable = () => `+1917555${String(1000 + unique()).padStart(4, '0')}`;
const portBody = () => ({ numbers: [portable()], current_carrier: 'AT&T', authorization_name: 'Jane Doe' });

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
  'POST /v1/billing/checkout': { priceId: 'price_growth_monthly', successUrl: 'https://example.com/ok', cancelUrl: 'https://example.com/no' },
  'POST /v1/billing/credits/topup': { amount: 1000 },
  'PUT /v1/billing/credits/auto-reload': { enabled: false },
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
  'Mutation.importContacts': { doc: 'mutation($csv: String!) { importContacts(csv: $csv) { id } }', vars: () => ({ csv: `phone\n${phone()}\n` }) },
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

/** Every context adds routes and fields (each tried with every role): the matrix outgrows the default 30 s. */
const MATRIX_TIMEOUT_MS = 120_000;

describe('role matrix', () => {
  it('every REST route allows exactly the roles its operation declares', async () => {
    const failures: string[] = [];
    for (const route of t.app.rest.routes) {
      const endpoint = route.operation.endpoint;
      if (['POST', 'PUT', 'PATCH'].includes(route.method) && !(endpoint in restBodies)) failures.push(`${endpoint}: add a sample body`);
      for (const role of ROLES) {
        let path = route.path;
        if (route.path.includes('{')) {
          if (!route.resource || !fixtures[route.resource]) { failures.push(`${endpoint}: no fixture for its {id}`); break; }
          path = path.replace(/\{\w+\}/, await makeFixture(route.resource));
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
        const r = await t.rest(route.method, route.path.replace(/\{\w+\}/, id), { key, body: bodyFor(route.operation.endpoint) });
        if (r.status !== 404 || r.body?.error?.code !== 'NOT_FOUND') failures.push(`${route.operation.endpoint}: ${r.status} ${r.text.slice(0, 120)}`);
      }
      // The owner still reaches it: the 404 above is tenancy, not a bad id (a 409 for a state rule is fine).
      tick();
      const own = await t.rest(route.method, route.path.replace(/\{\w+\}/, id), { key: a.testKey, body: bodyFor(route.operation.endpoint) });
      if (own.status === 404 || own.status >= 500) failures.push(`${route.operation.endpoint}: owner got ${own.status} ${own.text.slice(0, 120)}`);
    }
    expect(failures).toEqual([]);
  });

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
        if (r.body.errors?.[0]?.extensions?.code !== 'NOT_FOUND') failures.push(`${key}: ${r.text.slice(0, 160)}`);
      }
    }
    for (const prefix of Object.keys(fixtures)) {
      const id = await makeFixture(prefix);
      const other = await t.gql('query($id: ID!) { node(id: $id) { id } }', { id }, { key: b.testKey });
      if (other.body.errors?.[0]?.extensions?.code !== 'NOT_FOUND') failures.push(`node(${prefix}): ${other.text.slice(0, 160)}`);
      const own = await t.gql('query($id: ID!) { node(id: $id) { id } }', { id }, { key: a.testKey });
      if (own.body.data?.node?.id !== id) failures.push(`node(${prefix}) as owner: ${own.text.slice(0, 160)}`);
    }
    const org = await t.gql('query($id: ID!) { node(id: $id) { id } }', { id: a.orgId }, { key: b.testKey });
    if (org.body.errors?.[0]?.extensions?.code !== 'NOT_FOUND') failures.push(`node(org): ${org.text.slice(0, 160)}`);
    expect(failures).toEqual([]);
  });

  it('the same id string is the REST id and the Relay global id', async () => {
    const id = await makeFixture('key');
    const rest = await t.rest('GET', `/v1/settings/api-keys/${id}`, { key: a.testKey });
    const gql = await t.gql('query($id: ID!) { node(id: $id) { id __typename ... on ApiKey { last4 } } }', { id }, { key: a.testKey });
    expect(gql.body.data.node).toEqual({ id, __typename: 'ApiKey', last4: rest.body.data.last4 });
  });
});
