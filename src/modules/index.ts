/**
 * The modules of the service, in one list. The composition root, the ORM, the GraphQL schema, the
 * event catalog, the route table and the job registry are all built from it: adding a context is
 * its folder, one line here and its migration (see ARCHITECTURE.md, "Adding a context").
 */
import { registerErrorCodes } from '../platform/errors.ts';
import { registerIdPrefixes } from '../platform/ids.ts';
import type { ModuleManifest } from './manifest.ts';
import { settingsModule } from './settings/index.ts';
import { messagingModule } from './messaging/index.ts';
import { webhooksModule } from './webhooks/index.ts';
import { numbersModule } from './numbers/index.ts';
import { verifyModule } from './verify/index.ts';
import { contactsModule } from './contacts/index.ts';
import { voiceModule } from './voice/index.ts';
import { agentsModule } from './agents/index.ts';
import { flowsModule } from './flows/index.ts';
import { complianceModule } from './compliance/index.ts';
import { campaignsModule } from './campaigns/index.ts';
import { billingModule } from './billing/index.ts';
import { hipaaModule } from './hipaa/index.ts';

export const MODULES = [
  settingsModule,
  messagingModule,
  webhooksModule,
  numbersModule,
  verifyModule,
  contactsModule,
  voiceModule,
  agentsModule,
  flowsModule,
  complianceModule,
  campaignsModule,
  billingModule,
  hipaaModule,
] as const satisfies readonly ModuleManifest[];

type Module = (typeof MODULES)[number];
/** Every module's services, flattened by service name (for the admin CLI, main.ts and tests). */
export type ModuleServices = UnionToIntersection<ReturnType<Module['create']>>;
/** Each module's services under its name (what `servicesOf(ctx, name)` answers). */
type ServicesByName = { [M in Module as M['name']]: ReturnType<M['create']> };
declare module '../context.ts' {
  interface InstalledModules extends ServicesByName {}
}
type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;

/** Every MikroORM entity of the service (the ORM is configured from it; the tenancy test enumerates it). */
export const ENTITIES = MODULES.flatMap((m) => [...m.entities]);
/** Entities that are not owned by one tenant. Anything else must carry the tenant filter. */
export const GLOBAL_ENTITIES = new Set(['Organization', 'User']);
/** The event catalog: every documented event type, in module order. */
export const EVENT_TYPES: readonly string[] = MODULES.flatMap((m) => [...(m.events ?? [])]);

for (const m of MODULES as readonly ModuleManifest[]) {
  if (m.ids) registerIdPrefixes(m.ids);
  if (m.errors) registerErrorCodes(m.name, m.errors);
}
