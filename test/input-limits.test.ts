/**
 * Odd input answers the documented envelope, never 500, over HTTP against the real database: bodies
 * and documents nested past MAX_NESTING (REST, GraphQL variables and literals, the variables query
 * parameter, provider callbacks) are 400 VALIDATION_ERROR (`details.limit: "nesting"`) and change
 * nothing, while nesting up to the limit works; and `node(id:)` / `nodes(ids:)` with an id of every
 * registered prefix either loads a Node or answers NOT_FOUND.
 */
import net from 'node:net';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ID_PREFIXES, newId, prefixOf, type IdPrefix } from '../src/platform/ids.ts';
import { MODULES } from '../src/modules/index.ts';
import { MAX_NESTING } from '../src/platform/nesting.ts';
import { manualClockClient, startTestApp, useFileApp, type TestOrg } from './helpers/testApp.ts';
import { expectError } from './helpers/assertions.ts';

const app = useFileApp(() => startTestApp());
let org: TestOrg | undefined;
const { call, gql } = manualClockClient(app, () => org!);

/** `{"a":{"a":…1…}}` with `levels` objects. */
const nestedJson = (levels: number) => `${'{"a":'.repeat(levels - 1)}{"a":1}${'}'.repeat(levels - 1)}`;
const nestedLiteral = (levels: number) => `${'{ a: '.repeat(levels - 1)}{ a: 1 }${' }'.repeat(levels - 1)}`;

async function contacts(): Promise<number> {
  org ??= await app().createOrg('enterprise', 'Odd input');
  return (await app().db.query('select count(*)::int as n from contacts where organization_id = $1', [org.orgId])).rows[0].n;
}

describe('nesting', () => {
  it('REST: a body nested past the limit is 400 VALIDATION_ERROR and stores nothing; one at the limit works', async () => {
    const before = await contacts();
    for (const levels of [MAX_NESTING, 100_000]) {
      const r = await call('POST', '/v1/contacts', { rawBody: `{"phone":"+14155550111","metadata":${nestedJson(levels)}}`, headers: { 'Content-Type': 'application/json' } });
      const e = expectError(r, 400, 'VALIDATION_ERROR');
      expect(e.error.details).toEqual({ limit: 'nesting', max: MAX_NESTING });
    }
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    expectError(await call('PUT', '/v1/contacts/con_01jd0000000000000000000000', { rawBody: `{"metadata":${deep}}`, headers: { 'Content-Type': 'application/json' } }), 400, 'VALIDATION_ERROR');
    expect(await contacts()).toBe(before);
    // Brackets inside strings do not count.
    const inString = await call('POST', '/v1/contacts', { body: { phone: '+14155550112', metadata: { note: '{'.repeat(10_000) } } });
    expect(inString.status, inString.text).toBe(201);
    // The body is one level: metadata may nest 63 more.
    const atLimit = await call('POST', '/v1/contacts', { rawBody: `{"phone":"+14155550113","metadata":${nestedJson(MAX_NESTING - 1)}}`, headers: { 'Content-Type': 'application/json' } });
    expect(atLimit.status, atLimit.text).toBe(201);
    expect(await contacts()).toBe(before + 2);
  });

  it('GraphQL: variables, literals and the variables parameter nested past the limit are VALIDATION_ERROR, never 500, and store nothing', async () => {
    const before = await contacts();
    const mutation = 'mutation($m: JSON) { createContact(input: { phone: "+14155550121", metadata: $m }) { id } }';
    const body = `{"query":${JSON.stringify(mutation)},"variables":{"m":${nestedJson(100_000)}}}`;
    const r = await app().rest('POST', '/graphql', { key: org!.testKey, rawBody: body, headers: { 'Content-Type': 'application/json' } });
    expect(r.status, r.text.slice(0, 300)).toBe(400);
    expect(r.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 400, details: { limit: 'nesting', max: MAX_NESTING } });
    const literal = await gql(`mutation { createContact(input: { phone: "+14155550122", metadata: ${nestedLiteral(20_000)} }) { id } }`);
    expect(literal.status).toBeLessThan(500);
    expect(literal.body.errors?.[0]?.extensions, literal.text.slice(0, 300)).toMatchObject({ code: 'VALIDATION_ERROR', status: 400, details: { limit: 'nesting', max: MAX_NESTING } });
    const viaGet = await app().rest('GET', `/graphql?query=${encodeURIComponent('query($v: JSON) { __typename }')}&variables=${encodeURIComponent(`{"v":${nestedJson(1000)}}`)}`,
      { key: org!.testKey, headers: { Accept: 'application/json' } });
    expect(viaGet.status).toBe(400);
    expect(viaGet.body.errors[0].extensions.code).toBe('VALIDATION_ERROR');
    expect(await contacts()).toBe(before);
    // Within the limit the same mutation works (the literal's own braces and the selection count too).
    const ok = await gql(`mutation { createContact(input: { phone: "+14155550123", metadata: ${nestedLiteral(40)} }) { id } }`);
    expect(ok.body.errors, ok.text).toBeUndefined();
    const okVars = await gql(mutation, { m: JSON.parse(nestedJson(40)) });
    expect(okVars.body.errors, okVars.text).toBeUndefined();
    expect(await contacts()).toBe(before + 2);
  });

  it('provider callbacks: a deep body is 400, not 500', async () => {
    const r = await app().rest('POST', '/v1/providers/payments-sandbox-checkout/callbacks', { rawBody: `{"session_id":${nestedJson(100_000)}}`, headers: { 'Content-Type': 'application/json' } });
    const e = expectError(r, 400, 'VALIDATION_ERROR');
    expect(e.error.details).toEqual({ limit: 'nesting', max: MAX_NESTING });
  });
});

describe('node ids of every prefix', () => {
  const prefixes = [...new Set([...Object.keys(ID_PREFIXES), ...MODULES.flatMap((m) => Object.keys((m as { ids?: Record<string, string> }).ids ?? {}))])] as IdPrefix[];

  it('knows every registered prefix', () => {
    expect(prefixes.length).toBeGreaterThan(40);
    for (const p of prefixes) expect(prefixOf(newId(p)), p).toBe(p);
  });

  it('node(id:) of an id nobody holds answers NOT_FOUND for every prefix (resource types and the rest alike), nodes(ids:) too', async () => {
    await contacts();
    const failures: string[] = [];
    for (const p of prefixes) {
      const id = newId(p);
      const r = await gql('query($id: ID!) { node(id: $id) { id } }', { id });
      const code = r.body.errors?.[0]?.extensions?.code;
      if (r.status >= 500 || !(code === 'NOT_FOUND' || code === 'CALL_NOT_FOUND') || r.body.data?.node) failures.push(`${p}: ${r.status} ${r.text.slice(0, 160)}`);
    }
    const all = await gql('query($ids: [ID!]!) { nodes(ids: $ids) { id } }', { ids: prefixes.map((p) => newId(p)) });
    expect(all.status).toBeLessThan(500);
    for (const e of all.body.errors ?? []) if (e.extensions.code === 'INTERNAL_ERROR') failures.push(`nodes: ${e.message}`);
    expect(failures).toEqual([]);
  });

  it('ids of resources reachable only through their parent are NOT_FOUND even when they exist', async () => {
    await contacts();
    const a = await call('POST', '/v1/agents', { body: { name: 'Nodes', type: 'conversational', model: 'sandbox-1', system_prompt: 'Be brief.' } });
    expect(a.status, a.text).toBe(201);
    const turn = await call('POST', `/v1/agents/${a.body.data.id}/test`, { body: { message: 'hi' } });
    expect(turn.status, turn.text).toBe(200);
    const conv = turn.body.data.conversation_id as string;
    expect(conv).toMatch(/^conv_/);
    expect((await app().db.query('select count(*)::int as n from agent_conversations where id = $1', [conv])).rows[0].n).toBe(1);
    const r = await gql('query($id: ID!) { node(id: $id) { id } }', { id: conv });
    expect(r.body.errors?.[0]?.extensions?.code, r.text).toBe('NOT_FOUND');
  });
});

describe('percent-encoding in the path', () => {
  // Found by the fuzz harness (test/fuzz.test.ts): `%ED%A0%80` (a lone surrogate's UTF-8 bytes) made
  // decodeURIComponent throw in the router, answered 500.
  it('a malformed percent-encoding in a path parameter is 400 VALIDATION_ERROR, never 500, and changes nothing', async () => {
    const before = await contacts();
    for (const id of ['%ED%A0%80', '%E0%A4%A', 'con_%', '%FF']) {
      const get = expectError(await call('GET', `/v1/contacts/${id}`), 400, 'VALIDATION_ERROR');
      expect(get.error.details).toEqual({ field: 'id' });
      expectError(await call('PUT', `/v1/contacts/${id}/preferences`, { body: { preferences: {}, source: 'api' } }), 400, 'VALIDATION_ERROR');
      expectError(await call('DELETE', `/v1/contacts/${id}`), 400, 'VALIDATION_ERROR');
    }
    // A path no route serves with a malformed segment: still the router's own answer, not 500.
    const unmatched = await call('POST', '/v1/contacts/%ED%A0%80');
    expect(unmatched.status).toBeLessThan(500);
    expect(['NOT_FOUND', 'METHOD_NOT_ALLOWED']).toContain(unmatched.body.error.code);
    expect(await contacts()).toBe(before);
  });
});

describe('requests the HTTP parser refuses', () => {
  // Found by the fuzz harness: a query string past Node's header limit answered a bare 431 with no envelope.
  it('a request line past the header limit is 400 VALIDATION_ERROR in the envelope, and the server serves the next request', async () => {
    await contacts();
    const r = await call('GET', `/v1/contacts?search=${'a'.repeat(70_000)}`);
    const e = expectError(r, 400, 'VALIDATION_ERROR');
    expect(e.error.details).toMatchObject({ limit: 'headers' });
    expect(r.headers.get('connection')).toBe('close');
    expect((await call('GET', '/v1/contacts?limit=1')).status).toBe(200);
  });

  it('malformed HTTP framing is 400 VALIDATION_ERROR in the envelope', async () => {
    const { port } = new URL(app().baseUrl);
    const socket = net.connect(Number(port), '127.0.0.1');
    let text = '';
    socket.on('data', (c: Buffer) => { text += c.toString('utf8'); });
    await once(socket, 'connect');
    socket.write('GET /v1/contacts HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n');
    await once(socket, 'close');
    expect(text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4));
    expect(body.error).toMatchObject({ code: 'VALIDATION_ERROR', status: 400, details: { limit: 'framing' } });
    expect(text).toContain(`X-Request-Id: ${body.meta.request_id}`);
  });
});

describe('many problems at once', () => {
  // Found by the fuzz harness: a GraphQL JSON argument sent as a 70,000-character string spreads into
  // 70,000 unknown keys; listing each with a "did you mean" held the event loop for seconds.
  it('an input with thousands of unknown keys lists the first problems and counts the rest, over REST and GraphQL', async () => {
    const before = await contacts();
    const keys = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, 1]));
    const r = await call('POST', '/v1/contacts', { body: { phone: '+14155550131', ...keys } });
    expect(r.status, r.text.slice(0, 300)).toBe(422);
    expect(r.body.error.code).toBe('VALIDATION_ERROR');
    expect(r.body.error.details.errors).toHaveLength(20);
    expect(r.body.error.details.problem_count).toBe(20_000);
    expect(r.body.error.message).toMatch(/^20000 problems: Received unknown parameter: k0; .*; and 19980 more$/);
    const g = await gql('mutation($id: ID!, $g: JSON!) { updateAgentGuardrails(id: $id, guardrails: $g) { id } }', { id: 'agt_01jd0000000000000000000000', g: 'a'.repeat(70_000) });
    expect(g.status).toBeLessThan(500);
    expect(g.text.length).toBeLessThan(20_000);
    expect(g.body.errors?.[0]?.extensions?.code, g.text.slice(0, 300)).toBe('VALIDATION_ERROR');
    expect(await contacts()).toBe(before);
  });
});
