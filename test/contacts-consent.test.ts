/**
 * Contacts' consent over HTTP (REST and GraphQL twins): preferences, the consent history and the
 * opt-outs list, consent enforced on sends (and the voice check), inbound SMS keywords.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ServiceError } from '../src/platform/errors.ts';
import { expectError, expectGqlError } from './helpers/assertions.ts';
import { contactsHelpers, startContactsApp } from './helpers/contacts.ts';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';

const file = useFileApp(startContactsApp);
let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let viewerKey: string;
beforeAll(() => { ({ t, org, other, viewerKey } = file()); });
const { tick, phone, lastSeq, rest, create } = contactsHelpers(() => t, () => org);

describe('consent', () => {
  it('sets preferences, lists opt-outs and refuses sends to opted-out recipients (REST and GraphQL)', async () => {
    const p = phone();
    const c = await create({ phone: p, email: `optout${lastSeq()}@example.com`, first_name: 'Olive' });
    const set = await rest('PUT', `/v1/contacts/${c.id}/preferences`, { sms: 'opted_out', email: 'opted_in' });
    expect(set.status, set.text).toBe(200);
    expect(set.body.data.consent.sms).toMatchObject({ status: 'opted_out', source: 'api' });
    expect(set.body.data.consent.email.status).toBe('opted_in');
    expectError(await rest('PUT', `/v1/contacts/${c.id}/preferences`, { fax: 'opted_out' }), 422, 'VALIDATION_ERROR');
    expectError(await rest('PUT', `/v1/contacts/${c.id}/preferences`, { sms: 'maybe' }), 422, 'VALIDATION_ERROR');
    expectError(await rest('PUT', `/v1/contacts/${c.id}/preferences`, {}), 422, 'VALIDATION_ERROR');

    const before = (await t.db.query('select count(*)::int as n from messages where "to" = $1', [p])).rows[0].n;
    const refused = expectError(await rest('POST', '/v1/messages/sms', { to: p, body: 'promo' }), 422, 'RECIPIENT_OPTED_OUT');
    expect(refused.error.details).toMatchObject({ channel: 'sms', contact_id: c.id });
    // The opt-out is reported before a sender problem (both are looked up at once), every time.
    for (let i = 0; i < 3; i++) {
      tick();
      expectError(await rest('POST', '/v1/messages/sms', { to: p, body: 'promo', from: '+14155550199' }), 422, 'RECIPIENT_OPTED_OUT');
    }
    tick();
    expectError(await rest('POST', '/v1/messages/sms', { to: phone(), body: 'hello', from: '+14155550199' }), 422, 'SENDER_NOT_CONFIGURED');
    tick();
    const gql = await t.gql('mutation($to: String!) { sendSms(input: { to: $to, body: "promo" }) { id } }', { to: p }, { key: org.testKey });
    expectGqlError(gql, 'RECIPIENT_OPTED_OUT');
    expect((await t.db.query('select count(*)::int as n from messages where "to" = $1', [p])).rows[0].n).toBe(before);
    // Other channels are not affected; email was opted in.
    expect((await rest('POST', '/v1/messages/whatsapp', { to: p, type: 'template', template: { name: 'nope', language: 'en' } })).body.error?.code).not.toBe('RECIPIENT_OPTED_OUT');
    expect((await rest('POST', '/v1/messages/email', { to: c.email, subject: 'Hi', text: 'hi' })).status).toBe(201);

    const optouts = await rest('GET', '/v1/contacts/optouts?channel=sms', undefined, viewerKey);
    expect(optouts.body.data.map((x: { id: string }) => x.id)).toContain(c.id);
    expect((await rest('GET', '/v1/contacts/optouts?channel=email')).body.data.map((x: { id: string }) => x.id)).not.toContain(c.id);
    expect((await rest('GET', '/v1/contacts/optouts?search=olive')).body.data.map((x: { id: string }) => x.id)).toEqual([c.id]);
    expectError(await rest('GET', '/v1/contacts/optouts?channel=fax'), 422, 'VALIDATION_ERROR');

    tick();
    const back = await t.gql('mutation($id: ID!) { setContactPreferences(id: $id, preferences: { sms: opted_in }) { consent { sms { status source } } } }', { id: c.id }, { key: org.testKey });
    expect(back.body.data.setContactPreferences.consent.sms).toEqual({ status: 'opted_in', source: 'api' });
    expect((await rest('POST', '/v1/messages/sms', { to: p, body: 'welcome back' })).status).toBe(201);
  });

  it('answers STOP, START and HELP keywords (exact, trimmed, any case) and creates the contact', async () => {
    const p = phone();
    const outbound = async () => (await t.db.query(`select body from messages where "to" = $1 and direction = 'outbound' order by id`, [p])).rows.map((r) => r.body);
    const inbound = async (body: string) => {
      const r = await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from: p, body });
      expect(r.status, r.text).toBe(201);
    };
    await inbound('please stop');
    expect(await outbound()).toEqual([]);
    await inbound('  Stop \n');
    const found = await rest('GET', `/v1/contacts?search=${encodeURIComponent(p)}`);
    expect(found.body.data).toHaveLength(1);
    expect(found.body.data[0].consent.sms).toMatchObject({ status: 'opted_out', source: 'keyword' });
    expect(await outbound()).toHaveLength(1);
    expect((await outbound())[0]).toMatch(/unsubscribed/);
    // A second STOP changes nothing and sends nothing more; sends are refused.
    await inbound('UNSUBSCRIBE');
    expect(await outbound()).toHaveLength(1);
    expectError(await rest('POST', '/v1/messages/sms', { to: p, body: 'hi' }), 422, 'RECIPIENT_OPTED_OUT');
    // HELP is answered even when opted out.
    await inbound('help');
    expect((await outbound())[1]).toMatch(/Reply STOP/);
    await inbound('unstop');
    expect((await outbound())[2]).toMatch(/resubscribed/);
    expect((await rest('GET', `/v1/contacts/${found.body.data[0].id}`)).body.data.consent.sms.status).toBe('opted_in');
    expect((await rest('POST', '/v1/messages/sms', { to: p, body: 'hi' })).status).toBe(201);
    for (const word of ['STOPALL', 'cancel', 'End', 'QUIT']) {
      await inbound(word);
      expect((await rest('GET', `/v1/contacts/${found.body.data[0].id}`)).body.data.consent.sms.status).toBe('opted_out');
      await inbound('START');
    }
  });

  it('keeps an append-only history of every consent change (create, API, keyword, import), paginated, REST and GraphQL', async () => {
    const p = phone();
    const c = await create({ phone: p, email: `history${lastSeq()}@example.com`, consent: { email: 'opted_in' } });
    const put = await rest('PUT', `/v1/contacts/${c.id}/preferences`, { sms: 'opted_out', voice: 'opted_out', source: 'campaign_link' });
    expect(put.status, put.text).toBe(200);
    // Setting a status a channel already has records nothing.
    expect((await rest('PUT', `/v1/contacts/${c.id}/preferences`, { sms: 'opted_out' })).status).toBe(200);
    const start = await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from: p, body: 'start' });
    expect(start.status, start.text).toBe(201);
    // An import changes whatsapp (sms is already opted in: no row); a bad consent value rejects its row.
    const imp = await rest('POST', '/v1/contacts/imports', { csv: `phone,consent.whatsapp,consent.sms\n${p},opted_out,opted_in\n${phone()},maybe,\n` });
    expect(imp.status, imp.text).toBe(202);
    await t.app.services.contacts.runImport({ organizationId: org.orgId, mode: 'test' }, imp.body.data.id);
    const report = (await rest('GET', `/v1/contacts/imports/${imp.body.data.id}`)).body.data;
    expect(report).toMatchObject({ accepted: 1, rejected: 1 });
    expect(report.rejections[0]).toMatchObject({ row: 3, code: 'VALIDATION_ERROR', field: 'consent.whatsapp' });

    const h = await rest('GET', `/v1/contacts/${c.id}/preferences/history`, undefined, viewerKey);
    expect(h.status, h.text).toBe(200);
    expect(h.body.data.map((x: any) => [x.channel, x.previous_status, x.status, x.source])).toEqual([
      ['whatsapp', 'unknown', 'opted_out', 'import'],
      ['sms', 'opted_out', 'opted_in', 'keyword'],
      ['voice', 'unknown', 'opted_out', 'campaign_link'],
      ['sms', 'unknown', 'opted_out', 'campaign_link'],
      ['email', 'unknown', 'opted_in', 'api'],
    ]);
    const [imported, keyword, , viaApi] = h.body.data;
    expect(imported).toMatchObject({ contact_id: c.id, actor: null, details: { import_id: imp.body.data.id, row: 2 } });
    expect(keyword).toMatchObject({ actor: null, details: { keyword: 'START', message_id: start.body.data.id } });
    expect(viaApi).toMatchObject({ actor: { type: 'api_key' }, request_id: put.body.meta.request_id, details: {} });
    expect(viaApi.actor.id).toMatch(/^key_/);
    expect(viaApi.id).toMatch(/^cns_/);
    expect(Date.parse(viaApi.created_at)).toBe(Date.parse(put.body.data.consent.sms.updated_at));

    const sms = await rest('GET', `/v1/contacts/${c.id}/preferences/history?channel=sms&limit=1`);
    expect(sms.body.data.map((x: any) => x.source)).toEqual(['keyword']);
    const sms2 = await rest('GET', `/v1/contacts/${c.id}/preferences/history?channel=sms&limit=1&cursor=${encodeURIComponent(sms.body.meta.pagination.cursor)}`);
    expect(sms2.body.data.map((x: any) => x.source)).toEqual(['campaign_link']);
    expect(sms2.body.meta.pagination.has_more).toBe(false);
    expectError(await rest('GET', `/v1/contacts/${c.id}/preferences/history?channel=fax`), 422, 'VALIDATION_ERROR');
    expectError(await rest('GET', `/v1/contacts/${c.id}/preferences/history?cursor=${encodeURIComponent(sms.body.meta.pagination.cursor)}`), 400, 'INVALID_CURSOR');

    tick();
    const gql = await t.gql('query($id: ID!) { contactConsentHistory(id: $id, first: 10, channel: sms) { edges { node { channel status previousStatus source actorType details } } } }', { id: c.id }, { key: viewerKey });
    expect(gql.body.errors, gql.text).toBeUndefined();
    expect(gql.body.data.contactConsentHistory.edges.map((e: any) => e.node)).toEqual([
      { channel: 'sms', status: 'opted_in', previousStatus: 'opted_out', source: 'keyword', actorType: null, details: { keyword: 'START', message_id: start.body.data.id } },
      { channel: 'sms', status: 'opted_out', previousStatus: 'unknown', source: 'campaign_link', actorType: 'api_key', details: {} },
    ]);

    // Deleting the contact deletes its history.
    expect((await rest('DELETE', `/v1/contacts/${c.id}`)).status).toBe(204);
    expect((await t.db.query('select count(*)::int as n from contact_consent_changes where contact_id = $1', [c.id])).rows[0].n).toBe(0);
    expectError(await rest('GET', `/v1/contacts/${c.id}/preferences/history`), 404, 'NOT_FOUND');
  });

  it('the consent check takes voice: a call to an opted-out recipient is refused with RECIPIENT_OPTED_OUT', async () => {
    const p = phone();
    const c = await create({ phone: p });
    const tenant = { organizationId: org.orgId, mode: 'test' as const };
    const consent = t.app.services.contacts.consent;
    await expect(consent.assertCanContact(tenant, 'voice', p)).resolves.toBeUndefined();
    expect((await rest('PUT', `/v1/contacts/${c.id}/preferences`, { voice: 'opted_out' })).body.data.consent.voice.status).toBe('opted_out');

    // Any spelling of the number is the same recipient.
    const national = `+1 (${p.slice(2, 5)}) ${p.slice(5, 8)}-${p.slice(8)}`;
    const err = await consent.assertCanContact(tenant, 'voice', national).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect(err).toMatchObject({ code: 'RECIPIENT_OPTED_OUT', status: 422, details: { channel: 'voice', contact_id: c.id, source: 'api', recipient: p } });
    // Only calls: messages to the number are still accepted, and other tenants' recipients are theirs.
    await expect(consent.assertCanContact(tenant, 'sms', p)).resolves.toBeUndefined();
    expect((await rest('POST', '/v1/messages/sms', { to: p, body: 'still allowed' })).status).toBe(201);
    await expect(consent.assertCanContact({ organizationId: other.orgId, mode: 'test' }, 'voice', p)).resolves.toBeUndefined();
    await expect(consent.assertCanContact({ organizationId: org.orgId, mode: 'live' }, 'voice', p)).resolves.toBeUndefined();

    tick();
    const back = await t.gql('mutation($id: ID!) { setContactPreferences(id: $id, preferences: { voice: opted_in }) { consent { voice { status } } } }', { id: c.id }, { key: org.testKey });
    expect(back.body.data.setContactPreferences.consent.voice.status).toBe('opted_in');
    await expect(consent.assertCanContact(tenant, 'voice', p)).resolves.toBeUndefined();
  });
});
