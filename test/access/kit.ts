/**
 * The kit of the generated access tests (test/access.test.ts): each module's file in this folder
 * exports its fixtures, sample bodies and sample documents with `defineAccessFixtures`, and the
 * test merges them. A new module adds its own file here; no shared test file changes.
 */
import type { ManualClock } from '../../src/platform/clock.ts';
import type { TestApp, TestOrg } from '../helpers/testApp.ts';

/** Makes a resource of tenant A and returns its id (or, for `a+b` prefixes, ids space-separated). */
export type Fixture = () => Promise<string>;
/** A valid document for a root field; `id` is a tenant-A resource of the field's id type. */
export type GqlSample = { doc: string; resource?: string; vars?: () => Record<string, unknown> };

/** One module's share of the access tests. */
export type AccessFixtures = {
  /** Makes a resource of the given id prefix in tenant A and returns its id. */
  fixtures?: Record<string, Fixture>;
  /** Bodies for routes that take one (keyed by the operation endpoint); functions give a fresh one each call. */
  restBodies?: Record<string, unknown>;
  /** Routes with a second path parameter: makes the sub-resource of the given (tenant A) parent id. */
  subFixtures?: Record<string, (parent: string) => Promise<string>>;
  /** A valid document for each root field of the module (keyed `Query.field` / `Mutation.field`). */
  gqlSamples?: Record<string, GqlSample>;
  /** Runs once after the app, the tenants and the role keys exist (e.g. a number to call from). */
  beforeAll?: () => Promise<void>;
};

/** What a module's fixtures may use: the app, tenant A and the shared generators. */
export type AccessContext = {
  t: TestApp;
  /** Tenant A: fixtures make their resources here. */
  a: TestOrg;
  /** Moves the manual clock a second on, so no key ever waits in the burst queue. */
  tick: () => void;
  unique: () => number;
  phone: () => string;
  /** Sandbox-inventory numbers nobody holds yet: one range to buy, one to port in. */
  buyable: () => string;
  portable: () => string;
  /** Makes a fixture of any module by its id prefix (after a tick), failing if it gives no id. */
  makeFixture: (prefix: string) => Promise<string>;
  /** Fills a route's path parameters in order from a fixture (several ids are space-separated). */
  fillPath: (path: string, ids: string) => string;
};

export type AccessFixturesFactory = (ctx: AccessContext) => AccessFixtures;

/** Declares a module's access fixtures; the factory runs once the test app is up. */
export const defineAccessFixtures = (factory: AccessFixturesFactory): AccessFixturesFactory => factory;

/** Fills a route's path parameters in order from a fixture (several ids are space-separated). */
export const fillPath = (path: string, ids: string) => ids.split(' ').reduce((p, id) => p.replace(/\{\w+\}/, id), path);

type Merged = Required<Omit<AccessFixtures, 'beforeAll'>> & { beforeAll: Array<() => Promise<void>> };

/**
 * Builds every module's fixtures against one context and merges them. A key two modules both
 * define is an error: each id prefix, endpoint and root field belongs to one module.
 */
export function loadAccessFixtures(t: TestApp, a: TestOrg, modules: Record<string, AccessFixturesFactory>): Merged & { ctx: AccessContext } {
  const merged: Merged = { fixtures: {}, restBodies: {}, subFixtures: {}, gqlSamples: {}, beforeAll: [] };
  let seq = 0;
  const unique = () => ++seq;
  const tick = () => (t.clock as ManualClock).advance(1000);
  const ctx: AccessContext = {
    t, a, tick, unique, fillPath,
    phone: () => `+1415555${String(1000 + unique()).padStart(4, '0')}`,
    buyable: () => `+1646555${String(1000 + unique()).padStart(4, '0')}`,
    portable: () => `+1917555${String(1000 + unique()).padStart(4, '0')}`,
    makeFixture: async (prefix) => {
      tick();
      const id = await merged.fixtures[prefix]!();
      if (typeof id !== 'string') throw new Error(`fixture ${prefix} failed`);
      return id;
    },
  };
  if (Object.keys(modules).length === 0) throw new Error('no access fixtures found (test/access/<module>.ts)');
  const owners = new Map<string, string>();
  for (const [file, factory] of Object.entries(modules)) {
    if (typeof factory !== 'function') throw new Error(`${file}: export default defineAccessFixtures(...)`);
    const { beforeAll, ...maps } = factory(ctx);
    for (const [kind, entries] of Object.entries(maps) as Array<[keyof typeof maps, Record<string, unknown> | undefined]>) {
      for (const [key, value] of Object.entries(entries ?? {})) {
        const owner = owners.get(`${kind} ${key}`);
        if (owner) throw new Error(`${kind} '${key}' is defined by both ${owner} and ${file}`);
        owners.set(`${kind} ${key}`, file);
        (merged[kind] as Record<string, unknown>)[key] = value;
      }
    }
    if (beforeAll) merged.beforeAll.push(beforeAll);
  }
  return { ...merged, ctx };
}
