/**
 * Port `campaignAudience`: the contacts of a segment or a list, paged on the id keyset, with the
 * fields a campaign personalizes with. Campaigns freeze an audience by reading it page by page.
 */
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { compileRules } from './segments.ts';

export type AudienceSource = { segmentId?: string | null; listId?: string | null };
export type AudienceMember = {
  contactId: string; phone: string | null; email: string | null; firstName: string | null; lastName: string | null;
  country: string | null; metadata: Record<string, unknown>;
};

declare module '../manifest.ts' {
  interface Ports {
    /** A segment's or a list's contacts, page by page (campaigns freeze their audience with it). */
    campaignAudience: Pick<CampaignAudience, 'assertSource' | 'audiencePage'>;
  }
}

const FIELDS = 'c.id, c.phone, c.email, c.first_name, c.last_name, c.country, c.metadata';
const numbered = (sql: string) => { let i = 0; return sql.replace(/\?/g, () => `$${++i}`); };

export class CampaignAudience {
  readonly #pool: Pool;
  readonly #clock: Clock;

  constructor(pool: Pool, clock: Clock) {
    this.#pool = pool;
    this.#clock = clock;
  }

  /** NOT_FOUND (with the field) when the segment or list is not the tenant's. */
  async assertSource(tenant: TenantRef, source: AudienceSource): Promise<void> {
    await this.#rules(tenant, source);
  }

  /** Up to `limit` members after the contact id `after` (ascending ids). */
  async audiencePage(tenant: TenantRef, source: AudienceSource, after: string | null, limit: number): Promise<AudienceMember[]> {
    const rules = await this.#rules(tenant, source);
    const params: unknown[] = [tenant.organizationId, tenant.mode];
    let sql: string;
    if (rules) {
      const compiled = compileRules(rules, this.#clock.now());
      sql = `select ${FIELDS} from contacts c where c.organization_id = ? and c.mode = ? and ${compiled.sql}`;
      params.push(...compiled.params);
    } else {
      sql = `select ${FIELDS} from contact_list_members m join contacts c on c.id = m.contact_id
             where m.organization_id = ? and m.mode = ? and m.list_id = ?`;
      params.push(source.listId);
    }
    if (after) { sql += ' and c.id > ?'; params.push(after); }
    sql += ' order by c.id limit ?';
    params.push(limit);
    const { rows } = await this.#pool.query(numbered(sql), params);
    return rows.map((r) => ({
      contactId: r.id, phone: r.phone, email: r.email, firstName: r.first_name, lastName: r.last_name, country: r.country, metadata: r.metadata ?? {},
    }));
  }

  /** The segment's rules, or null for a list (after checking it exists). */
  async #rules(tenant: TenantRef, source: AudienceSource): Promise<Record<string, unknown> | null> {
    if (source.segmentId) {
      const { rows } = await this.#pool.query('select rules from segments where organization_id = $1 and mode = $2 and id = $3', [tenant.organizationId, tenant.mode, source.segmentId]);
      if (!rows[0]) throw new ServiceError('NOT_FOUND', 'Segment not found', { field: 'segment_id', id: source.segmentId });
      return rows[0].rules;
    }
    const { rows } = await this.#pool.query('select 1 from contact_lists where organization_id = $1 and mode = $2 and id = $3', [tenant.organizationId, tenant.mode, source.listId]);
    if (!rows[0]) throw new ServiceError('NOT_FOUND', 'Contact list not found', { field: 'list_id', id: source.listId });
    return null;
  }
}
