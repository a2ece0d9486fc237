/**
 * The OpenAPI document as a contract: the requests of the README's quick start (an SMS, the message
 * list and its next page, one message, an error, a contact, a webhook, the organization) go through
 * Stoplight Prism's validation proxy (`prism proxy schema/openapi.json <service> --errors`) to a
 * running service, and Prism finds no request or response violation (it names them in the
 * `sl-violations` header, and with `--errors` answers in the service's place). One Prism process
 * for the file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startPrism, violationsOf, type PrismProxy } from './helpers/prism.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
let prism: PrismProxy | undefined;
let proxy = '';

beforeAll(async () => {
  t = await startTestApp({ clock: systemClock, env: { WEBHOOKS_ALLOW_LOOPBACK: '1' } });
  org = await t.createOrg('growth');
  prism = await startPrism(t.baseUrl);
  proxy = prism.url;
}, 90_000);

afterAll(async () => {
  await prism?.stop();
  await t?.close();
});

type Answer = { status: number; body: any; violations: string | null };

/** A request through Prism, with the test key. */
async function through(method: string, p: string, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { 'X-API-Key': org.testKey, Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(`${proxy}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let parsed: unknown;
  try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = text; }
  return { status: r.status, body: parsed, violations: violationsOf(r.headers.get('sl-violations'), parsed) };
}

/** The answer must be the service's own, with the expected status, and Prism must have nothing to say about either side. */
function clean(what: string, a: Answer, status: number): Answer {
  expect(a.violations, `${what}: ${a.violations}\n${JSON.stringify(a.body).slice(0, 800)}`).toBeNull();
  expect(a.status, `${what}: ${JSON.stringify(a.body).slice(0, 800)}`).toBe(status);
  return a;
}

describe('the quick start through Prism\'s validation proxy', () => {
  it('finds no request or response violation', async () => {
    clean('GET /v1/settings/organization', await through('GET', '/v1/settings/organization'), 200);
    const sent = clean('POST /v1/messages/sms', await through('POST', '/v1/messages/sms', { to: '+14155550100', body: 'Hello from the sandbox' }), 201);
    const id = sent.body.data.id as string;
    clean('POST /v1/messages/sms (second)', await through('POST', '/v1/messages/sms', { to: '+14155550101', body: 'And another' }), 201);
    const first = clean('GET /v1/messages?limit=1', await through('GET', '/v1/messages?limit=1'), 200);
    expect(first.body.meta.pagination.has_more).toBe(true);
    const next = clean('GET /v1/messages (next page)', await through('GET', `/v1/messages?limit=1&cursor=${encodeURIComponent(first.body.meta.pagination.cursor)}`), 200);
    expect(next.body.data[0].id).not.toBe(first.body.data[0].id);
    clean('GET /v1/messages?channel=sms', await through('GET', '/v1/messages?channel=sms&status=queued'), 200);
    const message = clean('GET /v1/messages/{id}', await through('GET', `/v1/messages/${id}`), 200);
    expect(message.body.data.id).toBe(id);
    // Errors: an unknown (well-formed) id, a number that is not one, a missing field.
    const missing = clean('GET /v1/messages/{unknown id}', await through('GET', '/v1/messages/msg_01abcdefghjkmnpqrstvwxyz00'), 404);
    expect(missing.body.error.code).toBe('NOT_FOUND');
    const invalid = clean('POST /v1/messages/sms (bad number)', await through('POST', '/v1/messages/sms', { to: '12', body: 'x' }), 422);
    expect(invalid.body.error.code).toBe('INVALID_PHONE_NUMBER');
    clean('GET /v1/messages (bad cursor)', await through('GET', '/v1/messages?cursor=nonsense'), 400);
    const contact = clean('POST /v1/contacts', await through('POST', '/v1/contacts', { phone: '+14155550102', first_name: 'Ada', tags: ['vip'] }), 201);
    clean('GET /v1/contacts/{id}', await through('GET', `/v1/contacts/${contact.body.data.id}`), 200);
    clean('GET /v1/contacts', await through('GET', '/v1/contacts?limit=10'), 200);
    const hook = clean('POST /v1/webhooks', await through('POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['message.*'] }), 201);
    clean('GET /v1/webhooks/{id}', await through('GET', `/v1/webhooks/${hook.body.data.id}`), 200);
    clean('GET /v1/webhooks', await through('GET', '/v1/webhooks'), 200);
  }, 120_000);

  it('does check: a request outside the document is a violation', async () => {
    // Not an id of a message: the path parameter's pattern refuses it before the service sees it.
    const a = await through('GET', '/v1/messages/not-an-id');
    expect(a.violations ?? '', JSON.stringify(a.body)).toContain('must match pattern');
    expect(a.status).toBe(422);
  });
});
