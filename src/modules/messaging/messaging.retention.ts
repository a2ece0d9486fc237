/**
 * HIPAA housekeeping of messages (batched, idempotent, safe with several instances: see
 * platform/phiHousekeeping.ts):
 * - retention: the content (body, channel content, variables, sealed PHI, concealed payload) of
 *   messages older than the organization's retention period is deleted; the message row, its
 *   addresses, statuses and timestamps stay (`content_purged_at` set);
 * - backfill: content stored in clear before the organization's HIPAA mode was on (or by an
 *   instance that had not seen the change yet) is sealed.
 */
import { ContextHousekeeping } from '../../platform/phiHousekeeping.ts';
import type { Message } from './messaging.entities.ts';
import { sealMessage } from './messaging.phi.ts';

export class MessageRetention extends ContextHousekeeping {
  /** Purges the content of messages past their organization's retention period; returns how many. */
  purgeExpired(): Promise<number> {
    return this.housekeeping.purge([`
      with picked as (
        select id from messages where organization_id = $1 and created_at < $2 and content_purged_at is null
         order by id limit $4 for update)
      update messages m set body = null, variables = null, phi = null, sealed_content = null, content_purged_at = $3,
             content = case when m.content ? 'type' then jsonb_build_object('type', m.content->'type') else '{}'::jsonb end,
             metadata = case when m.phi is null then '{}'::jsonb else m.metadata end
        from picked where m.id = picked.id`]);
  }

  /** Seals clear content of organizations in HIPAA mode stored before the mode was on; returns how many. */
  sealBackfill(): Promise<number> {
    return this.housekeeping.backfill('messages', async (client, { organizationId, until, limit, codec }) => {
      const { rows } = await client.query<{ id: string; body: string | null; content: Record<string, unknown>; variables: Record<string, unknown> | null; metadata: Record<string, unknown> }>(
        `select id, body, content, variables, metadata from messages
          where organization_id = $1 and created_at <= $2 and phi is null and content_purged_at is null
            and (body is not null or content - 'type' <> '{}'::jsonb or variables is not null or metadata <> '{}'::jsonb)
          order by id limit $3 for update`, [organizationId, until, limit]);
      const sealed = rows.map((r) => sealMessage({ ...r, organizationId } as unknown as Message, codec));
      if (sealed.length > 0) {
        await client.query(
          `update messages m set body = null, variables = null, content = s.content, metadata = s.metadata, phi = s.phi
             from jsonb_to_recordset($1::jsonb) as s(id text, content jsonb, metadata jsonb, phi text) where m.id = s.id`,
          [JSON.stringify(sealed.map((m) => ({ id: m.id, content: m.content, metadata: m.metadata, phi: m.phi })))]);
      }
      return { picked: rows.length, changed: rows.length };
    });
  }
}
