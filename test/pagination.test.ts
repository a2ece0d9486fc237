/**
 * Cursor pagination over HTTP: REST `meta.pagination` and GraphQL connections page through the same
 * list with the same signed cursors; altered, foreign, re-filtered and expired cursors are 400.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
let org2: TestOrg;
let key: string;
/** Every API key id of `org`, newest first, as the database has them. */
let allIds: string[];

const clock = () => t.clock as ManualClock;
const API_KEYS = '/v1/settings/api-keys';

beforeAll(async () => {
  t = await startTestApp();
  // Enterprise: a burst allowance large enough that no request queues on the frozen clock.
  org = await t.createOrg('enterprise', 'Paging org');
  org2 = await t.createOrg('enterprise', 'Other org');
  key = org.testKey;
  for (let i = 0; i < 7; i++) {
    clock().advance(1000);
    await t.createKey(org.orgId, i % 2 ? 'developer' : 'viewer', i % 3 ? 'test' : 'live');
  }
  const { rows } = await t.db.query('select id from api_keys where organization_id = $1 order by id desc', [org.orgId]);
  allIds = rows.map((r: { id: string }) => r.id);
});
afterAll(async () => { await t?.close(); });
// A fresh second (and burst allowance) for every test; within a test the clock stands still.
beforeEach(() => { clock().advance(1000); });

type RestPage = { data: { id: string; created_at: string }[]; meta: { pagination: { cursor: string | null; has_more: boolean } } };

async function restPage(query: string, k = key): Promise<HttpResponse<RestPage>> {
  return t.rest<RestPage>('GET', `${API_KEYS}?${query}`, { key: k });
}

const GQL_PAGE = `query($first: Int, $after: String, $mode: Mode) {
  apiKeys(first: $first, after: $after, mode: $mode) {
    edges { cursor node { id } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
}`;
const GQL_BACKWARD = `query($last: Int, $before: String) {
  apiKeys(last: $last, before: $before) {
    edges { cursor node { id } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
}`;
type GqlPage = { apiKeys: { edges: { cursor: string; node: { id: string } }[]; pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null } } };

async function gqlPage(vars: { first?: number; after?: string | null; mode?: 'live' | 'test' }, k = key) {
  return t.gql<GqlPage>(GQL_PAGE, vars, { key: k });
}

function expectRestInvalidCursor(r: HttpResponse) {
  expect(r.status, r.text).toBe(400);
  expect(r.body.error).toMatchObject({ code: 'INVALID_CURSOR', status: 400 });
  expect(r.body.meta.request_id).toBe(r.headers.get('x-request-id'));
  expect(r.body.data).toBeUndefined();
}

function expectGqlInvalidCursor(r: HttpResponse<{ data?: unknown; errors?: { extensions: Record<string, unknown> }[] }>) {
  expect(r.body.errors?.length, r.text).toBeGreaterThan(0);
  expect(r.body.errors![0]!.extensions).toMatchObject({ code: 'INVALID_CURSOR', status: 400 });
  expect(r.body.data ?? null).toBeNull();
}

/** Changes one character of the cursor, always to a different one. */
function flip(cursor: string, at: number): string {
  const ch = cursor[at]!;
  return cursor.slice(0, at) + (ch === 'A' ? 'B' : 'A') + cursor.slice(at + 1);
}

describe('setup', () => {
  it('the org has the two bootstrap keys and seven more', () => {
    expect(allIds).toHaveLength(9);
  });
});

describe('REST', () => {
  it('pages through every key exactly once, newest first, until has_more is false', async () => {
    const seen: string[] = [];
    const cursors: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; ; pages++) {
      expect(pages, 'too many pages').toBeLessThan(10);
      const r = await restPage(`limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(r.status, r.text).toBe(200);
      expect(r.body.data.length).toBeLessThanOrEqual(3);
      seen.push(...r.body.data.map((k) => k.id));
      const p = r.body.meta.pagination;
      if (!p.has_more) {
        expect(p.cursor).toBeNull();
        break;
      }
      expect(r.body.data).toHaveLength(3);
      expect(typeof p.cursor).toBe('string');
      cursors.push(p.cursor!);
      cursor = p.cursor;
    }
    expect(seen).toEqual(allIds);
    expect(new Set(seen).size).toBe(seen.length);
    expect(cursors).toHaveLength(2);
    // Newest first: ids and creation times both descend.
    expect([...seen].sort().reverse()).toEqual(seen);
  });

  it('newest first by created_at too', async () => {
    const r = await restPage('limit=100');
    const times = r.body.data.map((k) => Date.parse(k.created_at));
    for (let i = 1; i < times.length; i++) expect(times[i - 1]!).toBeGreaterThanOrEqual(times[i]!);
    expect(r.body.data.map((k) => k.id)).toEqual(allIds);
    expect(r.body.meta.pagination).toEqual({ cursor: null, has_more: false });
  });

  it('defaults to 20 per page', async () => {
    const r = await restPage('');
    expect(r.body.data).toHaveLength(allIds.length);
    expect(r.body.meta.pagination.has_more).toBe(false);
  });

  it('filters by mode and pages within the filter', async () => {
    const { rows } = await t.db.query("select id from api_keys where organization_id = $1 and mode = 'test' order by id desc", [org.orgId]);
    const testIds = rows.map((r: { id: string }) => r.id);
    expect(testIds.length).toBeGreaterThan(2);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await restPage(`mode=test&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(r.status, r.text).toBe(200);
      seen.push(...r.body.data.map((k) => k.id));
      cursor = r.body.meta.pagination.has_more ? r.body.meta.pagination.cursor : null;
    } while (cursor);
    expect(seen).toEqual(testIds);
  });

  it('an altered cursor → 400 INVALID_CURSOR', async () => {
    const cursor = (await restPage('limit=3')).body.meta.pagination.cursor!;
    const dot = cursor.indexOf('.');
    for (const at of [0, Math.floor(dot / 2), dot - 1, dot + 1, cursor.length - 1]) {
      expectRestInvalidCursor(await restPage(`limit=3&cursor=${encodeURIComponent(flip(cursor, at))}`));
    }
    for (const bad of ['garbage', cursor.slice(0, -1), `${cursor}x`, cursor.split('.')[0]!, '.', `${cursor}.${cursor}`]) {
      expectRestInvalidCursor(await restPage(`limit=3&cursor=${encodeURIComponent(bad)}`));
    }
    // The original still works.
    expect((await restPage(`limit=3&cursor=${encodeURIComponent(cursor)}`)).status).toBe(200);
  });

  it('a cursor from another organization → 400', async () => {
    const foreign = (await restPage('limit=1', org2.testKey)).body.meta.pagination.cursor!;
    expect(typeof foreign).toBe('string');
    expectRestInvalidCursor(await restPage(`limit=1&cursor=${encodeURIComponent(foreign)}`));
  });

  it('a cursor from the other mode (test key vs live key) → 400', async () => {
    const fromTest = (await restPage('limit=1')).body.meta.pagination.cursor!;
    expectRestInvalidCursor(await restPage(`limit=1&cursor=${encodeURIComponent(fromTest)}`, org.liveKey));
  });

  it('a cursor issued with ?mode=test used with ?mode=live (or no mode) → 400', async () => {
    const r = await restPage('mode=test&limit=1');
    expect(r.body.meta.pagination.has_more).toBe(true);
    const c = encodeURIComponent(r.body.meta.pagination.cursor!);
    expectRestInvalidCursor(await restPage(`mode=live&limit=1&cursor=${c}`));
    expectRestInvalidCursor(await restPage(`limit=1&cursor=${c}`));
    expect((await restPage(`mode=test&limit=1&cursor=${c}`)).status).toBe(200);
  });

  it('a cursor of another list → 400', async () => {
    const r = await t.rest('GET', '/v1/settings/audit-logs?limit=1', { key });
    expect(r.body.meta.pagination.has_more).toBe(true);
    const audit = r.body.meta.pagination.cursor as string;
    expectRestInvalidCursor(await restPage(`limit=1&cursor=${encodeURIComponent(audit)}`));
    const team = await t.rest('GET', `/v1/settings/team?cursor=${encodeURIComponent((await restPage('limit=1')).body.meta.pagination.cursor!)}`, { key });
    expectRestInvalidCursor(team);
  });

  it('an expired cursor → 400', async () => {
    const cursor = (await restPage('limit=3')).body.meta.pagination.cursor!;
    clock().advance((t.config.cursorTtlSeconds - 60) * 1000);
    expect((await restPage(`limit=3&cursor=${encodeURIComponent(cursor)}`)).status).toBe(200);
    clock().advance(120 * 1000);
    const r = await restPage(`limit=3&cursor=${encodeURIComponent(cursor)}`);
    expectRestInvalidCursor(r);
    expect(r.text).toMatch(/expired/i);
  });

  it('the empty last page has has_more false', async () => {
    // The last item's own cursor (as a GraphQL edge carries it) continues after the end of the list.
    const all = await gqlPage({ first: 100 });
    const lastEdgeCursor = all.body.data!.apiKeys.edges.at(-1)!.cursor;
    const r = await restPage(`limit=3&cursor=${encodeURIComponent(lastEdgeCursor)}`);
    expect(r.status, r.text).toBe(200);
    expect(r.body.data).toEqual([]);
    expect(r.body.meta.pagination).toEqual({ cursor: null, has_more: false });
  });
});

describe('GraphQL', () => {
  it('pages through every key exactly once, newest first, following endCursor', async () => {
    const seen: string[] = [];
    let after: string | null = null;
    for (let pages = 0; ; pages++) {
      expect(pages, 'too many pages').toBeLessThan(10);
      const r = await gqlPage({ first: 3, after });
      expect(r.body.errors, r.text).toBeUndefined();
      const conn = r.body.data!.apiKeys;
      expect(conn.edges.length).toBeLessThanOrEqual(3);
      // Something lies before every page but the first: at least the item its `after` names.
      expect(conn.pageInfo.hasPreviousPage).toBe(pages > 0);
      seen.push(...conn.edges.map((e) => e.node.id));
      if (conn.edges.length > 0) {
        expect(conn.pageInfo.startCursor).toBe(conn.edges[0]!.cursor);
        expect(conn.pageInfo.endCursor).toBe(conn.edges.at(-1)!.cursor);
      }
      if (!conn.pageInfo.hasNextPage) break;
      expect(conn.edges).toHaveLength(3);
      after = conn.pageInfo.endCursor;
    }
    expect(seen).toEqual(allIds);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('pages backward from the end with last/before: every key once, each page newest first', async () => {
    const pages: string[][] = [];
    let before: string | null = null;
    for (;;) {
      expect(pages.length, 'too many pages').toBeLessThan(10);
      const r: HttpResponse<{ data?: GqlPage; errors?: any[] }> = await t.gql<GqlPage>(GQL_BACKWARD, { last: 3, before }, { key });
      expect(r.body.errors, r.text).toBeUndefined();
      const conn = r.body.data!.apiKeys;
      pages.push(conn.edges.map((e) => e.node.id));
      expect(conn.pageInfo.hasNextPage).toBe(before !== null);
      if (!conn.pageInfo.hasPreviousPage) break;
      expect(conn.edges).toHaveLength(3);
      before = conn.pageInfo.startCursor;
    }
    // The last page read is the newest; read back to front, the pages are the list in order.
    expect(pages.reverse().flat()).toEqual(allIds);
  });

  it('refuses a page in both directions at once', async () => {
    const r = await t.gql('{ apiKeys(first: 2, last: 2) { edges { node { id } } } }', {}, { key });
    expect(r.body.errors?.[0]?.extensions?.code, r.text).toBe('VALIDATION_ERROR');
  });

  it('uses the same cursors as REST, interchangeably', async () => {
    // The clock stands still within the test, so the same position gives the same cursor string.
    const rest1 = await restPage('limit=3');
    const gql1 = await gqlPage({ first: 3 });
    expect(gql1.body.data!.apiKeys.pageInfo.endCursor).toBe(rest1.body.meta.pagination.cursor);

    // REST cursor → GraphQL after.
    const gql2 = await gqlPage({ first: 3, after: rest1.body.meta.pagination.cursor });
    expect(gql2.body.errors, gql2.text).toBeUndefined();
    expect(gql2.body.data!.apiKeys.edges.map((e) => e.node.id)).toEqual(allIds.slice(3, 6));

    // GraphQL endCursor → REST cursor.
    const rest3 = await restPage(`limit=3&cursor=${encodeURIComponent(gql2.body.data!.apiKeys.pageInfo.endCursor!)}`);
    expect(rest3.status, rest3.text).toBe(200);
    expect(rest3.body.data.map((k) => k.id)).toEqual(allIds.slice(6, 9));

    // And an edge cursor from the middle continues after that edge, on both surfaces.
    const mid = gql1.body.data!.apiKeys.edges[1]!.cursor;
    expect((await restPage(`limit=2&cursor=${encodeURIComponent(mid)}`)).body.data.map((k) => k.id)).toEqual(allIds.slice(2, 4));
    expect((await gqlPage({ first: 2, after: mid })).body.data!.apiKeys.edges.map((e) => e.node.id)).toEqual(allIds.slice(2, 4));
  });

  it('with a mode filter, REST and GraphQL cursors agree on the binding', async () => {
    const rest = await restPage('mode=test&limit=1');
    const c = rest.body.meta.pagination.cursor!;
    const ok = await gqlPage({ first: 1, after: c, mode: 'test' });
    expect(ok.body.errors, ok.text).toBeUndefined();
    expectGqlInvalidCursor(await gqlPage({ first: 1, after: c, mode: 'live' }));
    expectGqlInvalidCursor(await gqlPage({ first: 1, after: c }));
  });

  it('an altered cursor → INVALID_CURSOR', async () => {
    const c = (await gqlPage({ first: 3 })).body.data!.apiKeys.pageInfo.endCursor!;
    const dot = c.indexOf('.');
    for (const at of [0, dot - 1, dot + 1, c.length - 1]) {
      expectGqlInvalidCursor(await gqlPage({ first: 3, after: flip(c, at) }));
    }
    expectGqlInvalidCursor(await gqlPage({ first: 3, after: 'garbage' }));
  });

  it('a cursor from another organization → INVALID_CURSOR', async () => {
    const foreign = (await gqlPage({ first: 1 }, org2.testKey)).body.data!.apiKeys.pageInfo.endCursor!;
    expectGqlInvalidCursor(await gqlPage({ first: 1, after: foreign }));
  });

  it('an expired cursor → INVALID_CURSOR', async () => {
    const c = (await gqlPage({ first: 3 })).body.data!.apiKeys.pageInfo.endCursor!;
    clock().advance((t.config.cursorTtlSeconds + 60) * 1000);
    expectGqlInvalidCursor(await gqlPage({ first: 3, after: c }));
  });

  it('after the last edge: an empty page with hasNextPage false', async () => {
    const all = await gqlPage({ first: 100 });
    const conn = all.body.data!.apiKeys;
    expect(conn.edges).toHaveLength(allIds.length);
    expect(conn.pageInfo.hasNextPage).toBe(false);
    const r = await gqlPage({ first: 3, after: conn.pageInfo.endCursor });
    expect(r.body.errors, r.text).toBeUndefined();
    expect(r.body.data!.apiKeys.edges).toEqual([]);
    expect(r.body.data!.apiKeys.pageInfo).toMatchObject({ hasNextPage: false, endCursor: null, startCursor: null });
  });
});
