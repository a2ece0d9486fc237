/**
 * Incremental delivery on /graphql: `@defer` and `@stream` answered in parts over multipart/mixed
 * (read by `meros` and by Apollo Client 4) and over SSE; an error inside a deferred fragment; the
 * `extensions` the gateway adds (first part only) and an idempotent mutation's replay of a
 * multipart answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// meros' fetch-Response reader (its default export reads node's IncomingMessage).
import { meros } from 'meros/browser';
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { Defer20220824Handler } from '@apollo/client/incremental';
import { startTestApp, type TestApp } from './helpers/testApp.ts';

let t: TestApp;
beforeAll(async () => { t = await startTestApp(); });
afterAll(async () => { await t?.close(); });

type Part = { data?: any; errors?: any[]; incremental?: { data?: any; items?: any[]; path: (string | number)[]; label?: string; errors?: any[] }[]; hasNext?: boolean; extensions?: any };

const MULTIPART = 'multipart/mixed; deferSpec=20220824, application/json';

function post(key: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${t.baseUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: MULTIPART, 'X-API-Key': key, ...headers },
    body: JSON.stringify(body),
  });
}

/** The parts of a multipart/mixed answer, as meros reads them. */
async function parts(res: Response): Promise<Part[]> {
  expect(res.headers.get('content-type')).toMatch(/^multipart\/mixed/);
  const read = await meros<Part>(res);
  if (!(Symbol.asyncIterator in read)) throw new Error('not a multipart answer');
  const out: Part[] = [];
  for await (const part of read) {
    expect(part.json).toBe(true);
    out.push(part.body);
  }
  return out;
}

async function sendSms(key: string, to: string): Promise<string> {
  const r = await t.gql<{ sendSms: { id: string } }>('mutation($i: SendSmsInput!) { sendSms(input: $i) { id } }', { i: { to, body: 'defer' } }, { key });
  expect(r.body.errors, r.text).toBeUndefined();
  return r.body.data!.sendSms.id;
}

const LIST_THEN_USAGE = `query ListThenUsage {
  messages(first: 5) { edges { node { id to } } }
  ... @defer(label: "usage") { billingUsage { periodStart voiceMinutesUsed messages { channel } } }
}`;

describe('@defer over multipart/mixed (meros)', () => {
  it('answers the list at once and the deferred field in a later part; cost and rate limit ride on the first part', async () => {
    const org = await t.createOrg('growth');
    const id = await sendSms(org.testKey, '+14155550101');
    const res = await post(org.testKey, { query: LIST_THEN_USAGE });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit')).toBeTruthy();
    const got = await parts(res);
    expect(got.length).toBeGreaterThanOrEqual(2);
    const [first, ...rest] = got;
    expect(first!.hasNext).toBe(true);
    expect(first!.data.messages.edges.map((e: any) => e.node.id)).toEqual([id]);
    expect(first!.data.billingUsage).toBeUndefined();
    expect(first!.extensions.cost).toMatchObject({ requested: expect.any(Number), limit: expect.any(Number) });
    expect(first!.extensions.rateLimit).toMatchObject({ limit: expect.any(Number), remaining: expect.any(Number), resetAt: expect.any(String) });
    // Later parts: only what the executor gives them.
    for (const p of rest) expect(p.extensions).toBeUndefined();
    expect(rest.at(-1)!.hasNext).toBe(false);
    const usage = rest.flatMap((p) => p.incremental ?? []).find((i) => i.label === 'usage');
    expect(usage).toMatchObject({ path: [], data: { billingUsage: { periodStart: expect.any(String), voiceMinutesUsed: expect.any(Number) } } });
  });

  it('an error inside a deferred fragment arrives in its incremental entry; the rest of the answer stays', async () => {
    const org = await t.createOrg('growth');
    const id = await sendSms(org.testKey, '+14155550102');
    const got = await parts(await post(org.testKey, {
      query: `query Broken($missing: ID!) {
        messages(first: 5) { edges { node { id } } }
        ... @defer(label: "missing") { message(id: $missing) { id } }
        ... @defer(label: "fine") { viewer { role } }
      }`,
      variables: { missing: 'msg_0000000000000000000000000' },
    }));
    expect(got[0]!.errors).toBeUndefined();
    expect(got[0]!.data.messages.edges[0].node.id).toBe(id);
    const entries = got.flatMap((p) => p.incremental ?? []);
    const broken = entries.find((i) => i.label === 'missing')!;
    expect(broken.errors?.[0]).toMatchObject({ path: ['message'], extensions: { code: 'NOT_FOUND' } });
    expect(entries.find((i) => i.label === 'fine')).toMatchObject({ data: { viewer: { role: 'owner' } } });
    expect(got.at(-1)!.hasNext).toBe(false);
  });

  it('@stream sends the first items at once and the rest as incremental items', async () => {
    const org = await t.createOrg('growth');
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await sendSms(org.testKey, `+1415555011${i}`));
    const got = await parts(await post(org.testKey, { query: 'query Streamed { messages(first: 3) { edges @stream(initialCount: 1) { node { id } } } }' }));
    expect(got[0]!.data.messages.edges).toHaveLength(1);
    const streamed = got.flatMap((p) => p.incremental ?? []).flatMap((i) => {
      expect(i.path.slice(0, 2)).toEqual(['messages', 'edges']);
      return i.items ?? [];
    });
    const all = [...got[0]!.data.messages.edges, ...streamed].map((e: any) => e.node.id);
    expect(all).toEqual([...ids].reverse());
    expect(got.at(-1)!.hasNext).toBe(false);
  });

  it('the same @defer over SSE: one event per part, then complete', async () => {
    const org = await t.createOrg('growth');
    await sendSms(org.testKey, '+14155550103');
    const res = await post(org.testKey, { query: LIST_THEN_USAGE }, { accept: 'text/event-stream' });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const text = await res.text();
    const events = [...text.matchAll(/^event: next\ndata: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as Part);
    expect(events[0]!.hasNext).toBe(true);
    expect(events[0]!.extensions.cost.requested).toBeGreaterThan(0);
    expect(events.flatMap((e) => e.incremental ?? []).some((i) => i.label === 'usage' && i.data.billingUsage)).toBe(true);
    expect(text).toMatch(/event: complete/);
  });

  it('a client that accepts only JSON gets every part merged into one answer', async () => {
    const org = await t.createOrg('growth');
    const id = await sendSms(org.testKey, '+14155550106');
    const res = await post(org.testKey, {
      query: `query Whole($missing: ID!) {
        messages(first: 5) { edges @stream(initialCount: 0) { node { id ... @defer { status } } } }
        ... @defer(label: "usage") { billingUsage { voiceMinutesUsed } }
        ... @defer(label: "missing") { message(id: $missing) { id } }
      }`,
      variables: { missing: 'msg_0000000000000000000000000' },
    }, { accept: 'application/json' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    const body = await res.json();
    expect(body.data.messages.edges).toEqual([{ node: { id, status: expect.any(String) } }]);
    expect(body.data.billingUsage).toEqual({ voiceMinutesUsed: expect.any(Number) });
    expect(body.errors).toEqual([expect.objectContaining({ path: ['message'], extensions: expect.objectContaining({ code: 'NOT_FOUND' }) })]);
    expect(body.extensions.cost.requested).toBeGreaterThan(0);
    expect(body.hasNext).toBeUndefined();
  });

  it('a mutation with @defer and an Idempotency-Key replays its multipart answer byte for byte', async () => {
    const org = await t.createOrg('growth');
    const body = { query: 'mutation Deferred($i: SendSmsInput!) { sendSms(input: $i) { id ... @defer(label: "status") { status } } }', variables: { i: { to: '+14155550104', body: 'once' } } };
    const first = await post(org.testKey, body, { 'Idempotency-Key': 'defer-once-1' });
    const firstText = await first.text();
    expect(first.headers.get('content-type')).toMatch(/^multipart\/mixed/);
    const again = await post(org.testKey, body, { 'Idempotency-Key': 'defer-once-1' });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('content-type')).toMatch(/^multipart\/mixed/);
    expect(await again.text()).toBe(firstText);
    const sent = await t.gql<{ messages: { edges: unknown[] } }>('{ messages(first: 5) { edges { node { id } } } }', undefined, { key: org.testKey });
    expect(sent.body.data!.messages.edges).toHaveLength(1);
  });
});

describe('@defer with Apollo Client 4', () => {
  it('reads the list first and merges the deferred fields into the same result', async () => {
    const org = await t.createOrg('growth');
    const id = await sendSms(org.testKey, '+14155550105');
    const client = new ApolloClient({
      link: new HttpLink({ uri: `${t.baseUrl}/graphql`, headers: { 'X-API-Key': org.testKey } }),
      cache: new InMemoryCache(),
      incrementalHandler: new Defer20220824Handler(),
    });
    const query = gql`
      query AppList {
        messages(first: 5) { edges { node { id to ... @defer(label: "slow") { status statusHistory { status } } } } }
      }
    `;
    const seen: { dataState: string; status: unknown }[] = [];
    const final = await new Promise<any>((resolve, reject) => {
      const sub = client.watchQuery({ query, fetchPolicy: 'network-only' }).subscribe({
        next: (r) => {
          const node = (r.data as any)?.messages?.edges?.[0]?.node;
          if (node) seen.push({ dataState: r.dataState, status: node.status });
          if (r.dataState === 'complete') { sub.unsubscribe(); resolve(r.data); }
        },
        error: reject,
      });
    });
    expect(final.messages.edges[0].node).toMatchObject({ __typename: 'Message', id, to: '+14155550105', status: expect.any(String) });
    expect(final.messages.edges[0].node.statusHistory.length).toBeGreaterThan(0);
    // Apollo read the list before the deferred part: a `streaming` result without the deferred fields.
    expect(seen[0]).toEqual({ dataState: 'streaming', status: undefined });
    client.stop();
  });
});
