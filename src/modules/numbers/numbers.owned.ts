/** Port `ownedNumbers`: the tenant's active numbers by id (compliance registers them for 10DLC). */
import type { Pool } from 'pg';
import type { TenantRef } from '../../platform/db/tenant.ts';

declare module '../manifest.ts' {
  interface Ports {
    /** The tenant's active numbers by id (compliance registers them for 10DLC). */
    ownedNumbers: Pick<OwnedNumbers, 'numbersByIds'>;
  }
}

export class OwnedNumbers {
  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  async numbersByIds(tenant: TenantRef, ids: readonly string[]): Promise<{ id: string; number: string }[]> {
    if (ids.length === 0) return [];
    const { rows } = await this.#pool.query<{ id: string; number: string }>(
      `select id, number from phone_numbers where organization_id = $1 and mode = $2 and id = any($3::text[]) and status = 'active'`,
      [tenant.organizationId, tenant.mode, [...ids]],
    );
    return rows;
  }
}
