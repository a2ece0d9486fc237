/**
 * Port `campaignAudience`: the contacts of a segment or a list, paged on the id keyset, with the
 * fields a campaign personalizes with. Campaigns freeze an audience by reading it page by page.
 * In HIPAA mode the members' sealed metadata keys are opened (the platform's own read, not in the
 * PHI access log: campaigns seal what they store of it), and a segment that filters on a PHI
 * metadata key is refused (VALIDATION_ERROR, `details.reason: "phi_metadata"`).
 */
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { compileRules } from './segments.rules.ts';
import { openContact, type ContactPhi } from './contacts.phi.ts';
import type { Contact } from './contacts.entities.ts';

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

const FIELDS = 'c.id, c.phone, c.email, c.first_name, c.last_name, c.country, c.metadata, c.phi';
const numbered = (sql: string) => { let i = 0; return sql.replace(/\?/g, () => `$${++i}`); };

export class CampaignAudience {
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #phi: ContactPhi;

  constructor(pool: Pool, clock: Clock, phi: ContactPhi) {
    this.#pool = pool;
    this.#clock = clock;
    this.#phi = phi;
  }

  /**
   * NOT_FOUND (with the field) when the segment or list is not the tenant's; VALIDATION_ERROR when
   * the segment filters on a PHI metadata key in HIPAA mode.
   */
  async assertSource(tenant: TenantRef, source: AudienceSource): Promise<void> {
    const rules = await this.#rules(tenant, source);
    if (rules) await this.#compile(tenant, rules);
  }

  async #compile(tenant: TenantRef, rules: Record<string, unknown>) {
    try {
      return compileRules(rules, this.#clock.now(), 'rules', { isPhiKey: await this.#phi.phiKeyTest(tenant.organizationId) });
    } catch (e) {
      // Named as the campaign's field: its segment.
      if (e instanceof ServiceError && e.details.reason === 'phi_metadata') {
        throw new ServiceError('VALIDATION_ERROR', `The segment filters on metadata.${String(e.details.metadata_key)}, which holds PHI and is stored encrypted in HIPAA mode`, {
          field: 'segment_id', reason: 'phi_metadata', segment_field: e.details.field, metadata_key: e.details.metadata_key,
        });
      }
      throw e;
    }
  }

  /** Up to `limit` members after the contact id `after` (ascending ids). */
  async audiencePage(tenant: TenantRef, source: AudienceSource, after: string | null, limit: number): Promise<AudienceMember[]> {
    const rules = await this.#rules(tenant, source);
    const params: unknown[] = [tenant.organizationId, tenant.mode];
    let sql: string;
    if (rules) {
      const compiled = await this.#compile(tenant, rules);
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
    const codec = await this.#phi.opener(tenant.organizationId, rows);
    return rows.map((r) => {
      const metadata = codec && r.phi ? openContact({ id: r.id, metadata: r.metadata ?? {}, phi: r.phi } as Contact, codec).metadata : (r.metadata ?? {});
      return { contactId: r.id, phone: r.phone, email: r.email, firstName: r.first_name, lastName: r.last_name, country: r.country, metadata };
    });
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
