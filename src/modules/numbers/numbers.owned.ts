/**
 * Port `ownedNumbers`: the tenant's active numbers by id (compliance registers them for 10DLC), and
 * a number's capabilities (messaging checks `mms` before accepting media from it).
 */
import type { Pool } from 'pg';
import type { TenantRef } from '../../platform/db/tenant.ts';

declare module '../manifest.ts' {
  interface Ports {
    /** The tenant's active numbers by id (compliance registers them for 10DLC), and one number's capabilities. */
    ownedNumbers: Pick<OwnedNumbers, 'numbersByIds' | 'capabilitiesOf'>;
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

  /** The capabilities of the tenant's active number `number` (`sms`, `mms`, …); null when it is not one of them. */
  async capabilitiesOf(tenant: TenantRef, number: string): Promise<string[] | null> {
    const { rows } = await this.#pool.query<{ capabilities: string[] }>(
      `select capabilities from phone_numbers where organization_id = $1 and mode = $2 and number = $3 and status = 'active' limit 1`,
      [tenant.organizationId, tenant.mode, number],
    );
    return rows[0]?.capabilities ?? null;
  }
}
