/**
 * Message templates end to end over HTTP, with real pg-boss workers and the sandbox reviewer:
 * CRUD on REST and GraphQL, cursor pagination and filters, name uniqueness per channel (and per
 * organization and mode), content validation, the review lifecycle (pending_approval → approved |
 * rejected, drafts never reviewed, edits resubmit) with its outbox events, the WhatsApp listing,
 * and rendering of stored templates when an SMS is sent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { expectError, expectGqlError, eventually } from './helpers/assertions.ts';

type Template = {
  id: string; channel: string; name: string; content: string; category: string | null; language: string;
  variables: { name: string; example?: string; required?: boolean }[]; status: string; rejection_reason?: string;
  created_at: string; updated_at: string;
};
type Page<T> = { data: T[]; meta: { pagination: { cursor: string | null; has_more: boolean } } };
type GqlTemplate = { id: string; channel: string; name: string; content: string; status: string; language: string; variables: { name: string }[]; rejectionReason: string | null };

const DECISION_JOB = 'messaging.template-decision';
const RECIPIENT = '+14155552671';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  t = await startTestApp({
    workers: true,
    clock: systemClock,
    env: { SANDBOX_TEMPLATE_REVIEW_MS: '50', SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '50' },
  });
  org = await t.createOrg('enterprise', 'Templates org');
  other = await t.createOrg('enterprise', 'Other org');
});
afterAll(async () => { await t?.close(); });

// ---------------------------------------------------------------------------------------------
// helpers

let seq = 0;
/** A name no other test uses. */
function uniqueName(prefix = 'tpl'): string {
  seq += 1;
  return `${prefix}_${seq}_${Math.random().toString(36).slice(2, 8)}`;
}




async function createTemplate(key: string, body: Record<string, unknown>): Promise<Template> {
  const res = await t.rest<{ data: Template }>('POST', '/v1/messages/templates', { key, body });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

async function getTemplate(key: string, id: string): Promise<Template> {
  const res = await t.rest<{ data: Template }>('GET', `/v1/messages/templates/${id}`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

/** Waits until the template has left pending_approval and returns it. */
function reviewed(key: string, id: string): Promise<Template> {
  return eventually(`review of ${id}`, async () => {
    const tpl = await getTemplate(key, id);
    return tpl.status === 'pending_approval' ? undefined : tpl;
  });
}

async function templateEvents(id: string): Promise<{ type: string; organization_id: string; mode: string; resource_type: string; data: Record<string, unknown> }[]> {
  const { rows } = await t.db.query(
    'select type, organization_id, mode, resource_type, data from events where resource_id = $1 order by id', [id],
  );
  return rows;
}

async function decisionJobs(id: string): Promise<number> {
  const { rows } = await t.db.query(
    "select count(*)::int as n from pgboss.job where name = $1 and data->'data'->>'templateId' = $2", [DECISION_JOB, id],
  );
  return rows[0].n as number;
}

async function listAll(key: string, query: string, limit: number): Promise<{ items: Template[]; pages: number }> {
  const items: Template[] = [];
  let cursor: string | null = null;
  let pages = 0;
  for (;;) {
    const q = `${query}${query ? '&' : ''}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const res: HttpResponse<Page<Template>> = await t.rest('GET', `/v1/messages/templates?${q}`, { key });
    expect(res.status, res.text).toBe(200);
    pages += 1;
    expect(res.body.data.length).toBeLessThanOrEqual(limit);
    items.push(...res.body.data);
    const { cursor: next, has_more } = res.body.meta.pagination;
    if (!has_more) break;
    expect(next).toEqual(expect.any(String));
    cursor = next;
    if (pages > 20) throw new Error('pagination does not end');
  }
  return { items, pages };
}

async function messageCount(o: TestOrg): Promise<number> {
  const { rows } = await t.db.query('select count(*)::int as n from messages where organization_id = $1', [o.orgId]);
  return rows[0].n as number;
}

const TEMPLATE_FIELDS = 'id channel name content status language variables { name } rejectionReason';

// ---------------------------------------------------------------------------------------------

describe('creating templates', () => {
  it('REST: 201 with pending_approval by default, every field echoed', async () => {
    const name = uniqueName('welcome');
    const res = await t.rest<{ data: Template }>('POST', '/v1/messages/templates', {
      key: org.testKey,
      body: { channel: 'sms', name, content: 'Hi {{name}}, welcome to {{ company }}!', category: 'Marketing', variables: ['name', { name: 'company', example: 'Acme' }] },
    });
    expect(res.status).toBe(201);
    const tpl = res.body.data;
    expect(tpl.id).toMatch(/^tpl_[0-9a-z]{26}$/);
    expect(tpl).toMatchObject({
      channel: 'sms', name, content: 'Hi {{name}}, welcome to {{ company }}!', category: 'marketing', language: 'en',
      variables: [{ name: 'name' }, { name: 'company', example: 'Acme' }], status: 'pending_approval',
    });
    expect(tpl.rejection_reason).toBeUndefined();
    expect(Date.parse(tpl.created_at)).not.toBeNaN();
    expect(tpl.updated_at).toBe(tpl.created_at);
    const { rows } = await t.db.query('select organization_id, mode, status from message_templates where id = $1', [tpl.id]);
    expect(rows[0]).toEqual({ organization_id: org.orgId, mode: 'test', status: 'pending_approval' });
  });

  it('REST: status draft when asked; a status the caller may not set is rejected', async () => {
    const draft = await createTemplate(org.testKey, { channel: 'email', name: uniqueName('draft'), content: 'Draft {{x}}', status: 'draft', language: 'tr' });
    expect(draft).toMatchObject({ status: 'draft', channel: 'email', language: 'tr' });
    for (const status of ['approved', 'rejected']) {
      const res = await t.rest('POST', '/v1/messages/templates', { key: org.testKey, body: { channel: 'sms', name: uniqueName('self'), content: 'x', status } });
      expect(expectError(res, 422, 'VALIDATION_ERROR').error.details.field).toBe('status');
    }
  });

  it('missing required fields → 422 MISSING_REQUIRED_FIELD with the field', async () => {
    for (const [body, field] of [
      [{ name: uniqueName(), content: 'x' }, 'channel'],
      [{ channel: 'sms', content: 'x' }, 'name'],
      [{ channel: 'sms', name: uniqueName() }, 'content'],
    ] as const) {
      const res = await t.rest('POST', '/v1/messages/templates', { key: org.testKey, body });
      expect(expectError(res, 422, 'MISSING_REQUIRED_FIELD').error.details.field).toBe(field);
    }
  });

  it('GraphQL createMessageTemplate: pending_approval by default, draft when asked', async () => {
    const name = uniqueName('gql');
    const res = await t.gql<{ createMessageTemplate: GqlTemplate }>(
      `mutation Create($input: CreateMessageTemplateInput!) { createMessageTemplate(input: $input) { ${TEMPLATE_FIELDS} } }`,
      { input: { channel: 'sms', name, content: 'Code {{code}}', variables: [{ name: 'code' }] } }, { key: org.testKey },
    );
    expect(res.body.errors).toBeUndefined();
    const created = res.body.data!.createMessageTemplate;
    expect(created).toMatchObject({ channel: 'sms', name, content: 'Code {{code}}', status: 'pending_approval', language: 'en', variables: [{ name: 'code' }], rejectionReason: null });
    expect(created.id).toMatch(/^tpl_/);
    // The same record on REST.
    expect(await getTemplate(org.testKey, created.id)).toMatchObject({ id: created.id, name, channel: 'sms' });

    const draft = await t.gql<{ createMessageTemplate: GqlTemplate }>(
      `mutation Create($input: CreateMessageTemplateInput!) { createMessageTemplate(input: $input) { ${TEMPLATE_FIELDS} } }`,
      { input: { channel: 'whatsapp', name: uniqueName('gqldraft'), content: 'Hello {{1}}', status: 'draft' } }, { key: org.testKey },
    );
    expect(draft.body.errors).toBeUndefined();
    expect(draft.body.data!.createMessageTemplate).toMatchObject({ channel: 'whatsapp', status: 'draft' });

    const approved = await t.gql(
      'mutation Create($input: CreateMessageTemplateInput!) { createMessageTemplate(input: $input) { id } }',
      { input: { channel: 'sms', name: uniqueName('gqlself'), content: 'x', status: 'approved' } }, { key: org.testKey },
    );
    expectGqlError(approved, 'VALIDATION_ERROR');
  });

  it('malformed content → 422 INVALID_TEMPLATE on REST and GraphQL; nothing stored', async () => {
    const name = uniqueName('bad');
    for (const content of ['Hello {{ unclosed', 'Hi }} there', 'Hi {{ }}', 'Hi {{first name}}']) {
      const res = await t.rest('POST', '/v1/messages/templates', { key: org.testKey, body: { channel: 'sms', name, content } });
      const body = expectError(res, 422, 'INVALID_TEMPLATE');
      expect(body.error.details.field).toBe('content');
    }
    const gql = await t.gql(
      'mutation Create($input: CreateMessageTemplateInput!) { createMessageTemplate(input: $input) { id } }',
      { input: { channel: 'sms', name, content: '{{ unclosed' } }, { key: org.testKey },
    );
    expect(expectGqlError(gql, 'INVALID_TEMPLATE').extensions.status).toBe(422);
    const { rows } = await t.db.query('select count(*)::int as n from message_templates where name = $1', [name]);
    expect(rows[0].n).toBe(0);
  });
});

describe('submission is durable', () => {
  const submissions = async (templateId: string) => (await t.db.query<{ state: string }>(
    `select state from pgboss.job where name = 'messaging.template-submit' and data->'data'->>'templateId' = $1`, [templateId])).rows;

  it('a pending template commits with its submission job; a draft or a refused create stores none', async () => {
    const name = uniqueName('durable');
    const pending = await createTemplate(org.testKey, { channel: 'whatsapp', name, content: 'Hello {{1}}', language: 'en' });
    expect(await submissions(pending.id)).toHaveLength(1);
    expect((await reviewed(org.testKey, pending.id)).status).toBe('approved');
    expect((await submissions(pending.id))[0]!.state).toBe('completed');

    const draft = await createTemplate(org.testKey, { channel: 'whatsapp', name: uniqueName('draft'), content: 'Hi', status: 'draft' });
    expect(await submissions(draft.id)).toHaveLength(0);

    // A duplicate name rolls the transaction back: no template, no submission job.
    const before = (await t.db.query<{ n: number }>(`select count(*)::int as n from pgboss.job where name = 'messaging.template-submit'`)).rows[0]!.n;
    const dup = await t.rest('POST', '/v1/messages/templates', { key: org.testKey, body: { channel: 'whatsapp', name, content: 'Other', language: 'en' } });
    expect(dup.status).toBe(409);
    const after = (await t.db.query<{ n: number }>(`select count(*)::int as n from pgboss.job where name = 'messaging.template-submit'`)).rows[0]!.n;
    expect(after).toBe(before);
  });

  it('editing a submitted template\'s content enqueues a new submission with the edit', async () => {
    const tpl = await createTemplate(org.testKey, { channel: 'whatsapp', name: uniqueName('edit'), content: 'First {{1}}', language: 'en' });
    await reviewed(org.testKey, tpl.id);
    const res = await t.rest('PATCH', `/v1/messages/templates/${tpl.id}`, { key: org.testKey, body: { content: 'Second {{1}}' } });
    expect(res.status, res.text).toBe(200);
    expect(await submissions(tpl.id)).toHaveLength(2);
    const again = await reviewed(org.testKey, tpl.id);
    expect(again).toMatchObject({ status: 'approved', content: 'Second {{1}}' });
  });
});

describe('name uniqueness', () => {
  it('the same name on the same channel → 409 ALREADY_EXISTS (REST and GraphQL); other channel, org or mode is fine', async () => {
    const name = uniqueName('uniq');
    const first = await createTemplate(org.testKey, { channel: 'sms', name, content: 'one' });

    const dup = await t.rest('POST', '/v1/messages/templates', { key: org.testKey, body: { channel: 'sms', name, content: 'two', status: 'draft' } });
    expect(expectError(dup, 409, 'ALREADY_EXISTS').error.details.field).toBe('name');
    const gqlDup = await t.gql(
      'mutation Create($input: CreateMessageTemplateInput!) { createMessageTemplate(input: $input) { id } }',
      { input: { channel: 'sms', name, content: 'three' } }, { key: org.testKey },
    );
    expectGqlError(gqlDup, 'ALREADY_EXISTS');

    const otherChannel = await createTemplate(org.testKey, { channel: 'viber', name, content: 'viber' });
    const otherMode = await createTemplate(org.liveKey, { channel: 'sms', name, content: 'live' });
    const otherOrg = await createTemplate(other.testKey, { channel: 'sms', name, content: 'other org' });
    expect(new Set([first.id, otherChannel.id, otherMode.id, otherOrg.id]).size).toBe(4);

    const { rows } = await t.db.query('select channel, mode, organization_id from message_templates where name = $1 order by id', [name]);
    expect(rows).toEqual([
      { channel: 'sms', mode: 'test', organization_id: org.orgId },
      { channel: 'viber', mode: 'test', organization_id: org.orgId },
      { channel: 'sms', mode: 'live', organization_id: org.orgId },
      { channel: 'sms', mode: 'test', organization_id: other.orgId },
    ]);
  });

  it('renaming onto a taken name on the same channel → 409 ALREADY_EXISTS; the template is unchanged', async () => {
    const taken = uniqueName('taken');
    await createTemplate(org.testKey, { channel: 'sms', name: taken, content: 'a', status: 'draft' });
    const mine = await createTemplate(org.testKey, { channel: 'sms', name: uniqueName('mine'), content: 'b', status: 'draft' });
    const res = await t.rest('PATCH', `/v1/messages/templates/${mine.id}`, { key: org.testKey, body: { name: taken } });
    expectError(res, 409, 'ALREADY_EXISTS');
    expect((await getTemplate(org.testKey, mine.id)).name).toBe(mine.name);
  });
});

describe('reading templates', () => {
  let lister: TestOrg;
  const created: Template[] = [];

  beforeAll(async () => {
    lister = await t.createOrg('enterprise', 'Lister');
    const specs = [
      { channel: 'sms', status: 'draft' }, { channel: 'email', status: 'draft' }, { channel: 'sms', status: 'draft' },
      { channel: 'sms' }, { channel: 'email' }, { channel: 'sms', status: 'draft' }, { channel: 'whatsapp', status: 'draft' },
    ];
    for (const s of specs) created.push(await createTemplate(lister.testKey, { ...s, name: uniqueName('list'), content: `content of ${s.channel}` }));
  });

  it('lists newest first with cursor pagination, covering every template exactly once', async () => {
    const { items, pages } = await listAll(lister.testKey, '', 3);
    expect(pages).toBe(3);
    expect(items.map((i) => i.id)).toEqual(created.map((c) => c.id).sort().reverse());
    // Items carry the full shape.
    const sample = items.find((i) => i.id === created[0]!.id)!;
    expect(sample).toMatchObject({ channel: 'sms', name: created[0]!.name, content: 'content of sms', status: 'draft' });
    // Other organizations' and the other mode's templates never show up.
    const live = await t.rest<Page<Template>>('GET', '/v1/messages/templates', { key: lister.liveKey });
    expect(live.status).toBe(200);
    expect(live.body.data).toEqual([]);
    expect(live.body.meta.pagination).toEqual({ cursor: null, has_more: false });
  });

  it('filters by channel and by status, across pages', async () => {
    const sms = await listAll(lister.testKey, 'channel=sms', 2);
    expect(sms.items.map((i) => i.id)).toEqual(created.filter((c) => c.channel === 'sms').map((c) => c.id).sort().reverse());
    expect(sms.pages).toBe(2);

    const drafts = await listAll(lister.testKey, 'status=draft', 100);
    expect(drafts.items.map((i) => i.id).sort()).toEqual(created.filter((c) => c.status === 'draft').map((c) => c.id).sort());
    expect(drafts.items.length).toBe(5);

    const smsDrafts = await listAll(lister.testKey, 'channel=sms&status=draft', 100);
    expect(smsDrafts.items.length).toBe(3);
    expect(smsDrafts.items.every((i) => i.channel === 'sms' && i.status === 'draft')).toBe(true);

    expectError(await t.rest('GET', '/v1/messages/templates?channel=fax', { key: lister.testKey }), 422, 'VALIDATION_ERROR');
    expectError(await t.rest('GET', '/v1/messages/templates?status=live', { key: lister.testKey }), 422, 'VALIDATION_ERROR');
  });

  it('a cursor is bound to its filters → 400 INVALID_CURSOR elsewhere', async () => {
    const first = await t.rest<Page<Template>>('GET', '/v1/messages/templates?channel=sms&limit=1', { key: lister.testKey });
    const cursor = first.body.meta.pagination.cursor!;
    expect(cursor).toEqual(expect.any(String));
    expectError(await t.rest('GET', `/v1/messages/templates?channel=email&limit=1&cursor=${encodeURIComponent(cursor)}`, { key: lister.testKey }), 400, 'INVALID_CURSOR');
    expectError(await t.rest('GET', `/v1/messages/templates?channel=sms&limit=1&cursor=${encodeURIComponent(cursor)}`, { key: other.testKey }), 400, 'INVALID_CURSOR');
  });

  it('GraphQL messageTemplates pages with first/after and filters', async () => {
    const query = `query L($after: String, $channel: Channel) {
      messageTemplates(first: 4, after: $after, channel: $channel) { edges { node { id channel } } pageInfo { hasNextPage endCursor } }
    }`;
    type Conn = { messageTemplates: { edges: { node: { id: string; channel: string } }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } };
    const p1 = await t.gql<Conn>(query, {}, { key: lister.testKey });
    expect(p1.body.errors).toBeUndefined();
    expect(p1.body.data!.messageTemplates.edges).toHaveLength(4);
    expect(p1.body.data!.messageTemplates.pageInfo.hasNextPage).toBe(true);
    const p2 = await t.gql<Conn>(query, { after: p1.body.data!.messageTemplates.pageInfo.endCursor }, { key: lister.testKey });
    expect(p2.body.errors).toBeUndefined();
    expect(p2.body.data!.messageTemplates.pageInfo.hasNextPage).toBe(false);
    const ids = [...p1.body.data!.messageTemplates.edges, ...p2.body.data!.messageTemplates.edges].map((e) => e.node.id);
    expect(ids).toEqual(created.map((c) => c.id).sort().reverse());

    const emails = await t.gql<Conn>(query, { channel: 'email' }, { key: lister.testKey });
    expect(emails.body.data!.messageTemplates.edges.map((e) => e.node)).toEqual(
      created.filter((c) => c.channel === 'email').map((c) => ({ id: c.id, channel: 'email' })).reverse(),
    );
  });

  it('GET one (REST, GraphQL messageTemplate and node); unknown, other org or other mode → 404', async () => {
    const target = created[1]!;
    expect(await getTemplate(lister.testKey, target.id)).toEqual(target);

    const gql = await t.gql<{ messageTemplate: GqlTemplate; node: { id: string; name: string } }>(
      `query One($id: ID!) { messageTemplate(id: $id) { ${TEMPLATE_FIELDS} } node(id: $id) { id ... on MessageTemplate { name } } }`,
      { id: target.id }, { key: lister.testKey },
    );
    expect(gql.body.errors).toBeUndefined();
    expect(gql.body.data!.messageTemplate).toMatchObject({ id: target.id, channel: 'email', name: target.name, status: 'draft' });
    expect(gql.body.data!.node).toEqual({ id: target.id, name: target.name });

    expectError(await t.rest('GET', '/v1/messages/templates/tpl_01jdoesnotexist00000000000', { key: lister.testKey }), 404, 'NOT_FOUND');
    expectError(await t.rest('GET', `/v1/messages/templates/${target.id}`, { key: other.testKey }), 404, 'NOT_FOUND');
    expectError(await t.rest('GET', `/v1/messages/templates/${target.id}`, { key: lister.liveKey }), 404, 'NOT_FOUND');
    const gqlOther = await t.gql(`query One($id: ID!) { messageTemplate(id: $id) { id } }`, { id: target.id }, { key: other.testKey });
    expectGqlError(gqlOther, 'NOT_FOUND');
  });
});

describe('updating and deleting', () => {
  it('PATCH name, content and variables of a draft: applied, still a draft, never submitted', async () => {
    const tpl = await createTemplate(org.testKey, { channel: 'sms', name: uniqueName('edit'), content: 'Old {{a}}', variables: ['a'], status: 'draft' });
    const newName = uniqueName('edited');
    const res = await t.rest<{ data: Template }>('PATCH', `/v1/messages/templates/${tpl.id}`, {
      key: org.testKey, body: { name: newName, content: 'New {{a}} and {{b}}', variables: ['a', { name: 'b', required: true }] },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ id: tpl.id, name: newName, content: 'New {{a}} and {{b}}', variables: [{ name: 'a' }, { name: 'b', required: true }], status: 'draft', channel: 'sms' });
    expect(Date.parse(res.body.data.updated_at)).toBeGreaterThanOrEqual(Date.parse(tpl.updated_at));
    expect(await getTemplate(org.testKey, tpl.id)).toEqual(res.body.data);
    expect(await decisionJobs(tpl.id)).toBe(0);
  });

  it('PATCH validation: nothing to update, channel change, malformed content; unknown id → 404', async () => {
    const tpl = await createTemplate(org.testKey, { channel: 'sms', name: uniqueName('val'), content: 'Hi', status: 'draft' });
    expectError(await t.rest('PATCH', `/v1/messages/templates/${tpl.id}`, { key: org.testKey, body: {} }), 422, 'VALIDATION_ERROR');
    const ch = expectError(await t.rest('PATCH', `/v1/messages/templates/${tpl.id}`, { key: org.testKey, body: { channel: 'email' } }), 422, 'VALIDATION_ERROR');
    expect(ch.error.details.field).toBe('channel');
    const bad = expectError(await t.rest('PATCH', `/v1/messages/templates/${tpl.id}`, { key: org.testKey, body: { content: 'Hi {{ unclosed' } }), 422, 'INVALID_TEMPLATE');
    expect(bad.error.details.field).toBe('content');
    expect((await getTemplate(org.testKey, tpl.id)).content).toBe('Hi');
    expectError(await t.rest('PATCH', '/v1/messages/templates/tpl_01jdoesnotexist00000000000', { key: org.testKey, body: { name: 'x' } }), 404, 'NOT_FOUND');
    expectError(await t.rest('PATCH', `/v1/messages/templates/${tpl.id}`, { key: other.testKey, body: { name: 'x' } }), 404, 'NOT_FOUND');
  });

  it('GraphQL updateMessageTemplate and deleteMessageTemplate', async () => {
    const tpl = await createTemplate(org.testKey, { channel: 'rcs', name: uniqueName('gqlupd'), content: 'Hey', status: 'draft' });
    const upd = await t.gql<{ updateMessageTemplate: GqlTemplate }>(
      `mutation U($id: ID!, $input: UpdateMessageTemplateInput!) { updateMessageTemplate(id: $id, input: $input) { ${TEMPLATE_FIELDS} } }`,
      { id: tpl.id, input: { content: 'Hey {{name}}', variables: [{ name: 'name' }] } }, { key: org.testKey },
    );
    expect(upd.body.errors).toBeUndefined();
    expect(upd.body.data!.updateMessageTemplate).toMatchObject({ id: tpl.id, content: 'Hey {{name}}', variables: [{ name: 'name' }], status: 'draft' });

    const del = await t.gql<{ deleteMessageTemplate: string }>('mutation D($id: ID!) { deleteMessageTemplate(id: $id) }', { id: tpl.id }, { key: org.testKey });
    expect(del.body.errors).toBeUndefined();
    expect(del.body.data!.deleteMessageTemplate).toBe(tpl.id);
    expectError(await t.rest('GET', `/v1/messages/templates/${tpl.id}`, { key: org.testKey }), 404, 'NOT_FOUND');
    const again = await t.gql('mutation D($id: ID!) { deleteMessageTemplate(id: $id) }', { id: tpl.id }, { key: org.testKey });
    expectGqlError(again, 'NOT_FOUND');
  });

  it('DELETE → 204 without a body, then 404; the name is free again; other tenants cannot delete', async () => {
    const name = uniqueName('del');
    const tpl = await createTemplate(org.testKey, { channel: 'sms', name, content: 'bye', status: 'draft' });
    expectError(await t.rest('DELETE', `/v1/messages/templates/${tpl.id}`, { key: other.testKey }), 404, 'NOT_FOUND');
    expectError(await t.rest('DELETE', `/v1/messages/templates/${tpl.id}`, { key: org.liveKey }), 404, 'NOT_FOUND');

    const del = await t.rest('DELETE', `/v1/messages/templates/${tpl.id}`, { key: org.testKey });
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expectError(await t.rest('GET', `/v1/messages/templates/${tpl.id}`, { key: org.testKey }), 404, 'NOT_FOUND');
    expectError(await t.rest('DELETE', `/v1/messages/templates/${tpl.id}`, { key: org.testKey }), 404, 'NOT_FOUND');
    const { rows } = await t.db.query('select count(*)::int as n from message_templates where id = $1', [tpl.id]);
    expect(rows[0].n).toBe(0);

    const again = await createTemplate(org.testKey, { channel: 'sms', name, content: 'back', status: 'draft' });
    expect(again.id).not.toBe(tpl.id);
  });
});

describe('review lifecycle', () => {
  it('pending_approval → approved by the sandbox reviewer, with a template.approved event', async () => {
    const tpl = await createTemplate(org.testKey, { channel: 'whatsapp', name: uniqueName('approve'), content: 'Order {{1}} shipped' });
    expect(tpl.status).toBe('pending_approval');
    const done = await reviewed(org.testKey, tpl.id);
    expect(done.status).toBe('approved');
    expect(done.rejection_reason).toBeUndefined();
    expect(Date.parse(done.updated_at)).toBeGreaterThan(Date.parse(tpl.updated_at) - 1);

    const events = await eventually('template.approved event', async () => {
      const e = await templateEvents(tpl.id);
      return e.length > 0 ? e : undefined;
    });
    expect(events).toEqual([{
      type: 'template.approved', organization_id: org.orgId, mode: 'test', resource_type: 'template',
      data: { template_id: tpl.id, channel: 'whatsapp', name: tpl.name, status: 'approved' },
    }]);
    expect(await decisionJobs(tpl.id)).toBe(1);
  });

  it('a reject_… name → rejected with rejection_reason and a template.rejected event (REST and GraphQL)', async () => {
    const tpl = await createTemplate(org.testKey, { channel: 'sms', name: uniqueName('reject'), content: 'Buy now' });
    const done = await reviewed(org.testKey, tpl.id);
    expect(done.status).toBe('rejected');
    expect(done.rejection_reason).toMatch(/reject_/);

    const events = await templateEvents(tpl.id);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'template.rejected', organization_id: org.orgId, mode: 'test', resource_type: 'template' });
    expect(events[0]!.data).toEqual({ template_id: tpl.id, channel: 'sms', name: tpl.name, status: 'rejected', rejection_reason: done.rejection_reason });

    const gql = await t.gql<{ messageTemplate: GqlTemplate }>(`query One($id: ID!) { messageTemplate(id: $id) { status rejectionReason } }`, { id: tpl.id }, { key: org.testKey });
    expect(gql.body.data!.messageTemplate).toEqual({ status: 'rejected', rejectionReason: done.rejection_reason });
  });

  it('a draft stays a draft (never submitted) while a template created with it is reviewed; submitting it later reviews it', async () => {
    const draft = await createTemplate(org.testKey, { channel: 'sms', name: uniqueName('keepdraft'), content: 'Draft body', status: 'draft' });
    const pending = await createTemplate(org.testKey, { channel: 'sms', name: uniqueName('alongside'), content: 'Pending body' });
    expect((await reviewed(org.testKey, pending.id)).status).toBe('approved');
    expect((await getTemplate(org.testKey, draft.id)).status).toBe('draft');
    expect(await decisionJobs(draft.id)).toBe(0);
    expect(await templateEvents(draft.id)).toEqual([]);

    const submit = await t.rest<{ data: Template }>('PATCH', `/v1/messages/templates/${draft.id}`, { key: org.testKey, body: { status: 'pending_approval' } });
    expect(submit.status).toBe(200);
    expect(submit.body.data.status).toBe('pending_approval');
    expect((await reviewed(org.testKey, draft.id)).status).toBe('approved');
    expect((await templateEvents(draft.id)).map((e) => e.type)).toEqual(['template.approved']);
  });

  it('changing the content of an approved template resubmits it: pending_approval, then approved again', async () => {
    const tpl = await createTemplate(org.testKey, { channel: 'sms', name: uniqueName('resubmit'), content: 'Version 1 {{x}}' });
    expect((await reviewed(org.testKey, tpl.id)).status).toBe('approved');

    // A rename or new variables alone do not resubmit.
    const renamed = await t.rest<{ data: Template }>('PATCH', `/v1/messages/templates/${tpl.id}`, { key: org.testKey, body: { name: uniqueName('renamed'), variables: ['x'] } });
    expect(renamed.status).toBe(200);
    expect(renamed.body.data.status).toBe('approved');

    const edited = await t.rest<{ data: Template }>('PATCH', `/v1/messages/templates/${tpl.id}`, { key: org.testKey, body: { content: 'Version 2 {{x}}' } });
    expect(edited.status).toBe(200);
    expect(edited.body.data).toMatchObject({ status: 'pending_approval', content: 'Version 2 {{x}}' });
    expect((await getTemplate(org.testKey, tpl.id)).status).toBe('pending_approval');

    expect((await reviewed(org.testKey, tpl.id)).status).toBe('approved');
    const events = await eventually('second approval event', async () => {
      const e = await templateEvents(tpl.id);
      return e.length >= 2 ? e : undefined;
    });
    expect(events.map((e) => e.type)).toEqual(['template.approved', 'template.approved']);
    expect(await decisionJobs(tpl.id)).toBe(2);
  });

  it('fixing the content of a rejected template resubmits it and clears the rejection reason', async () => {
    const tpl = await createTemplate(org.testKey, { channel: 'viber', name: uniqueName('fixme'), content: 'Please REJECTME now' });
    const rejected = await reviewed(org.testKey, tpl.id);
    expect(rejected.status).toBe('rejected');
    expect(rejected.rejection_reason).toMatch(/REJECTME/);

    const fixed = await t.rest<{ data: Template }>('PATCH', `/v1/messages/templates/${tpl.id}`, { key: org.testKey, body: { content: 'Please accept now' } });
    expect(fixed.status).toBe(200);
    expect(fixed.body.data.status).toBe('pending_approval');
    expect(fixed.body.data.rejection_reason).toBeUndefined();
    const done = await reviewed(org.testKey, tpl.id);
    expect(done.status).toBe('approved');
    expect(done.rejection_reason).toBeUndefined();
    expect((await templateEvents(tpl.id)).map((e) => e.type)).toEqual(['template.rejected', 'template.approved']);
  });

  it('a decision about earlier content never applies to content edited while the review was pending', async () => {
    const tpl = await createTemplate(org.testKey, { channel: 'sms', name: uniqueName('race'), content: 'Innocent text' });
    // Edited at once: the review of "Innocent text" (approve) is usually still pending.
    const edited = await t.rest<{ data: Template }>('PATCH', `/v1/messages/templates/${tpl.id}`, { key: org.testKey, body: { content: 'Now REJECTME text' } });
    expect(edited.status).toBe(200);
    expect(edited.body.data.status).toBe('pending_approval');
    const editedAt = Date.parse(edited.body.data.updated_at);
    // Both decisions have run.
    await eventually('both decisions processed', async () => {
      const { rows } = await t.db.query(
        "select count(*)::int as n from pgboss.job where name = $1 and data->'data'->>'templateId' = $2 and state = 'completed'", [DECISION_JOB, tpl.id],
      );
      return rows[0].n === 2 ? true : undefined;
    });
    const done = await getTemplate(org.testKey, tpl.id);
    expect(done).toMatchObject({ status: 'rejected', content: 'Now REJECTME text' });
    expect(done.rejection_reason).toMatch(/REJECTME/);
    // The approval of the earlier content may only have landed before the edit, never after it.
    const { rows: events } = await t.db.query('select type, created_at from events where resource_id = $1 order by id', [tpl.id]);
    expect(events.at(-1)?.type).toBe('template.rejected');
    expect(events.filter((e) => e.type === 'template.rejected')).toHaveLength(1);
    for (const e of events.filter((x) => x.type === 'template.approved')) expect((e.created_at as Date).getTime()).toBeLessThan(editedAt);
  });
});

describe('WhatsApp templates listing', () => {
  it('GET /v1/whatsapp/templates and GraphQL whatsappTemplates list only whatsapp templates', async () => {
    const wa = await t.createOrg('enterprise', 'WhatsApp lister');
    const waDraft = await createTemplate(wa.testKey, { channel: 'whatsapp', name: uniqueName('wa'), content: 'Hi {{1}}', status: 'draft' });
    const waPending = await createTemplate(wa.testKey, { channel: 'whatsapp', name: uniqueName('wa'), content: 'Bye {{1}}' });
    await createTemplate(wa.testKey, { channel: 'sms', name: uniqueName('notwa'), content: 'sms', status: 'draft' });
    await createTemplate(wa.testKey, { channel: 'email', name: uniqueName('notwa'), content: 'email', status: 'draft' });

    const res = await t.rest<Page<Template>>('GET', '/v1/whatsapp/templates', { key: wa.testKey });
    expect(res.status).toBe(200);
    expect(res.body.data.map((x) => x.id)).toEqual([waPending.id, waDraft.id]);
    expect(res.body.data.every((x) => x.channel === 'whatsapp')).toBe(true);
    expect(res.body.meta.pagination.has_more).toBe(false);

    const drafts = await t.rest<Page<Template>>('GET', '/v1/whatsapp/templates?status=draft', { key: wa.testKey });
    expect(drafts.body.data.map((x) => x.id)).toEqual([waDraft.id]);
    // channel is not a parameter of this list.
    expectError(await t.rest('GET', '/v1/whatsapp/templates?channel=sms', { key: wa.testKey }), 400, 'VALIDATION_ERROR');

    const paged = await t.rest<Page<Template>>('GET', '/v1/whatsapp/templates?limit=1', { key: wa.testKey });
    expect(paged.body.data.map((x) => x.id)).toEqual([waPending.id]);
    expect(paged.body.meta.pagination.has_more).toBe(true);
    const next = await t.rest<Page<Template>>('GET', `/v1/whatsapp/templates?limit=1&cursor=${encodeURIComponent(paged.body.meta.pagination.cursor!)}`, { key: wa.testKey });
    expect(next.body.data.map((x) => x.id)).toEqual([waDraft.id]);

    const gql = await t.gql<{ whatsappTemplates: { edges: { node: { id: string; channel: string } }[] } }>(
      '{ whatsappTemplates(first: 100) { edges { node { id channel } } } }', {}, { key: wa.testKey },
    );
    expect(gql.body.errors).toBeUndefined();
    expect(gql.body.data!.whatsappTemplates.edges.map((e) => e.node)).toEqual([
      { id: waPending.id, channel: 'whatsapp' }, { id: waDraft.id, channel: 'whatsapp' },
    ]);
    // Another organization sees none of them.
    const otherList = await t.rest<Page<Template>>('GET', '/v1/whatsapp/templates', { key: other.testKey });
    expect(otherList.body.data.map((x) => x.id)).not.toContain(waDraft.id);
  });
});

describe('rendering stored templates on send', () => {
  let smsTpl: Template;
  let emailTpl: Template;

  beforeAll(async () => {
    smsTpl = await createTemplate(org.testKey, { channel: 'sms', name: uniqueName('render'), content: 'Hi {{name}}, order {{ order.id }} is {{status}}.', variables: ['name', 'order.id', 'status'] });
    emailTpl = await createTemplate(org.testKey, { channel: 'email', name: uniqueName('render_email'), content: 'Hello {{name}}' });
  });

  it('an SMS with template_id + variables carries the rendered body, its encoding and segments', async () => {
    const res = await t.rest('POST', '/v1/messages/sms', {
      key: org.testKey, body: { to: RECIPIENT, template_id: smsTpl.id, variables: { name: 'Ada', order: { id: 'A-17' }, status: 'shipped', unused: 'x' } },
    });
    expect(res.status, res.text).toBe(201);
    const id = res.body.data.id as string;
    expect(id).toMatch(/^msg_/);
    expect(res.body.data).toMatchObject({ body: 'Hi Ada, order A-17 is shipped.', template_id: smsTpl.id, status: 'queued', encoding: 'GSM-7', segments: 1 });

    const got = await t.rest('GET', `/v1/messages/${id}`, { key: org.testKey });
    expect(got.status).toBe(200);
    expect(got.body.data).toMatchObject({ id, channel: 'sms', to: RECIPIENT, body: 'Hi Ada, order A-17 is shipped.', template_id: smsTpl.id });
    // The sandbox delivers it.
    const delivered = await eventually('delivery', async () => {
      const r = await t.rest('GET', `/v1/messages/${id}`, { key: org.testKey });
      return r.body.data.status === 'delivered' ? r.body.data : undefined;
    });
    expect(delivered.status_history.map((h: { status: string }) => h.status)).toEqual(['queued', 'sent', 'delivered']);
  });

  it('GraphQL sendSms with templateId + variables renders the same way', async () => {
    const res = await t.gql<{ sendSms: { id: string; body: string; templateId: string } }>(
      'mutation S($input: SendSmsInput!) { sendSms(input: $input) { id body templateId } }',
      { input: { to: RECIPIENT, templateId: smsTpl.id, variables: { name: 'Bo', order: { id: 7 }, status: 'late' } } }, { key: org.testKey },
    );
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data!.sendSms).toMatchObject({ body: 'Hi Bo, order 7 is late.', templateId: smsTpl.id });
  });

  it('missing variables → 422 INVALID_TEMPLATE listing them; no message row is created', async () => {
    const before = await messageCount(org);
    const res = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: RECIPIENT, template_id: smsTpl.id, variables: { name: 'Ada', status: null } } });
    const body = expectError(res, 422, 'INVALID_TEMPLATE');
    expect(body.error.details.missing).toEqual(['order.id', 'status']);
    const none = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: RECIPIENT, template_id: smsTpl.id } });
    expect(expectError(none, 422, 'INVALID_TEMPLATE').error.details.missing).toEqual(['name', 'order.id', 'status']);
    expect(await messageCount(org)).toBe(before);
  });

  it('a template of another channel → 422 INVALID_TEMPLATE; no message row', async () => {
    const before = await messageCount(org);
    const res = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: RECIPIENT, template_id: emailTpl.id, variables: { name: 'Ada' } } });
    expect(expectError(res, 422, 'INVALID_TEMPLATE').error.details.field).toBe('template_id');
    expect(await messageCount(org)).toBe(before);
  });

  it('a template id of another organization (or mode) → 404 NOT_FOUND; nothing leaks', async () => {
    const foreign = await createTemplate(other.testKey, { channel: 'sms', name: uniqueName('foreign'), content: 'Secret {{x}}', status: 'draft' });
    const liveTpl = await createTemplate(org.liveKey, { channel: 'sms', name: uniqueName('livetpl'), content: 'Live {{x}}', status: 'draft' });
    const before = await messageCount(org);
    for (const id of [foreign.id, liveTpl.id, 'tpl_01jdoesnotexist00000000000']) {
      const res = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: RECIPIENT, template_id: id, variables: { x: '1' } } });
      expectError(res, 404, 'NOT_FOUND');
      expect(res.text).not.toContain('Secret');
    }
    expect(await messageCount(org)).toBe(before);
  });

  it('a rejected template cannot be sent → 422 TEMPLATE_NOT_APPROVED', async () => {
    const rejected = await createTemplate(org.testKey, { channel: 'sms', name: uniqueName('reject_send'), content: 'Hi {{name}}' });
    expect((await reviewed(org.testKey, rejected.id)).status).toBe('rejected');
    const res = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: RECIPIENT, template_id: rejected.id, variables: { name: 'Ada' } } });
    expectError(res, 422, 'TEMPLATE_NOT_APPROVED');
  });
});
