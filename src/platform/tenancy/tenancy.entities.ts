/**
 * Organizations (the tenants), users, team memberships and API keys. Organizations and users are
 * global rows; memberships and keys belong to one organization and sit under the tenant filter.
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns } from '../db/tenant.ts';

export const PLANS = ['starter', 'growth', 'business', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

export const ROLES = ['owner', 'admin', 'developer', 'viewer', 'billing'] as const;
export type Role = (typeof ROLES)[number];

export const Organization = defineEntity({
  name: 'Organization',
  tableName: 'organizations',
  properties: {
    id: p.string().primary(),
    name: p.string(),
    /** The live plan (live keys' rate limits and quotas; billed). */
    plan: p.string().$type<Plan>(),
    /**
     * The plan test-mode keys act on, changed by test-mode checkouts and plan changes only; an
     * insert without it takes `plan` (a trigger). See {@link planOf}.
     */
    testPlan: p.string().$type<Plan>().nullable(),
    /** IPv4/IPv6 addresses and CIDR ranges; empty means no restriction. */
    ipAllowlist: p.json<string[]>(),
    /** /graphql accepts only uploaded trusted documents' ids, never a document's text (graphql/persisted.ts). */
    graphqlTrustedDocumentsOnly: p.boolean().default(false),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type Organization = InferEntity<typeof Organization>;

/** The organizations column holding the plan of a mode. */
export function planColumn(mode: 'live' | 'test'): 'plan' | 'test_plan' {
  return mode === 'test' ? 'test_plan' : 'plan';
}

/** The plan an organization's keys of `mode` act on. */
export function planOf(org: Pick<Organization, 'plan' | 'testPlan'>, mode: 'live' | 'test'): Plan {
  return mode === 'test' ? org.testPlan ?? org.plan : org.plan;
}

export const User = defineEntity({
  name: 'User',
  tableName: 'users',
  properties: {
    id: p.string().primary(),
    email: p.string().unique(),
    name: p.string().nullable(),
    createdAt: p.datetime(),
  },
});
export type User = InferEntity<typeof User>;

export const TeamMember = defineEntity({
  name: 'TeamMember',
  tableName: 'team_members',
  filters: tenantFilter('organization'),
  properties: {
    id: p.string().primary(),
    organizationId: p.string(),
    userId: p.string(),
    role: p.string().$type<Role>(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type TeamMember = InferEntity<typeof TeamMember>;

export const ApiKey = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  filters: tenantFilter('organization'),
  properties: {
    ...tenantRowColumns(),
    role: p.string().$type<Role>(),
    name: p.string().nullable(),
    /** `svc_live_sk_` or `svc_test_sk_`, kept for identification with `last4`. */
    prefix: p.string(),
    last4: p.string(),
    /** HMAC-SHA256 of the full key, keyed with APP_SECRET; the key itself is never stored. */
    keyHash: p.string().unique(),
    createdBy: p.string().nullable(),
    createdAt: p.datetime(),
    lastUsedAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
  },
});
export type ApiKey = InferEntity<typeof ApiKey>;
