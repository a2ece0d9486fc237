/**
 * The role matrix in one place. Every operation names one of these sets; GraphQL (Pothos
 * scope-auth) and REST (the router) both check through `hasRole`.
 */
import { ROLES, type Role } from '../tenancy/tenancy.entities.ts';

export { ROLES, type Role };

export const EVERY_ROLE: readonly Role[] = ROLES;
/** Owners and admins: keys, security settings, audit. */
export const ADMINS: readonly Role[] = ['owner', 'admin'];
export const OWNER_ONLY: readonly Role[] = ['owner'];
/** People who build on the API: owners, admins, developers. */
export const BUILDERS: readonly Role[] = ['owner', 'admin', 'developer'];
/** Everyone who may read operational data (not billing-only users). */
export const READERS: readonly Role[] = ['owner', 'admin', 'developer', 'viewer'];
/** Billing pages: owners, admins and the billing role. */
export const BILLING_ROLES: readonly Role[] = ['owner', 'admin', 'billing'];

const RANK: Record<Role, number> = { owner: 4, admin: 3, developer: 2, viewer: 1, billing: 1 };

export function hasRole(role: Role, allowed: readonly Role[]): boolean {
  return allowed.includes(role);
}

/** May a holder of `actor` hand out `target`? Nobody grants a role above their own; only owners grant owner. */
export function canGrant(actor: Role, target: Role): boolean {
  if (target === 'owner') return actor === 'owner';
  if (target === 'billing') return RANK[actor] >= RANK.admin;
  return RANK[actor] >= RANK[target] && RANK[actor] >= RANK.admin;
}
