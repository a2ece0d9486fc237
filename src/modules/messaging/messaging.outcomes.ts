/**
 * Port `messageOutcomes`: what became of a set of outbound messages, counted per caller-defined
 * group (campaigns: per A/B variant): by status, the segments billed, and how many recipients
 * replied (an inbound message on the channel from the recipient after the message).
 */
import type { Pool } from 'pg';
import type { TenantRef } from '../../platform/db/tenant.ts';

export type OutcomeCounts = { group: string; queued: number; sent: number; delivered: number; read: number; failed: number; replied: number; segments: number };

declare module '../manifest.ts' {
  interface Ports {
    /** Status counts of messages by id, per group (campaign stats and A/B winners). */
    messageOutcomes: Pick<MessageOutcomes, 'countByGroup'>;
  }
}

export class MessageOutcomes {
  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  /** `ids[i]` belongs to `groups[i]`. `read` counts read messages; `delivered` counts delivered or read. */
  async countByGroup(tenant: TenantRef, ids: readonly string[], groups: readonly string[]): Promise<OutcomeCounts[]> {
    if (ids.length === 0) return [];
    const { rows } = await this.#pool.query(
      `select g.grp as group,
              count(*) filter (where m.status = 'queued')::int as queued,
              count(*) filter (where m.status in ('sent','delivered','read'))::int as sent,
              count(*) filter (where m.status in ('delivered','read'))::int as delivered,
              count(*) filter (where m.status = 'read')::int as read,
              count(*) filter (where m.status = 'failed')::int as failed,
              count(*) filter (where exists (
                select 1 from messages i where i.organization_id = m.organization_id and i.mode = m.mode and i.direction = 'inbound'
                  and i.channel = m.channel and i."from" = m."to" and i.created_at > m.created_at))::int as replied,
              coalesce(sum(m.segments), 0)::int as segments
         from unnest($3::text[], $4::text[]) as g(id, grp)
         join messages m on m.id = g.id and m.organization_id = $1 and m.mode = $2
        group by g.grp`,
      [tenant.organizationId, tenant.mode, [...ids], [...groups]],
    );
    return rows as OutcomeCounts[];
  }
}
