/**
 * A relay consumer's per-instance cache of what it looks up for every batch, by key (an
 * organization, a tenant): the webhook endpoints, the event-triggered flows. Each lookup has a
 * version in `relay_lookup_versions`, bumped by a statement trigger on every write to the tables it
 * reads, in the writer's transaction (migration 20261129050000); the relay reads the versions in
 * its batch's first statement (`RelayTx.lookupVersion`). The cache answers while that version is
 * the one it was filled under; any other version empties it first. What it holds is never older
 * than its version: a key missing from it is read after the batch's first statement (a write that
 * committed in between bumped the version, so the next batch reads again). So a batch sees every
 * change committed before its events were read, as when it read them itself every time.
 */
import type { RelayTx } from './relay.ts';

/** Keys kept at most (the oldest filled go first; the batch's own keys stay). */
const MAX_KEYS = 10_000;

export class RelayLookupCache<V> {
  readonly #name: string;
  readonly #max: number;
  #version: number | undefined;
  #entries = new Map<string, V>();

  /** `name`: the lookup's row in relay_lookup_versions. */
  constructor(name: string, opts: { maxKeys?: number } = {}) {
    this.#name = name;
    this.#max = opts.maxKeys ?? MAX_KEYS;
  }

  /**
   * The values of `keys` for the relay's batch: from the cache, and by one `load` of the keys it
   * does not hold (`load` answers found keys; the others get `empty`).
   */
  async get(tx: RelayTx, keys: readonly string[], load: (missing: string[]) => Promise<Map<string, V>>, empty: V): Promise<Map<string, V>> {
    const version = tx.lookupVersion(this.#name);
    if (version !== this.#version) {
      this.#version = version;
      this.#entries = new Map();
    }
    // This batch's entries (a batch of another version may replace the map while `load` runs).
    const entries = this.#entries;
    const missing = keys.filter((k) => !entries.has(k));
    if (missing.length > 0) {
      const loaded = await load(missing);
      for (const k of missing) entries.set(k, loaded.get(k) ?? empty);
      if (entries.size > this.#max) {
        const wanted = new Set(keys);
        for (const k of entries.keys()) {
          if (entries.size <= this.#max) break;
          if (!wanted.has(k)) entries.delete(k);
        }
      }
    }
    return new Map(keys.map((k) => [k, entries.get(k)!]));
  }

  /** Keys held (tests). */
  get size(): number {
    return this.#entries.size;
  }
}
