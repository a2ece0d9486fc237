/**
 * A newcomer's path through a running service: GraphiQL with no internet, loopback webhook URLs
 * explained, GraphQL error statuses exactly as docs/graphql.md states them, and what
 * a write with a slip in it answers (unknown fields named, every problem at once, in plain words).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { eventually } from './helpers/assertions.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { hasChromium, noteMissingChromium, useChromium } from './helpers/browser.ts';

noteMissingChromium('test/newcomer.test.ts', "the checkout page's browser test");

let t: TestApp;
let org: TestOrg;
beforeAll(async () => {
  t = await startTestApp({ clock: systemClock, env: { WEBHOOKS_ALLOW_LOOPBACK: '0' } });
  org = await t.createOrg('enterprise');
});
afterAll(async () => { await t?.close(); });

async function gqlRaw(body: unknown, accept: string) {
  const r = await fetch(`${t.baseUrl}/graphql`, {
    method: 'POST', headers: { 'X-API-Key': org.testKey, 'Content-Type': 'application/json', Accept: accept }, body: JSON.stringify(body),
  });
  return { status: r.status, type: (r.headers.get('content-type') ?? '').split(';')[0], body: await r.json() };
}

describe('GraphQL error statuses (docs/graphql.md)', () => {
  const fieldError = { query: '{ message(id: "msg_nope") { id } }' };
  const validation = { query: '{ nope }' };
  const syntax = { query: '{ ' };
  const variables = { query: 'query($id: ID!) { message(id: $id) { id } }', variables: {} };

  it('application/json: 200 for field, parse and validation errors; 400 for variables that do not coerce', async () => {
    for (const [body, status] of [[fieldError, 200], [validation, 200], [syntax, 200], [variables, 400]] as const) {
      const r = await gqlRaw(body, 'application/json');
      expect([r.status, r.type], JSON.stringify(body)).toEqual([status, 'application/json']);
      expect(r.body.errors[0].extensions.code).toBe(body === fieldError ? 'NOT_FOUND' : 'VALIDATION_ERROR');
    }
  });

  it('application/graphql-response+json: 200 for field errors, 400 for every request error', async () => {
    for (const [body, status] of [[fieldError, 200], [validation, 400], [syntax, 400], [variables, 400]] as const) {
      const r = await gqlRaw(body, 'application/graphql-response+json');
      expect([r.status, r.type], JSON.stringify(body)).toEqual([status, 'application/graphql-response+json']);
      expect(r.body.errors[0].extensions).toMatchObject({ code: body === fieldError ? 'NOT_FOUND' : 'VALIDATION_ERROR', status: body === fieldError ? 404 : 400 });
    }
  });

  it('401 before GraphQL runs, whatever the Accept header', async () => {
    const r = await fetch(`${t.baseUrl}/graphql`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(fieldError) });
    expect(r.status).toBe(401);
    expect((await r.json()).errors[0].extensions.code).toBe('UNAUTHORIZED');
  });
});

describe('GraphiQL', () => {
  it('is served with its assets inlined from the installed package, loading nothing from another host', async () => {
    const r = await fetch(`${t.baseUrl}/graphql`, { headers: { Accept: 'text/html' } });
    expect(r.status).toBe(200);
    const html = await r.text();
    expect(html).toContain('YogaGraphiQL.renderYogaGraphiQL');
    expect(html.length).toBeGreaterThan(500_000);
    const external = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="(https?:[^"]+)"/g)].map((m) => m[1]);
    expect(external).toEqual([]);
    expect(html).not.toMatch(/unpkg\.com|cdn\.jsdelivr/);
  });
});

describe('loopback webhook URLs', () => {
  it('are refused without WEBHOOKS_ALLOW_LOOPBACK, and the error says how to allow them', async () => {
    const r = await t.rest('POST', '/v1/webhooks', { key: org.testKey, body: { url: 'http://127.0.0.1:9999/hook', events: ['message.*'] } });
    expect(r.status).toBe(422);
    expect(r.body.error.code).toBe('INVALID_WEBHOOK_URL');
    expect(r.body.error.details).toMatchObject({ field: 'url', allow_loopback: 'WEBHOOKS_ALLOW_LOOPBACK=1' });
    expect(r.body.error.details.hint).toContain('WEBHOOKS_ALLOW_LOOPBACK=1');
  });
});

async function count(table: string, orgId: string): Promise<number> {
  const { rows } = await t.db.query(`select count(*)::int as n from ${table} where organization_id = $1`, [orgId]);
  return rows[0].n as number;
}

describe('a write with fields the operation does not take (docs/api.md, REST conventions)', () => {
  it('an SMS with an unknown field is refused, naming the field and the one meant, and nothing is sent', async () => {
    const before = await count('messages', org.orgId);
    // `media_url`: the singular of the SMS's `media_urls` (an MMS), as a newcomer types it.
    const r = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+15005550006', body: 'Look', media_url: 'https://example.com/a.png' } });
    expect(r.status, r.text).toBe(422);
    expect(r.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'media_url' } });
    expect(r.body.error.message).toMatch(/^Received unknown parameter: media_url\b.*media_urls/);
    expect(r.body.error.details.errors).toEqual([expect.objectContaining({ field: 'media_url', code: 'VALIDATION_ERROR' })]);
    expect(await count('messages', org.orgId)).toBe(before);
  });

  it('a flow run with its input at the top level is refused instead of starting with input {}', async () => {
    const flow = await t.rest('POST', '/v1/flows', {
      key: org.testKey,
      body: {
        name: 'Echo', trigger: { type: 'api' },
        definition: { nodes: [{ id: 'start', type: 'trigger' }, { id: 'done', type: 'end' }], edges: [{ from: 'start', to: 'done' }] },
      },
    });
    expect(flow.status, flow.text).toBe(201);
    const before = await count('flow_executions', org.orgId);
    const r = await t.rest('POST', `/v1/flows/${flow.body.data.id}/executions`, { key: org.testKey, body: { phone: '+15005550006', name: 'Ada' } });
    expect(r.status, r.text).toBe(422);
    expect(r.body.error.message).toBe('2 problems: Received unknown parameter: phone; Received unknown parameter: name');
    expect(r.body.error.details.errors.map((e: { field: string }) => e.field)).toEqual(['phone', 'name']);
    expect(await count('flow_executions', org.orgId)).toBe(before);
    const ok = await t.rest('POST', `/v1/flows/${flow.body.data.id}/executions`, { key: org.testKey, body: { input: { name: 'Ada' } } });
    expect(ok.status, ok.text).toBe(201);
  });

  it('a body on a route that takes none is refused (POST /v1/agents/{id}/pause), and the agent stays as it was', async () => {
    const agent = await t.rest('POST', '/v1/agents', { key: org.testKey, body: { name: 'Desk', type: 'conversational', model: 'sandbox-1', system_prompt: 'Greet.' } });
    expect(agent.status, agent.text).toBe(201);
    const r = await t.rest('POST', `/v1/agents/${agent.body.data.id}/pause`, { key: org.testKey, body: { reason: 'lunch' } });
    expect(r.status, r.text).toBe(422);
    expect(r.body.error).toMatchObject({ code: 'VALIDATION_ERROR', message: 'Received unknown parameter: reason', details: { field: 'reason' } });
    expect((await t.rest('GET', `/v1/agents/${agent.body.data.id}`, { key: org.testKey })).body.data.status).toBe(agent.body.data.status);
  });

  it('GraphQL: an unknown key inside a JSON argument is refused the same way, with the close name', async () => {
    const before = await count('agents', org.orgId);
    const r = await t.gql('mutation($i: AgentInput!) { createAgent(input: $i) { agent { id } } }', {
      i: { name: 'Typo', type: 'conversational', model: 'sandbox-1', systemPrompt: 'Greet.', guardrails: { blocked_topicz: ['politics'] } },
    }, { key: org.testKey });
    expect(r.body.errors?.[0]?.extensions, JSON.stringify(r.body)).toMatchObject({
      code: 'VALIDATION_ERROR', status: 422,
      details: { field: 'guardrails.blocked_topicz', did_you_mean: 'guardrails.blocked_topics' },
    });
    expect(r.body.errors![0].message).toBe('Received unknown parameter: guardrails.blocked_topicz (did you mean guardrails.blocked_topics?)');
    expect(await count('agents', org.orgId)).toBe(before);
    // An input type's unknown field is refused by GraphQL itself.
    const typed = await t.gql('mutation { setAutoReload(input: { enabled: false, treshold: 100 }) { balance } }', {}, { key: org.testKey });
    expect(typed.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
  });
});

describe('every problem of a request in one answer, in plain words', () => {
  it('names each field once: the bad number, the list where an object belongs, the misspelt field', async () => {
    const r = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '12345', bdoy: 'Hi', metadata: ['a'] } });
    expect(r.status, r.text).toBe(422);
    const errors = r.body.error.details.errors as { field: string; code: string; message: string; did_you_mean?: string; example?: unknown }[];
    expect(errors.map((e) => [e.field, e.code])).toEqual([['to', 'INVALID_PHONE_NUMBER'], ['metadata', 'VALIDATION_ERROR'], ['bdoy', 'VALIDATION_ERROR']]);
    expect(r.body.error.code).toBe('INVALID_PHONE_NUMBER');
    expect(r.body.error.details.field).toBe('to');
    expect(errors[1]).toMatchObject({ message: 'metadata must be an object, not a list; for example {"key":"value"}', example: { key: 'value' } });
    expect(errors[2]).toMatchObject({ message: 'Received unknown parameter: bdoy (did you mean body?)', did_you_mean: 'body' });
    expect(r.body.error.message).toMatch(/^3 problems: to: /);
    expect(r.text).not.toMatch(/expected record|received array|Invalid input/);
  });

  it('every missing field at once, and the allowed values of a choice with the likely one', async () => {
    const missing = await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: {} });
    expect(missing.status, missing.text).toBe(422);
    expect(missing.body.error.code).toBe('MISSING_REQUIRED_FIELD');
    expect(missing.body.error.details.errors.map((e: { field: string }) => e.field)).toEqual(['priceId', 'successUrl', 'cancelUrl']);
    const role = await t.rest('POST', '/v1/settings/api-keys', { key: org.testKey, body: { role: 'develper' } });
    expect(role.status, role.text).toBe(422);
    expect(role.body.error).toMatchObject({
      code: 'VALIDATION_ERROR',
      message: 'role must be one of: "owner", "admin", "developer", "viewer", "billing" (did you mean "developer"?)',
      details: { field: 'role', expected: ['owner', 'admin', 'developer', 'viewer', 'billing'], did_you_mean: 'developer', value: 'develper' },
    });
  });

  it('a money field says its unit', async () => {
    const r = await t.rest('POST', '/v1/billing/credits/topup', { key: org.testKey, body: { amount: 50 } });
    expect(r.status, r.text).toBe(422);
    expect(r.body.error).toMatchObject({ code: 'VALIDATION_ERROR', message: 'amount must be at least 100 cents; it is 50', details: { field: 'amount', expected: '>= 100 cents' } });
    expect(r.body.error.details.errors[0]).toMatchObject({ unit: 'cents', example: 1000 });
    const text = await t.rest('POST', '/v1/billing/credits/topup', { key: org.testKey, body: { amount: '10.00' } });
    expect(text.body.error.message).toBe('amount must be a whole number of cents, not text; for example 1000');
  });
});

describe('the sandbox checkout page (checkoutUrl opens a page served by this service)', () => {
  const PAGE = '/v1/providers/payments-sandbox-checkout/callbacks';
  /** The application the customer comes back to (successUrl, cancelUrl). */
  let shop: http.Server;
  let shopUrl: string;
  beforeAll(async () => {
    shop = http.createServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(`<h1>${req.url?.startsWith('/ok') ? 'Welcome to Growth' : 'Checkout cancelled'}</h1>`);
    });
    await new Promise<void>((resolve) => shop.listen(0, '127.0.0.1', resolve));
    shopUrl = `http://127.0.0.1:${(shop.address() as AddressInfo).port}`;
  });
  afterAll(async () => { await new Promise((r) => shop?.close(r)); });

  async function checkout(o: TestOrg) {
    const r = await t.rest('POST', '/v1/billing/checkout', { key: o.testKey, body: { price_id: 'price_growth_monthly', success_url: `${shopUrl}/ok`, cancel_url: `${shopUrl}/cancel` } });
    expect(r.status, r.text).toBe(200);
    const url = new URL(r.body.data.checkoutUrl);
    return { sessionId: r.body.data.sessionId as string, page: `${t.baseUrl}${url.pathname}${url.search}`, path: url.pathname };
  }

  it('GET answers the page (its own script only), an unknown session a 404 page; other methods 405 with Allow', async () => {
    const o = await t.createOrg('starter', 'Page fetch');
    const { page, path } = await checkout(o);
    expect(path).toBe(PAGE);
    const r = await fetch(page);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    const csp = r.headers.get('content-security-policy')!;
    const nonce = /script-src 'nonce-([^']+)'/.exec(csp)![1];
    const html = await r.text();
    expect(html).toContain('Subscribe to Growth');
    expect(html).toContain('$199.00 per month');
    expect(html).toContain(`<script nonce="${nonce}">`);
    expect((await fetch(`${t.baseUrl}${PAGE}?session_id=cs_test_nope`)).status).toBe(404);
    expect((await fetch(`${t.baseUrl}${PAGE}`)).status).toBe(404);
    const put = await fetch(page, { method: 'PUT' });
    expect([put.status, put.headers.get('allow')]).toEqual([405, 'GET, POST']);
    expect((await put.json()).error.code).toBe('METHOD_NOT_ALLOWED');
    const hook = await fetch(`${t.baseUrl}/v1/providers/payments-sandbox/callbacks`);
    expect([hook.status, hook.headers.get('allow')]).toEqual([405, 'POST']);
  });

  describe.skipIf(!hasChromium)('in headless Chromium', () => {
    const browser = useChromium();

    it('a person pays with a test card and is sent to successUrl; the test plan is Growth', async () => {
      const o = await t.createOrg('starter', 'Page pay');
      const { page: url } = await checkout(o);
      const page = await browser().newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      // The declined payment's 402 is logged by Chromium as a failed resource: not a page error.
      page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(m.text()); });
      await page.goto(url, { waitUntil: 'load' });
      expect(await page.locator('h1').innerText()).toBe('Subscribe to Growth');
      // A declining card: the page says so and stays.
      await page.getByLabel('Card number').fill('4000 0000 0000 0002');
      await page.getByRole('button', { name: 'Pay and subscribe' }).click();
      await expect.poll(() => page.getByRole('alert').innerText(), { timeout: 30_000 }).toContain('declined');
      expect(page.url()).toBe(url);
      await page.getByLabel('Card number').fill('4242 4242 4242 4242');
      await page.getByRole('button', { name: 'Pay and subscribe' }).click();
      await page.waitForURL(`${shopUrl}/ok`, { timeout: 30_000 });
      expect(await page.locator('h1').innerText()).toBe('Welcome to Growth');
      expect(errors).toEqual([]);
      await eventually('the completed checkout', async () => {
        const plan = (await t.rest('GET', '/v1/billing/plan', { key: o.testKey })).body.data;
        return plan.status === 'active' ? plan : undefined;
      });
      expect((await t.rest('GET', '/v1/billing/plan', { key: o.testKey })).body.data).toMatchObject({ plan_id: 'growth', payment_method: { brand: 'visa', last4: '4242' } });
      expect((await t.rest('GET', '/v1/settings/organization', { key: o.testKey })).body.data.organization.plan).toBe('growth');
      expect((await t.rest('GET', '/v1/settings/organization', { key: o.liveKey })).body.data.organization.plan).toBe('starter');
      // The page of a paid session says so.
      await page.goto(url, { waitUntil: 'load' });
      expect(await page.locator('h1').innerText()).toBe('Already paid');
      await page.close();
    }, 90_000);

    it('Cancel sends the person to cancelUrl and changes nothing', async () => {
      const o = await t.createOrg('starter', 'Page cancel');
      const { page: url, sessionId } = await checkout(o);
      const page = await browser().newPage();
      await page.goto(url, { waitUntil: 'load' });
      await page.getByRole('button', { name: 'Cancel' }).click();
      await page.waitForURL(`${shopUrl}/cancel`, { timeout: 30_000 });
      const { rows } = await t.db.query('select status from checkout_sessions where id = $1', [sessionId]);
      expect(rows[0].status).toBe('cancelled');
      expect((await t.rest('GET', '/v1/billing/plan', { key: o.testKey })).body.data).toMatchObject({ plan_id: 'starter', status: 'trialing' });
      await page.close();
    }, 90_000);
  });
});
