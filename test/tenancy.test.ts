/** Tenant scoping of every entity, test/live separation, and jobs that re-enter their tenant. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GLOBAL_ENTITIES } from '../src/modules/index.ts';
import { TENANT_FILTER, tenantEm } from '../src/platform/db/tenant.ts';
import { UsageEntry } from '../src/platform/usage/usage.entities.ts';
import { recordUsage } from '../src/platform/usage/usage.ts';
import { ApiKey } from '../src/platform/tenancy/tenancy.entities.ts';
import { systemScope } from '../src/platform/auth/scope.ts';
import { newId } from '../src/platform/ids.ts';
import type { JobContext } from '../src/platform/jobs/jobs.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';

type Seen = { tenant: string | undefined; mode: string | undefined; usage: string[]; data: unknown };
const seen: Seen[] = [];
let t: TestApp;
let a: TestOrg;
let b: TestOrg;

beforeAll(async () => {
  t = await startTestApp({
    workers: true,
    registerJobs: (registry) => registry.register({
      name: 'test.probe',
      tenant: true,
      retryLimit: 0,
      handler: async (ctx: JobContext, data: { marker: string }) => {
        const usage = await ctx.em.find(UsageEntry, {}, { orderBy: { id: 'asc' } });
        seen.push({ tenant: ctx.scope?.organizationId, mode: ctx.scope?.mode, usage: usage.map((u) => u.kind), data });
      },
    }),
  });
  a = await t.createOrg('growth', 'A');
  b = await t.createOrg('growth', 'B');
});
afterAll(async () => { await t?.close(); });

const waitFor = <T>(probe: () => T | undefined, ms = 10_000): Promise<T> => eventually('the probe', probe, ms, 25);

describe('tenant filter', () => {
  it('every entity except the tenants themselves is scoped by a default, fail-closed tenant filter', () => {
    const all = [...t.app.orm.getMetadata()];
    const problems: string[] = [];
    for (const meta of all) {
      if (meta.embeddable || meta.virtual) continue;
      if (GLOBAL_ENTITIES.has(meta.className)) continue;
      const filter = meta.filters?.[TENANT_FILTER];
      if (!filter) problems.push(`${meta.className}: no tenant filter`);
      else if (!filter.default || !filter.args) problems.push(`${meta.className}: tenant filter must be default and take args`);
      if (!meta.properties.organizationId) problems.push(`${meta.className}: no organizationId`);
    }
    expect(all.length).toBeGreaterThan(GLOBAL_ENTITIES.size);
    expect(problems).toEqual([]);
  });

  it('a query without tenant parameters throws instead of reading across tenants', async () => {
    await expect(t.app.orm.em.fork().find(ApiKey, {})).rejects.toThrow(/tenant/);
  });

  it('a tenant EntityManager sees only its organization and mode', async () => {
    const now = t.clock.now();
    for (const [org, mode, kind] of [[a, 'test', 'a.test'], [a, 'live', 'a.live'], [b, 'test', 'b.test']] as const) {
      const em = tenantEm(t.app.orm, { organizationId: org.orgId, mode });
      await recordUsage(em, systemScope(org.orgId, mode, 'growth', newId('req')), { context: 'test', kind, quantity: 1, idempotencyKey: `${kind}-1` }, now);
    }
    const kinds = async (orgId: string, mode: 'live' | 'test') =>
      (await tenantEm(t.app.orm, { organizationId: orgId, mode }).find(UsageEntry, {})).map((u) => u.kind);
    expect(await kinds(a.orgId, 'test')).toEqual(['a.test']);
    expect(await kinds(a.orgId, 'live')).toEqual(['a.live']);
    expect(await kinds(b.orgId, 'test')).toEqual(['b.test']);
    expect(await kinds(b.orgId, 'live')).toEqual([]);
  });

  it('recording the same usage twice (a retried job) records it once', async () => {
    const em = tenantEm(t.app.orm, { organizationId: b.orgId, mode: 'live' });
    const scope = systemScope(b.orgId, 'live', 'growth', newId('req'));
    expect(await recordUsage(em, scope, { context: 'test', kind: 'dup', quantity: 2, idempotencyKey: 'dup-1' }, t.clock.now())).toBe(true);
    const again = tenantEm(t.app.orm, { organizationId: b.orgId, mode: 'live' });
    expect(await recordUsage(again, scope, { context: 'test', kind: 'dup', quantity: 2, idempotencyKey: 'dup-1' }, t.clock.now())).toBe(false);
    const { rows } = await t.db.query(`select count(*)::int as n from usage_entries where idempotency_key = 'dup-1'`);
    expect(rows[0].n).toBe(1);
  });
});

describe('jobs', () => {
  it('a job carries its tenant and mode and reads only that tenant\'s data', async () => {
    const scope = systemScope(a.orgId, 'live', 'growth', newId('req'));
    await t.app.jobs.enqueue('test.probe', { marker: 'one' }, { scope });
    const got = await waitFor(() => seen.find((s) => (s.data as { marker: string }).marker === 'one'));
    expect(got).toMatchObject({ tenant: a.orgId, mode: 'live', usage: ['a.live'] });
  });

  it('a job enqueued in a transaction that rolls back never runs; one that commits does', async () => {
    const scope = systemScope(b.orgId, 'test', 'growth', newId('req'));
    const em = tenantEm(t.app.orm, scope);
    await expect(em.transactional(async (tx) => {
      await t.app.jobs.enqueue('test.probe', { marker: 'rolled-back' }, { scope, em: tx });
      throw new Error('abort');
    })).rejects.toThrow('abort');
    await em.transactional(async (tx) => {
      await t.app.jobs.enqueue('test.probe', { marker: 'committed' }, { scope, em: tx });
    });
    const got = await waitFor(() => seen.find((s) => (s.data as { marker: string }).marker === 'committed'));
    expect(got).toMatchObject({ tenant: b.orgId, mode: 'test', usage: ['b.test'] });
    const { rows } = await t.db.query(`select count(*)::int as n from pgboss.job where name = 'test.probe' and data->'data'->>'marker' = 'rolled-back'`);
    expect(rows[0].n).toBe(0);
    expect(seen.some((s) => (s.data as { marker: string }).marker === 'rolled-back')).toBe(false);
  });
});
