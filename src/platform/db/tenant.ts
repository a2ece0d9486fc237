/**
 * The tenant filter. Every tenant-owned entity declares `filters: tenantFilter(...)`; the filter is
 * on by default and takes arguments, so an EntityManager without tenant parameters throws instead
 * of reading across tenants (fail closed). Code that must cross tenants (API-key lookup, admin
 * CLI, scheduled pruning) opts out per query with `filters: { tenant: false }`.
 */
import { p } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { MikroORM } from '@mikro-orm/postgresql';

export const TENANT_FILTER = 'tenant';

export const MODES = ['live', 'test'] as const;
export type Mode = (typeof MODES)[number];
export type TenantRef = { organizationId: string; mode: Mode };

/** `organization`: rows shared by both modes (team members, API keys, audit); `organization+mode`: data rows. */
export type TenantScoping = 'organization' | 'organization+mode';

export function tenantFilter(scoping: TenantScoping) {
  return {
    [TENANT_FILTER]: {
      name: TENANT_FILTER,
      default: true,
      args: true,
      cond: (args: Record<string, unknown>) => {
        if (typeof args.organizationId !== 'string') throw new Error('tenant filter used without an organization');
        if (scoping === 'organization') return { organizationId: args.organizationId };
        if (args.mode !== 'live' && args.mode !== 'test') throw new Error('tenant filter used without a mode');
        return { organizationId: args.organizationId, mode: args.mode };
      },
    },
  };
}

/**
 * The columns a mode-scoped tenant row starts with: its prefixed id, organization and mode.
 * Spread into `properties` (fresh builders on every call: builders are not shared between entities).
 */
export function tenantRowColumns() {
  return {
    id: p.string().primary(),
    organizationId: p.string(),
    mode: p.string().$type<Mode>(),
  };
}

/** A fresh EntityManager bound to one tenant and mode. */
export function tenantEm(orm: MikroORM, tenant: TenantRef): EntityManager {
  const em = orm.em.fork({ clear: true });
  em.setFilterParams(TENANT_FILTER, { organizationId: tenant.organizationId, mode: tenant.mode });
  return em;
}

/** Query option that opts one query out of the tenant filter (admin and cross-tenant lookups only). */
export const ALL_TENANTS = { filters: { [TENANT_FILTER]: false } } as const;
