/**
 * What a module (one bounded context under `src/modules/<ctx>/`) contributes to the service,
 * declared once in its `index.ts` and listed in `src/modules/index.ts`. The composition root
 * (`app.ts`), the ORM configuration, the GraphQL schema, the event catalog, the REST route table,
 * the job registry and the provider-callback routes are all built by looping over that list.
 *
 * Modules never reach each other's services: a module that needs something from another declares
 * the port by name in `requires`, and the module that offers it returns it from `provides`. Port
 * types are declared by the providing module by augmenting {@link Ports} (see `contacts/index.ts`).
 */
import type { EntitySchema } from '@mikro-orm/core';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Config, CoreConfig } from '../config.ts';
import type { EnvReader } from '../platform/env.ts';
import type { ErrorDefinition } from '../platform/errors.ts';
import type { Clock } from '../platform/clock.ts';
import type { Logger } from '../platform/logger.ts';
import type { CursorCodec } from '../platform/pagination.ts';
import type { JobRegistry, Jobs } from '../platform/jobs/jobs.ts';
import type { EventBus } from '../platform/events/bus.ts';
import type { EventsService } from '../platform/events/events.service.ts';
import type { EventRelay } from '../platform/events/relay.ts';
import type { RateLimiter } from '../platform/ratelimit/limiter.ts';
import type { IdempotencyStore } from '../platform/idempotency.ts';
import type { Instruments } from '../platform/instruments.ts';
import type { RestRoute } from '../rest/route.ts';
import type { Organization } from '../platform/tenancy/tenancy.entities.ts';

/**
 * Cross-module ports by name. A module that provides one declares its type here by augmentation:
 * `declare module '../manifest.ts' { interface Ports { consent: ConsentPort } }`.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface Ports {}
export type PortName = keyof Ports;

/** `ports('name')` for a required port; `ports.optional('name')()` for an optional one (undefined when absent). */
export type PortResolver = {
  <K extends PortName>(name: K): Ports[K];
  optional<K extends PortName>(name: K): () => Ports[K] | undefined;
};

/** The platform every module is built from (nothing module-specific). */
export type Platform = {
  config: Config;
  clock: Clock;
  log: Logger;
  orm: MikroORM;
  /** Small pg pool for hot-path raw SQL. */
  pool: Pool;
  databaseUrl: string;
  cursors: CursorCodec;
  jobs: Jobs;
  bus: EventBus;
  events: EventsService;
  relay: EventRelay;
  limiter: RateLimiter;
  idempotency: IdempotencyStore;
  /** Every documented event type (the catalog built from the module list). */
  eventTypes: readonly string[];
  /** Counters for `/metrics` (no-ops without METRICS_TOKEN). */
  instruments: Instruments;
  /** Clears every instance's credential cache at commit (key, role, allowlist or plan changes). */
  authChanged(): void;
};

/** A provider callback route: `POST /v1/providers/{provider}/callbacks`, signed by the provider (no API key). */
export type ProviderCallbackHandler = (provider: string, rawBody: string, signature: string | undefined, request: ProviderCallbackRequest) => Promise<Record<string, unknown> | undefined>;
/** The rest of a provider's callback request, for providers that sign more than the body (the URL, their own headers). */
export type ProviderCallbackRequest = { pathAndQuery: string; headers: Record<string, string | string[] | undefined> };

/**
 * A page of a provider's hosted flow that a person opens in a browser (the payments sandbox's
 * checkout page): `GET /v1/providers/{provider}/callbacks?…`, no API key; its form posts to the
 * provider's callback. The handler answers the whole HTML document and its headers (a CSP with a
 * nonce of its own).
 */
export type ProviderPageHandler = (provider: string, query: URLSearchParams) => Promise<{ status: number; html: string; headers?: Record<string, string> }>;

/** Lifecycle hooks for background parts that are not pg-boss jobs (relay consumers, pollers). */
export type ModuleWorkers = { start(): Promise<void> | void; stop(): Promise<void> };

/**
 * A command of the admin CLI (`npm run -s admin -- <noun> <verb> …`), declared in the manifest of the
 * module that owns what it changes; `src/admin.ts` lists every module's and runs the one asked for.
 */
export type AdminCommand = {
  /** `<noun> <verb> [options]`, as `--help` prints it after `npm run -s admin --`. */
  usage: string;
  /** What it does, for `--help`. */
  summary: string;
  /** The string options it reads (`--json` is every command's). */
  options?: readonly string[];
  run(ctx: AdminContext): Promise<void>;
};

/** What a command runs with: the configuration, the database (migrated), its options and its output. */
export type AdminContext = {
  config: Config;
  orm: MikroORM;
  /** The service's database (DATABASE_URL, or the embedded cluster's). */
  databaseUrl: string;
  /** The owner role's URL the migrations ran as (DATABASE_MIGRATION_URL, or the embedded cluster's), when there is one. */
  migrationUrl: string | undefined;
  clock: Clock;
  cursors: CursorCodec;
  /** A string option's value (undefined when absent). */
  option(name: string): string | undefined;
  /** An option that must be one of `allowed`; `fallback` when absent (a usage error when absent without one). */
  oneOf<T extends string>(name: string, allowed: readonly T[], fallback?: T): T;
  /** Stops with a usage error (exit 2, nothing on stdout). */
  fail(message: string): never;
  /** Prints the result: one JSON document with --json, else the human line(s). */
  out(json: unknown, human: string): void;
  /** The organizations, oldest first (the first is the one `npm start` created). */
  organizations(): Promise<Organization[]>;
  /** The organization `--org` names, else the oldest (a usage error when there is none yet). */
  organizationOrDefault(): Promise<string>;
};

export type ModuleManifest<Name extends string = string, S extends object = object> = {
  name: Name;
  /** MikroORM entities of this module (every one tenant-scoped unless listed in `globalEntities`). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  entities: readonly (EntitySchema<any, any> | (abstract new (...args: any[]) => unknown))[];
  /**
   * Id prefixes of this module's resources → GraphQL type names, declared once as a const in the
   * module's index.ts, which also hands its type to `ModuleIdPrefixes` (`extends Readonly<typeof ids>`).
   */
  ids?: Readonly<Record<string, string>>;
  /**
   * Error codes this module adds (code → HTTP status and default message), declared once as a const
   * in the module's index.ts, which also hands its type to `ModuleErrorCodes`; the platform keeps only
   * the codes every context shares (platform/errors.ts).
   */
  errors?: Readonly<Record<string, ErrorDefinition>>;
  /** Event types of the catalog this module emits (webhook endpoints subscribe to them). */
  events?: readonly string[];
  /**
   * Reads the module's settings (its `<ctx>.config.ts`): the result is `config.<name>`, typed by
   * augmenting `ModuleConfigs` in config.ts. Every variable is read through `env`, which
   * documents it for docs/configuration.md.
   */
  config?(env: EnvReader, core: CoreConfig): unknown;
  /** Ports this module needs from others; the app fails to start when one has no provider. */
  requires?: readonly PortName[];
  /**
   * Ports this module uses when some installed module provides them (a seam with a context that
   * may be absent): `ports.optional('name')` returns a getter that answers the port or undefined.
   */
  optional?: readonly PortName[];
  /**
   * Builds the module's services. `ports` resolves a required port; call it in the constructor
   * and keep the result: the port object forwards to its provider, which is wired before any
   * request or job runs.
   */
  create(platform: Platform, ports: PortResolver): S;
  /** Ports this module offers to others, from its services. */
  provides?(services: S, platform: Platform): Partial<Ports>;
  /** The module's `/v1` routes, as data (see rest/route.ts). */
  routes?: readonly RestRoute[];
  /** Its admin CLI commands, keyed `<noun> <verb>`. */
  commands?: Readonly<Record<string, AdminCommand>>;
  /** Registers the module's pg-boss jobs. */
  jobs?(registry: JobRegistry, services: S, platform: Platform): void;
  /** Handles provider callbacks for the providers this module owns (keyed by provider name). */
  callbacks?(services: S, platform: Platform): Record<string, ProviderCallbackHandler>;
  /** Pages of the providers this module owns, served on their callback path with GET (keyed by provider name). */
  pages?(services: S, platform: Platform): Record<string, ProviderPageHandler>;
  /** Background parts started with the workers (after pg-boss). */
  workers?(services: S, platform: Platform): ModuleWorkers;
  /** Released on shutdown (provider connections). */
  close?(services: S): Promise<void>;
};

/** Keeps the literal name and the service bag's type for the module list. */
export function defineModule<const Name extends string, S extends object>(m: ModuleManifest<Name, S>): ModuleManifest<Name, S> {
  return m;
}

/**
 * Ports handed out before their provider exists: each resolved port is a forwarder that looks the
 * provider up on every call, and `verify()` (called by the composition root once every module is
 * built, before anything runs) fails when a required port has no provider.
 */
export class PortRegistry {
  readonly #provided = new Map<PortName, unknown>();

  provide(from: string, ports: Partial<Ports>): void {
    for (const [name, impl] of Object.entries(ports) as [PortName, unknown][]) {
      if (this.#provided.has(name)) throw new Error(`port ${String(name)} is provided twice (second time by ${from})`);
      this.#provided.set(name, impl);
    }
  }

  resolverFor(module: string, declared: readonly PortName[], optional: readonly PortName[] = []): PortResolver {
    const required = <K extends PortName>(name: K): Ports[K] => {
      if (!declared.includes(name)) throw new Error(`module ${module} uses port ${String(name)} without declaring it in requires`);
      let impl: Record<string | symbol, unknown> | undefined;
      const bound = new Map<string | symbol, unknown>();
      return new Proxy({}, {
        get: (_t, prop) => {
          if (bound.has(prop)) return bound.get(prop);
          impl ??= this.#provided.get(name) as Record<string | symbol, unknown> | undefined;
          if (!impl) throw new Error(`port ${String(name)} has no provider`);
          const value = impl[prop];
          if (typeof value !== 'function') return value;
          const fn = (value as (...a: unknown[]) => unknown).bind(impl);
          bound.set(prop, fn);
          return fn;
        },
      }) as Ports[K];
    };
    return Object.assign(required, {
      optional: <K extends PortName>(name: K): (() => Ports[K] | undefined) => {
        if (!optional.includes(name)) throw new Error(`module ${module} uses port ${String(name)} without declaring it in optional`);
        return () => this.#provided.get(name) as Ports[K] | undefined;
      },
    });
  }

  /** Throws when a port some module requires has no provider. */
  verify(modules: readonly ModuleManifest[]): void {
    for (const m of modules) {
      for (const name of m.requires ?? []) {
        if (!this.#provided.has(name)) throw new Error(`module ${m.name} requires port ${String(name)}, which no module provides`);
      }
    }
  }
}
