/**
 * Reads of one tenant row by id on the hot path, as plain entity-shaped objects (never managed by
 * the ORM): concurrent reads share one statement on the raw pool (platform/db/batcher.ts), a named
 * prepared statement joining the requested (id, organization, mode) triples to the table.
 */
import { genericArrays } from './plans.ts';
import type { Pool } from 'pg';
import type { TenantRef } from './tenant.ts';
import { Batcher } from './batcher.ts';
import { rowEntity, type EntityColumn } from './groupInsert.ts';

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

export class TenantRowReader<T> {
  readonly #pool: Pool;
  readonly #columns: readonly EntityColumn[];
  readonly #text: string;
  readonly #name: string;
  readonly #batcher = new Batcher<{ tenant: TenantRef; id: string }, T | null>((items) => this.#read(items), { maxInFlight: 2 });

  /** `columns`: entityColumns(orm.getMetadata().get(Entity).properties) of the table's entity. */
  constructor(pool: Pool, table: string, columns: readonly EntityColumn[]) {
    if (!IDENTIFIER.test(table)) throw new Error(`not a plain SQL identifier: ${table}`);
    this.#pool = pool;
    this.#columns = columns;
    this.#name = `${table}_by_id`;
    this.#text = `select r.idx, to_jsonb(t) as row
                    from unnest(${genericArrays(['$1::text[]', '$2::text[]', '$3::text[]'])}) with ordinality as r(id, org, mode, idx)
                    join "${table}" t on t.id = r.id and t.organization_id = r.org and t.mode = r.mode`;
  }

  /** The tenant's row `id`, or null. */
  byId(tenant: TenantRef, id: string): Promise<T | null> {
    return this.#batcher.submit({ tenant, id });
  }

  async #read(items: { tenant: TenantRef; id: string }[]): Promise<(T | null)[]> {
    const { rows } = await this.#pool.query<{ idx: string; row: Record<string, unknown> }>({
      name: this.#name,
      text: this.#text,
      values: [items.map((i) => i.id), items.map((i) => i.tenant.organizationId), items.map((i) => i.tenant.mode)],
    });
    const found = new Map(rows.map((r) => [Number(r.idx), r.row]));
    return items.map((_, i) => {
      const row = found.get(i + 1);
      return row ? rowEntity<T>(this.#columns, row) : null;
    });
  }
}
